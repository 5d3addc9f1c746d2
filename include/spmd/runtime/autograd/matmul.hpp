// spmd/runtime/autograd/matmul.hpp — matmul, matmul_t, bmm and linear on variables.
//
// For y = x · w: dx = g · wᵀ (matmul_t(g, w)) and dw = xᵀ · g (t_matmul(x, g));
// for y = x · wᵀ (matmul_t, torch.nn.Linear): dx = g · w and dw = gᵀ · x (t_matmul(g, x)).
// The transposed operands are read in place by the gemm, never copied. Each backward
// product is an ordinary operator, so the compiler chooses its sharding as it does the
// forward's (a sharded contraction gives a Partial(sum), reduced when it becomes the
// input's gradient layout).
#pragma once

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/ops/matmul.hpp"
#include "spmd/runtime/ops/tp.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace spmd::runtime {

template <class Forced = void, class X, class W>
  requires grad_operands<X, W>
auto matmul(const X& x, const W& w) {
  auto y = runtime::matmul<Forced>(value_of(x), value_of(w));
  return autograd_detail::make_result(
      std::move(y), "matmul",
      [x = autograd_detail::keep(x), w = autograd_detail::keep(w)](const auto& g) {
        using namespace autograd_detail;
        if (wants(x)) send(x, runtime::matmul_t(g, w.value()));
        if (wants(w)) send(w, runtime::t_matmul(x.value(), g));
      },
      x, w);
}

template <class Forced = void, class X, class W>
  requires grad_operands<X, W>
auto matmul_t(const X& x, const W& w) {
  auto y = runtime::matmul_t<Forced>(value_of(x), value_of(w));
  return autograd_detail::make_result(
      std::move(y), "matmul_t",
      [x = autograd_detail::keep(x), w = autograd_detail::keep(w)](const auto& g) {
        using namespace autograd_detail;
        if (wants(x)) send(x, runtime::matmul(g, w.value()));
        if (wants(w)) send(w, runtime::t_matmul(g, x.value()));
      },
      x, w);
}

template <class Forced = void, class X, class W>
  requires grad_operands<X, W>
auto bmm(const X& x, const W& w) {
  auto y = runtime::bmm<Forced>(value_of(x), value_of(w));
  return autograd_detail::make_result(
      std::move(y), "bmm",
      [x = autograd_detail::keep(x), w = autograd_detail::keep(w)](const auto& g) {
        using namespace autograd_detail;
        constexpr int r = static_cast<int>(std::remove_cvref_t<decltype(g)>::rank);  // 3 or 4
        if (wants(x)) send(x, runtime::bmm(g, runtime::transpose<r - 2, r - 1>(w.value())));
        if (wants(w)) send(w, runtime::bmm(runtime::transpose<r - 2, r - 1>(x.value()), g));
      },
      x, w);
}

/// x · Wᵀ.
template <class Forced = void, class X, class W>
  requires grad_operands<X, W>
auto linear(const X& x, const W& w) {
  return matmul_t<Forced>(x, w);
}

}  // namespace spmd::runtime
