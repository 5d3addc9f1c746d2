// spmd/runtime/autograd/nn.hpp — softmax and log_softmax on variables.
//
// softmax: dx = y · (g − Σ_d g·y); log_softmax: dx = g − exp(y) · Σ_d g (torch's formulas,
// d the softmax dim). The sums are ordinary reductions: with the softmax dim never sharded
// (the forward rule), they need no communication.
#pragma once

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/nn.hpp"
#include "spmd/runtime/ops/reduction.hpp"

namespace spmd::runtime {

template <int Dim, class Forced = void, element T, class L, class B, class GP>
auto softmax(const variable<T, L, B, GP>& x) {
  auto y = runtime::softmax<Dim, Forced>(x.value());
  auto saved = std::make_shared<decltype(y)>(y);
  return autograd_detail::make_result(
      std::move(y), "softmax",
      [x, saved](const auto& g) {
        const auto& yv = *saved;
        auto s = runtime::sum<Dim>(runtime::mul(g, yv), keepdim);
        autograd_detail::send(x, runtime::mul(yv, runtime::sub(g, s)));
      },
      x);
}

template <int Dim, class Forced = void, element T, class L, class B, class GP>
auto log_softmax(const variable<T, L, B, GP>& x) {
  auto y = runtime::log_softmax<Dim, Forced>(x.value());
  auto saved = std::make_shared<decltype(y)>(y);
  return autograd_detail::make_result(
      std::move(y), "log_softmax",
      [x, saved](const auto& g) {
        auto s = runtime::sum<Dim>(g, keepdim);
        autograd_detail::send(x, runtime::sub(g, runtime::mul(runtime::exp(*saved), s)));
      },
      x);
}

}  // namespace spmd::runtime
