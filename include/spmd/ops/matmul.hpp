// spmd/ops/matmul.hpp — the sharding rules of the matrix products (einsum factors).
//
//   matmul   x (m, k) @ w (k, n)            "mk,kn->mn"
//            x (b, m, k) @ w (k, n)         "bmk,kn->bmn" (torch.matmul of a batch by a matrix)
//   matmul_t x (m, k) @ w (n, k)^T          "mk,nk->mn"   (linear's x · Wᵀ, no transpose made)
//            x (b, m, k) @ w (n, k)^T       "bmk,nk->bmn" (torch.nn.Linear on (batch, seq, in))
//   t_matmul x (k, m)^T @ w (k, n)          "km,kn->mn"   (a weight's gradient, gᵀ · x, no transpose made)
//            x (b, k, m)^T @ w (b, k, n)    "bkm,bkn->mn" (the same over a batch: b and k contracted)
//   bmm      x (b, m, k) @ w (b, k, n)      "bmk,bkn->bmn"
//            x (a, b, m, k) @ w (a, b, k, n) "abmk,abkn->abmn" (two batch dims: attention's
//                                           batch and heads, each sharded on its own mesh dim)
//
// The contracted factor k reduces with sum: sharding it on a mesh dim gives a P(sum) output
// (x S(1) @ w S(0) -> P(sum)). Products are linear in each input, so one input may hold a
// P(sum) or P(avg) while the other is replicated; both partial at once is not a product of
// sums and is never a candidate.
#pragma once

#include <stdexcept>
#include <string>

#include "spmd/core/extents.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/rule.hpp"

namespace spmd::ops {

namespace matmul_detail {

constexpr op_rule bilinear(const char* text) {
  return einsum(text)
      .passes_partial_of(0, reduce_op::sum, reduce_op::sum)
      .passes_partial_of(1, reduce_op::sum, reduce_op::sum)
      .passes_partial_of(0, reduce_op::avg, reduce_op::avg)
      .passes_partial_of(1, reduce_op::avg, reduce_op::avg);
}

/// The extent two inputs share; throws (naming both) when they differ at run time.
constexpr index_t shared_extent(index_t a, index_t b, const char* what) {
  if (a != dyn && b != dyn && a != b)
    throw std::invalid_argument(std::string("spmd::") + what + ": the inner dims differ (" +
                                std::to_string(a) + " and " + std::to_string(b) + ")");
  return a != dyn ? a : b;
}

}  // namespace matmul_detail

struct matmul {
  static constexpr const char* name = "matmul";
  static constexpr op_rule rule(const op_context& c) {
    return matmul_detail::bilinear(c.in_shape[0].size() == 3 ? "bmk,kn->bmn" : "mk,kn->mn");
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    const int r = in[0].size();
    matmul_detail::shared_extent(in[0][r - 1], in[1][0], name);
    shape_vec out = in[0];
    out[r - 1] = in[1][1];
    return out;
  }
};

struct matmul_t {
  static constexpr const char* name = "matmul_t";
  static constexpr op_rule rule(const op_context& c) {
    return matmul_detail::bilinear(c.in_shape[0].size() == 3 ? "bmk,nk->bmn" : "mk,nk->mn");
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    const int r = in[0].size();
    matmul_detail::shared_extent(in[0][r - 1], in[1][1], name);
    shape_vec out = in[0];
    out[r - 1] = in[1][0];
    return out;
  }
};

struct t_matmul {
  static constexpr const char* name = "t_matmul";
  static constexpr op_rule rule(const op_context& c) {
    return matmul_detail::bilinear(c.in_shape[0].size() == 3 ? "bkm,bkn->mn" : "km,kn->mn");
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    const int r = in[0].size();
    for (int d = 0; d + 1 < r; ++d) matmul_detail::shared_extent(in[0][d], in[1][d], name);
    return shape_vec{{in[0][r - 1], in[1][r - 1]}, 2};
  }
};

struct bmm {
  static constexpr const char* name = "bmm";
  static constexpr op_rule rule(const op_context& c) {
    return matmul_detail::bilinear(c.in_shape[0].size() == 4 ? "abmk,abkn->abmn" : "bmk,bkn->bmn");
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    const int r = in[0].size();
    shape_vec out{};
    for (int d = 0; d + 2 < r; ++d) out.push_back(matmul_detail::shared_extent(in[0][d], in[1][d], "bmm (batch)"));
    matmul_detail::shared_extent(in[0][r - 1], in[1][r - 2], name);
    out.push_back(in[0][r - 2]);
    out.push_back(in[1][r - 1]);
    return out;
  }
};

}  // namespace spmd::ops
