// tests/autoshard/graphs.hpp — small training steps for the search's tests: an MLP with and
// without biases, and one with a residual sum (two activations live at once).
#pragma once

#include "spmd/autoshard/graph.hpp"
#include "spmd/ops/elementwise.hpp"
#include "spmd/ops/matmul.hpp"
#include "spmd/ops/reduction.hpp"

namespace autoshard_tests {

namespace ops = spmd::ops;
namespace as = spmd::autoshard;
using spmd::index_t;
using add = ops::binary<ops::add_fn>;
using relu = ops::unary<ops::relu_fn>;
using loss_sum = ops::reduction<ops::reduce_kind::sum, false, -1>;

/// sum(relu(x · Wᵀ)): one layer, small enough for the enumeration in the compiler.
constexpr as::graph one_layer(const spmd::mesh_shape_vec& mesh, index_t batch, index_t d, index_t out) {
  as::graph g{mesh};
  const int x = g.data({batch, d});
  const int w = g.param({out, d});
  g.loss = g.apply<loss_sum>({g.apply<relu>({g.apply<ops::matmul_t>({x, w})})});
  return g;
}

// [docs:graph]
/// sum(relu(x · W1ᵀ) · W2ᵀ): x (batch, d), W1 (hidden, d), W2 (d, hidden).
constexpr as::graph two_layer(const spmd::mesh_shape_vec& mesh, index_t batch, index_t d, index_t hidden) {
  as::graph g{mesh};
  const int x = g.data({batch, d});
  const int w1 = g.param({hidden, d}), w2 = g.param({d, hidden});
  const int h = g.apply<relu>({g.apply<ops::matmul_t>({x, w1})});
  g.loss = g.apply<loss_sum>({g.apply<ops::matmul_t>({h, w2})});
  return g;
}
// [/docs:graph]

/// spmd-train's mlp shape: sum(relu(x · W1ᵀ + b1) · W2ᵀ + b2).
constexpr as::graph biased(const spmd::mesh_shape_vec& mesh, index_t batch, index_t d, index_t hidden, index_t out) {
  as::graph g{mesh};
  const int x = g.data({batch, d});
  const int w1 = g.param({hidden, d}), b1 = g.param({hidden}), w2 = g.param({out, hidden}), b2 = g.param({out});
  const int h = g.apply<relu>({g.apply<add>({g.apply<ops::matmul_t>({x, w1}), b1})});
  g.loss = g.apply<loss_sum>({g.apply<add>({g.apply<ops::matmul_t>({h, w2}), b2})});
  return g;
}

/// A residual block: h = x·Wᵀ; y = relu(h · Vᵀ) + h; sum(y) (h live across the inner layer).
constexpr as::graph residual(const spmd::mesh_shape_vec& mesh, index_t batch, index_t d) {
  as::graph g{mesh};
  const int x = g.data({batch, d});
  const int w = g.param({d, d}), v = g.param({d, d});
  const int h = g.apply<ops::matmul_t>({x, w});
  const int y = g.apply<add>({g.apply<relu>({g.apply<ops::matmul_t>({h, v})}), h});
  g.loss = g.apply<loss_sum>({y});
  return g;
}

/// `blocks` residual MLP blocks in a row: h = h + relu(h · W1ᵀ) · W2ᵀ each, then sum(h).
constexpr as::graph residual_chain(const spmd::mesh_shape_vec& mesh, int blocks, index_t batch, index_t d, index_t hidden) {
  as::graph g{mesh};
  int h = g.data({batch, d});
  for (int b = 0; b < blocks; ++b) {
    const int w1 = g.param({hidden, d}), w2 = g.param({d, hidden});
    const int u = g.apply<relu>({g.apply<ops::matmul_t>({h, w1})});
    h = g.apply<add>({g.apply<ops::matmul_t>({u, w2}), h});
  }
  g.loss = g.apply<loss_sum>({h});
  return g;
}


/// One input read by three products whose outputs meet later: sum((x·Qᵀ + x·Kᵀ) * x·Vᵀ), the
/// shape of attention's q, k and v (three activations live at once without deferral).
constexpr as::graph fan_out(const spmd::mesh_shape_vec& mesh, index_t batch, index_t d) {
  as::graph g{mesh};
  const int x = g.data({batch, d});
  const int wq = g.param({d, d}), wk = g.param({d, d}), wv = g.param({d, d});
  const int q = g.apply<ops::matmul_t>({x, wq}), k = g.apply<ops::matmul_t>({x, wk}), v = g.apply<ops::matmul_t>({x, wv});
  g.loss = g.apply<loss_sum>({g.apply<ops::binary<ops::mul_fn>>({g.apply<add>({q, k}), v})});
  return g;
}

}  // namespace autoshard_tests
