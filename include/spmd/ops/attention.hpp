// spmd/ops/attention.hpp — causal self-attention as one operator, and its backward: the
// sharding rules (the host kernels are in spmd/runtime/ops/attention.hpp).
//
//   causal_attention<D>, q, k, v (b, c, w)   "bcw,bcw,bcw->bcw", c fixed, w even in heads of D
//       w = heads × D: each head's softmax(q kᵀ · scale + causal) v, the heads side by side
//   causal_attention_backward<D>, g, q, k, v  "bcw,bcw,bcw,bcw->sbcw": (dq, dk, dv) stacked
//
// The positions c are fixed (every query needs every key before it). w may be sharded (the
// heads, Megatron's tensor parallelism: q, k and v column-parallel) only evenly in whole
// heads (`even_in`: 4 heads on 8 ranks gather the width rather than split a head); the kernel
// checks it again. The batch b shards freely. No Partial
// passes (softmax is neither linear nor monotone); the backward's output has a new leading
// dim of 3 (an output-only factor: fixed), so one operator returns the three gradients.
#pragma once

#include <stdexcept>
#include <string>

#include "spmd/core/extents.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/rule.hpp"
#include "spmd/ops/shape_text.hpp"

namespace spmd::ops {

namespace attention_detail {
/// q, k and v of one shape (b, c, w), w a multiple of the head dim d.
constexpr void check_shapes(const svec<shape_vec, max_op_inputs>& in, int first, index_t d, const char* name) {
  const shape_vec& q = in[first];
  bool ok = q.size() == 3;
  for (int i = first + 1; ok && i < in.size(); ++i) {
    ok = in[i].size() == 3;
    for (int k = 0; ok && k < 3; ++k) ok = in[i][k] == dyn || q[k] == dyn || in[i][k] == q[k];
  }
  if (!ok)
    throw std::invalid_argument(std::string("spmd::") + name +
                                ": q, k and v (and the gradient) must be of one shape (batch, positions, "
                                "heads x head dim); q is " + shape_text(q) + ", the next " +
                                shape_text(in[first + 1]));
  if (q[2] != dyn && q[2] % d != 0)
    throw std::invalid_argument(std::string("spmd::") + name + ": the width " + std::to_string(q[2]) +
                                " is not a multiple of the head dim " + std::to_string(d));
}
}  // namespace attention_detail

/// Causal self-attention over heads of HeadDim: out (b, c, w) from q, k, v (b, c, w).
template <index_t HeadDim>
struct causal_attention {
  static_assert(HeadDim >= 1, "spmd::causal_attention: the head dim must be at least 1.");
  static constexpr const char* name = "causal_attention";
  double scale = 1.0;  // applied to q kᵀ (1/√HeadDim in a transformer)

  static constexpr op_rule rule(const op_context&) {
    return einsum("bcw,bcw,bcw->bcw").fixed('c').even_in('w', HeadDim);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    attention_detail::check_shapes(in, 0, HeadDim, name);
    return in[0];
  }
};

/// Its backward: from the output's gradient g and q, k, v (each (b, c, w)), the three
/// gradients stacked, (3, b, c, w): dq, dk, dv.
template <index_t HeadDim>
struct causal_attention_backward {
  static_assert(HeadDim >= 1, "spmd::causal_attention: the head dim must be at least 1.");
  static constexpr const char* name = "causal_attention_backward";
  double scale = 1.0;

  static constexpr op_rule rule(const op_context&) {
    return einsum("bcw,bcw,bcw,bcw->sbcw").fixed('c').even_in('w', HeadDim);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    attention_detail::check_shapes(in, 0, HeadDim, name);
    shape_vec out{};
    out.push_back(3);
    for (int d = 0; d < 3; ++d) out.push_back(in[1][d]);
    return out;
  }
};

}  // namespace spmd::ops
