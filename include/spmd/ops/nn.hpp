// spmd/ops/nn.hpp — the sharding rules of the neural-network ops: softmax, log_softmax,
// layer_norm and embedding (einsum factors, ops/rule.hpp). The kernels and the dtensor API
// are in spmd/runtime/ops/nn.hpp.
//
//   softmax<1>, x (a, b)            "ab->ab",  b fixed      a row needs all of its values
//   layer_norm<2>, x (a, b, c)      "abc,bc,bc->abc", b c fixed  (weight, bias: (b, c))
//   embedding, w (V, H), idx (a, b) "VH,ab->abH", V reduces with sum
//   one_hot<U, C>, idx (a, b)       "ab->abC", C the output's own (fixed)
//
// softmax and layer_norm pass no Partial: neither is linear nor monotone in its input, so a
// Partial input is reduced (or reduce-scattered) first. The active dims are `fixed`: every
// rank sees whole rows; the other dims shard freely.
//
// embedding is a gather: it is linear in the weight, so a weight P(sum) or P(avg) with the
// indices replicated passes through. Sharding V (a weight S(0), "rowwise") is the masked
// partial: each rank looks up only the rows it holds and writes zeros for the others, so
// the ranks' outputs sum to the lookup — V is a factor the output lacks, reducing with sum.
// Sharding H (a weight S(1), "colwise") shards the output's last dim; sharding a dim of the
// indices shards the output's same dim. The weight is the op's FIRST input (the output's
// element type is taken from the first input); the user API keeps embedding(indices, w).
#pragma once

#include <stdexcept>
#include <string>

#include "spmd/core/extents.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/rule.hpp"
#include "spmd/ops/shape_text.hpp"

namespace spmd::ops {

namespace nn_detail {

using subscripts = einsum_writer;
constexpr char letter(int dim) { return factor_letter(dim); }
using ops::shape_text;

/// rule with dims [first, r) fixed: layer_norm's normalised dims, whole on every rank.
constexpr op_rule fix_dims(op_rule rule, int first, int r) {
  for (int d = first < 0 ? 0 : first; d < r; ++d) rule = rule.fixed(letter(d));
  return rule;
}

}  // namespace nn_detail

/// softmax (Log false) or log_softmax (Log true) along dim Dim (0 <= Dim < rank).
template <int Dim, bool Log>
struct softmax {
  static_assert(Dim >= 0 && Dim < max_tensor_dims, "spmd::softmax: Dim is outside the dims.");
  static constexpr const char* name = Log ? "log_softmax" : "softmax";
  static constexpr op_rule rule(const op_context& c) {
    const int r = c.in[0].tensor_rank;
    nn_detail::subscripts s{};
    s.dims(0, r).put('-').put('>').dims(0, r);
    return einsum(s.text).fixed(nn_detail::letter(Dim));
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) { return in[0]; }
};

/// layer_norm over the last NormDims dims of x; Affine: x * weight + bias after the
/// normalisation (weight and bias of the normalised extents). `eps` is a run-time value: it
/// does not change the rule.
template <int NormDims, bool Affine>
struct layer_norm {
  static_assert(NormDims >= 1 && NormDims <= max_tensor_dims,
                "spmd::layer_norm: NormDims must be 1 to 8.");
  static constexpr const char* name = "layer_norm";
  double eps = 1e-5;

  static constexpr op_rule rule(const op_context& c) {
    const int r = c.in[0].tensor_rank, first = r - NormDims;
    nn_detail::subscripts s{};
    s.dims(0, r);
    if constexpr (Affine) s.put(',').dims(first, NormDims).put(',').dims(first, NormDims);
    s.put('-').put('>').dims(0, r);
    return nn_detail::fix_dims(einsum(s.text), first, r);
  }
  /// x's shape; throws when weight or bias is not of the normalised extents.
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    const shape_vec& x = in[0];
    if constexpr (Affine) {
      for (int i = 1; i <= 2; ++i) {
        bool ok = in[i].size() == NormDims && x.size() >= NormDims;
        for (int d = 0; ok && d < NormDims; ++d) {
          const index_t a = x[x.size() - NormDims + d], b = in[i][d];
          ok = a == dyn || b == dyn || a == b;
        }
        if (!ok) {
          shape_vec want{};
          for (int d = x.size() - NormDims; d < x.size(); ++d)
            if (d >= 0) want.push_back(x[d]);
          throw std::invalid_argument(std::string("spmd::layer_norm: the ") +
                                      (i == 1 ? "weight" : "bias") + " has shape " +
                                      nn_detail::shape_text(in[i]) + ", not the normalised shape " +
                                      nn_detail::shape_text(want) + " of x " +
                                      nn_detail::shape_text(x));
        }
      }
    }
    return x;
  }
};

/// layer_norm's input gradient: inputs (g, x, and with Affine the weight), output x's shape:
/// rstd (ĝ − mean ĝ − x̂ mean(ĝ x̂)), ĝ = g * weight, over the last NormDims dims (recomputing
/// the row's statistics from x). Linear in g: g P(sum) or P(avg) with x and the weight
/// replicated passes, as the composition of mul, mean and sub it replaces did.
template <int NormDims, bool Affine>
struct layer_norm_backward {
  static_assert(NormDims >= 1 && NormDims <= max_tensor_dims,
                "spmd::layer_norm: NormDims must be 1 to 8.");
  static constexpr const char* name = "layer_norm_backward";
  double eps = 1e-5;

