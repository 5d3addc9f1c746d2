// spmd/ops/attention.hpp — scaled dot-product attention as one operator, causal or not, and its
// backward: the sharding rules (the host kernels are in spmd/runtime/ops/attention.hpp).
//
//   attention<D, Causal>, q (b, q, w), k, v (b, k, w)       "bqw,bkw,bkw->bqw", k fixed
//       w = heads × D: each head's softmax(q kᵀ · scale [+ causal mask]) v, heads side by side
//   attention_backward<D, Causal>, g, q, k, v (one device's) "bcw,bcw,bcw,bcw->sbcw", c fixed
//   attention_backward_q<D, Causal>, g, q, k, v  → dq      "bqw,bqw,bkw,bkw->bqw", k fixed
//   attention_backward_kv<D, Causal>, g, q, k, v → dk, dv  "bqw,bqw,bkw,bkw->sbkw", k fixed
//   causal_attention<D> = attention<D, true> (and its backward)
//
// The query positions q and the key positions k are separate factors, so the positions shard
// (context parallelism, docs/context_parallel.md): a rank holding a slice of the queries needs
// every key, so k is fixed and q free. With q, k and v Shard(1) on a mesh dim, propagation
// keeps the queries split and all-gathers K and V (the all-gather method); the output is split
// as q was. The causal mask then needs the first global position of the rank's queries: the
// kernel reads it from its block's offset (needs_offsets). In the backward, dq is split like q
// (attention_backward_q), and dk, dv are sums over the query positions: q is contracted in
// attention_backward_kv, whose output is Partial(sum) on the dims that split q, and the
// gradient's redistribute to k's layout reduce-scatters it. Where the queries are not split the
// fused attention_backward computes all three from one recomputed softmax (two products fewer).
//
// w may be sharded (the heads, Megatron's tensor parallelism: q, k and v column-parallel) only
// evenly in whole heads (`even_in`: 4 heads on 8 ranks gather the width rather than split a
// head); the kernel checks it again. The batch b shards freely. No Partial passes (softmax is
// neither linear nor monotone); a stacked output's new leading dim is output-only (fixed).
#pragma once

#include <stdexcept>
#include <string>

#include "spmd/core/extents.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/rule.hpp"
#include "spmd/ops/shape_text.hpp"

namespace spmd::ops {

namespace attention_detail {
/// q (b, q, w) and k, v (b, k, w): k and v of one shape, q of k's batch and width (and, causal,
/// of its positions: the mask is one device's square one), w a multiple of the head dim d;
/// `first` is q's input (1 with the output's gradient before it, which is q's shape).
constexpr void check_shapes(const svec<shape_vec, max_op_inputs>& in, int first, index_t d, bool causal,
                            const char* name) {
  const shape_vec& q = in[first];
  auto same = [](index_t a, index_t b) { return a == dyn || b == dyn || a == b; };
  bool ok = true;
  for (int i = 0; ok && i < in.size(); ++i) ok = in[i].size() == 3;
  if (ok) {
    const shape_vec& k = in[first + 1];
    const shape_vec& v = in[first + 2];
    for (int x = 0; ok && x < 3; ++x) ok = same(k[x], v[x]) && (x == 1 && !causal ? true : same(q[x], k[x]));
    for (int x = 0; ok && first == 1 && x < 3; ++x) ok = same(in[0][x], q[x]);
  }
  if (!ok)
    throw std::invalid_argument(std::string("spmd::") + name +
                                (causal ? ": q, k and v (and the gradient) must be of one shape (batch, positions, "
                                          "heads x head dim); q is "
                                        : ": k and v must be of one shape (batch, positions, heads x head dim), q (and "
                                          "the gradient) of their batch and width; q is ") +
                                shape_text(q) + ", k " + shape_text(in[first + 1]) + ", v " + shape_text(in[first + 2]));
  if (q[2] != dyn && q[2] % d != 0)
    throw std::invalid_argument(std::string("spmd::") + name + ": the width " + std::to_string(q[2]) +
                                " is not a multiple of the head dim " + std::to_string(d));
}
}  // namespace attention_detail

/// Attention over heads of HeadDim: out (b, q, w) from q (b, q, w), k, v (b, k, w); Causal:
/// query position i sees the keys j <= i.
template <index_t HeadDim, bool Causal>
struct attention {
  static_assert(HeadDim >= 1, "spmd::attention: the head dim must be at least 1.");
  static constexpr const char* name = Causal ? "causal_attention" : "attention";
  static constexpr bool causal = Causal;
  static constexpr bool needs_offsets = Causal;  // the mask needs the queries' first position
  double scale = 1.0;  // applied to q kᵀ (1/√HeadDim in a transformer)

  static constexpr op_rule rule(const op_context&) {
    return einsum("bqw,bkw,bkw->bqw").fixed('k').even_in('w', HeadDim);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    attention_detail::check_shapes(in, 0, HeadDim, Causal, name);
    return in[0];
  }
};

/// Its backward where the positions are whole: from the output's gradient g and q, k, v (each
/// (b, c, w)), the three gradients stacked, (3, b, c, w): dq, dk, dv.
template <index_t HeadDim, bool Causal>
struct attention_backward {
  static_assert(HeadDim >= 1, "spmd::attention: the head dim must be at least 1.");
  static constexpr const char* name = Causal ? "causal_attention_backward" : "attention_backward";
  static constexpr bool causal = Causal;
  double scale = 1.0;

  static constexpr op_rule rule(const op_context&) {
    return einsum("bcw,bcw,bcw,bcw->sbcw").fixed('c').even_in('w', HeadDim);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    attention_detail::check_shapes(in, 1, HeadDim, true, name);  // one device's: one length
    shape_vec out{};
    out.push_back(3);
    for (int d = 0; d < 3; ++d) out.push_back(in[1][d]);
    return out;
  }
};

/// The backward's dq (b, q, w), split as q is.
template <index_t HeadDim, bool Causal>
struct attention_backward_q {
  static_assert(HeadDim >= 1, "spmd::attention: the head dim must be at least 1.");
  static constexpr const char* name = Causal ? "causal_attention_backward_q" : "attention_backward_q";
  static constexpr bool causal = Causal;
  static constexpr bool needs_offsets = Causal;
  double scale = 1.0;

  static constexpr op_rule rule(const op_context&) {
    return einsum("bqw,bqw,bkw,bkw->bqw").fixed('k').even_in('w', HeadDim);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    attention_detail::check_shapes(in, 1, HeadDim, Causal, name);
    return in[1];
  }
};

/// The backward's dk and dv stacked, (2, b, k, w): sums over the query positions, so Partial
/// where q is split.
template <index_t HeadDim, bool Causal>
struct attention_backward_kv {
  static_assert(HeadDim >= 1, "spmd::attention: the head dim must be at least 1.");
  static constexpr const char* name = Causal ? "causal_attention_backward_kv" : "attention_backward_kv";
  static constexpr bool causal = Causal;
  static constexpr bool needs_offsets = Causal;
  double scale = 1.0;

  static constexpr op_rule rule(const op_context&) {
    return einsum("bqw,bqw,bkw,bkw->sbkw").fixed('k').even_in('w', HeadDim);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    attention_detail::check_shapes(in, 1, HeadDim, Causal, name);
    shape_vec out{};
    out.push_back(2);
    for (int d = 0; d < 3; ++d) out.push_back(in[2][d]);
    return out;
  }
};

template <index_t HeadDim>
using causal_attention = attention<HeadDim, true>;
template <index_t HeadDim>
using causal_attention_backward = attention_backward<HeadDim, true>;

}  // namespace spmd::ops