  static constexpr op_rule rule(const op_context& c) {
    const int r = c.in[0].tensor_rank, first = r - NormDims;
    nn_detail::subscripts s{};
    s.dims(0, r).put(',').dims(0, r);
    if constexpr (Affine) s.put(',').dims(first, NormDims);
    s.put('-').put('>').dims(0, r);
    return nn_detail::fix_dims(einsum(s.text), first, r)
        .passes_partial_of(0, reduce_op::sum, reduce_op::sum).passes_partial_of(0, reduce_op::avg, reduce_op::avg);
  }
  /// x's shape (the forward checked the shapes).
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) { return in[1]; }
};

/// embedding: inputs (weight (V, H), indices (any rank)), output indices' shape + (H).
/// `vocab` is V, for the kernel's range check.
struct embedding {
  static constexpr const char* name = "embedding";
  static constexpr bool needs_offsets = true;  // the masked lookup needs its rows' offset
  index_t vocab = 0;

  static constexpr op_rule rule(const op_context& c) {
    const int r = c.in[1].tensor_rank;
    nn_detail::subscripts s{};
    s.put('V').put('H').put(',').dims(0, r).put('-').put('>').dims(0, r).put('H');
    return einsum(s.text)
        .reduces('V', reduce_op::sum)
        .passes_partial_of(0, reduce_op::sum, reduce_op::sum)
        .passes_partial_of(0, reduce_op::avg, reduce_op::avg);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec out = in[1];
    out.push_back(in[0][1]);
    return out;
  }
};

/// embedding's weight gradient: inputs (g (indices' shape + (H)), indices), output (V, H), V
/// the vocabulary (static, as the autograd layer needs it):
/// row v is the sum of g's rows at the positions whose index is v (a scatter-add, in position
/// order: deterministic). The positions reduce with sum (sharded, the output is P(sum)); H
/// shards freely; V is the output's own (fixed). Linear in g: g P(sum)/P(avg) with the indices
/// replicated passes.
template <index_t V>
struct embedding_backward {
  static_assert(V >= 1, "spmd::embedding: the vocabulary must have at least 1 row.");
  static constexpr const char* name = "embedding_backward";

  static constexpr op_rule rule(const op_context& c) {
    const int r = c.in[1].tensor_rank;
    nn_detail::subscripts s{};
    s.dims(0, r).put('H').put(',').dims(0, r).put('-').put('>').put('V').put('H');
    op_rule rule = einsum(s.text);
    for (int d = 0; d < r; ++d) rule = rule.reduces(nn_detail::letter(d), reduce_op::sum);
    return rule.passes_partial_of(0, reduce_op::sum, reduce_op::sum)
        .passes_partial_of(0, reduce_op::avg, reduce_op::avg);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec out{};
    out.push_back(V);
    out.push_back(in[0][in[0].size() - 1]);
    return out;
  }
};

/// cross entropy's loss of each row, fused: inputs (logits (rows..., C), targets (rows...)),
/// output the targets' shape: logsumexp(x) − x[t] per row (torch's cross_entropy with
/// reduction='none', classes last). The class dim is whole on every rank (fixed: the
/// vocabulary-parallel form, which keeps it sharded, is a composition of ops); the rows shard
/// freely. A host backends' operator (runtime/autograd/loss.hpp).
template <index_t C>
struct cross_entropy_rows {
  static_assert(C >= 1, "spmd::cross_entropy: the number of classes must be at least 1.");
  static constexpr const char* name = "cross_entropy";

  static constexpr op_rule rule(const op_context& c) {
    const int r = c.in[1].tensor_rank;
    nn_detail::subscripts s{};
    s.dims(0, r).put('C').put(',').dims(0, r).put('-').put('>').dims(0, r);
    return einsum(s.text).fixed('C');
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) { return in[1]; }
};

/// Its gradient: inputs (g (rows...), logits (rows..., C), targets (rows...)), output the
/// logits' shape: g · (softmax(x) − one_hot(t)) per row. Linear in g: g P(sum) or P(avg) with
/// the logits and targets replicated passes.
template <index_t C>
struct cross_entropy_rows_backward {
  static_assert(C >= 1, "spmd::cross_entropy: the number of classes must be at least 1.");
  static constexpr const char* name = "cross_entropy_backward";

  static constexpr op_rule rule(const op_context& c) {
    const int r = c.in[0].tensor_rank;
    nn_detail::subscripts s{};
    s.dims(0, r).put(',').dims(0, r).put('C').put(',').dims(0, r).put('-').put('>').dims(0, r).put('C');
    return einsum(s.text)
        .fixed('C')
        .passes_partial_of(0, reduce_op::sum, reduce_op::sum)
        .passes_partial_of(0, reduce_op::avg, reduce_op::avg);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) { return in[1]; }
};

/// one_hot: indices (any rank) -> indices' shape + (Classes), element type U: 1 where the
/// last index equals the index, else 0 (torch.nn.functional.one_hot, as U). The class dim is
/// the output's own (fixed: every rank writes all classes); the indices' dims shard freely.
template <class U, index_t Classes>
struct one_hot {
  static_assert(Classes >= 1, "spmd::one_hot: the number of classes must be at least 1.");
  static constexpr const char* name = "one_hot";
  template <class T>
  using result = U;

  static constexpr op_rule rule(const op_context& c) {
    const int r = c.in[0].tensor_rank;
    nn_detail::subscripts s{};
    s.dims(0, r).put('-').put('>').dims(0, r).put('C');
    return einsum(s.text);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec out = in[0];
    out.push_back(Classes);
    return out;
  }
};

}  // namespace spmd::ops
