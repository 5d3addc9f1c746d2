// spmd/runtime/autograd/nn.hpp — softmax, log_softmax, layer_norm and embedding on variables.
//
// softmax: dx = y · (g − Σ_d g·y); log_softmax: dx = g − exp(y) · Σ_d g (torch's formulas,
// d the softmax dim). The sums are ordinary reductions: with the softmax dim never sharded
// (the forward rule), they need no communication.
#pragma once

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/autograd/shape_grad.hpp"
#include "spmd/runtime/ops/matmul.hpp"
#include "spmd/runtime/ops/view.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/nn.hpp"
#include "spmd/runtime/ops/reduction.hpp"

namespace spmd::runtime {

template <int Dim, class Forced = void, element T, class L, class B, class GP>
auto softmax(const variable<T, L, B, GP>& x) {
  auto y = runtime::softmax<Dim, Forced>(x.value());
  auto saved = share(y);
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
  auto saved = share(y);
  return autograd_detail::make_result(
      std::move(y), "log_softmax",
      [x, saved](const auto& g) {
        auto s = runtime::sum<Dim>(g, keepdim);
        autograd_detail::send(x, runtime::sub(g, runtime::mul(runtime::exp(*saved), s)));
      },
      x);
}

}  // namespace spmd::runtime

namespace spmd::runtime {

namespace autograd_detail {
/// The last N dims of a rank-R tensor, as reduce's over<...>.
template <int R, int N>
constexpr dim_list last_dims() {
  dim_list l{};
  for (int d = R - N; d < R; ++d) l.d[l.n++] = d;
  return l;
}
template <dim_list D, class G, std::size_t... I>
auto mean_dims(const G& g, std::index_sequence<I...>) {
  return runtime::reduce<ops::reduce_kind::mean, over<D.d[I]...>, true>(g);
}
/// The mean over the dims of D, keeping them.
template <dim_list D, class G>
auto mean_dims(const G& g) {
  return mean_dims<D>(g, std::make_index_sequence<static_cast<std::size_t>(D.n)>{});
}

/// layer_norm's input gradient from gx̂ (the gradient of the normalised x), x̂ and x:
/// rstd · (gx̂ − mean(gx̂) − x̂ · mean(gx̂ · x̂)), the means over the normalised dims.
template <int N, class GH, class XH, class X>
auto layer_norm_input_grad(const GH& gh, const XH& xh, const X& x, double eps) {
  using T = typename X::value_type;
  constexpr dim_list D = last_dims<static_cast<int>(X::rank), N>();
  auto centred = runtime::sub(x, mean_dims<D>(x));
  auto rstd = runtime::div(T(1), runtime::sqrt(runtime::add(mean_dims<D>(runtime::mul(centred, centred)),
                                                            static_cast<T>(eps))));
  auto inner = runtime::sub(runtime::sub(gh, mean_dims<D>(gh)), runtime::mul(xh, mean_dims<D>(runtime::mul(gh, xh))));
  return runtime::mul(rstd, inner);
}
}  // namespace autograd_detail

/// layer_norm over the last NormDims dims on variables (x, and weight and bias when given).
template <int NormDims, class Forced = void, element T, class L, class B, class GP>
auto layer_norm(const variable<T, L, B, GP>& x, double eps = 1e-5) {
  auto y = runtime::layer_norm<NormDims, Forced>(x.value(), eps);
  auto saved = share(y);
  return autograd_detail::make_result(
      std::move(y), "layer_norm",
      [x, saved, eps](const auto& g) {
        autograd_detail::send(x, autograd_detail::layer_norm_input_grad<NormDims>(g, *saved, x.value(), eps));
      },
      x);
}
template <int NormDims, class Forced = void, class X, class W, class Bias>
  requires grad_operands<X, W, Bias>
auto layer_norm(const X& x, const W& weight, const Bias& bias, double eps = 1e-5) {
  auto xv = autograd_detail::keep(x);
  auto wv = autograd_detail::keep(weight);
  auto bv = autograd_detail::keep(bias);
  auto y = runtime::layer_norm<NormDims, Forced>(xv.value(), wv.value(), bv.value(), eps);
  return autograd_detail::make_result(
      std::move(y), "layer_norm",
      [xv, wv, bv, eps](const auto& g) {
        using namespace autograd_detail;
        const auto xh = runtime::layer_norm<NormDims>(xv.value(), eps);  // x̂, recomputed
        using LW = typename decltype(wv)::layout_type;
        using LB = typename decltype(bv)::layout_type;
        if (wants(wv)) send(wv, sum_to<LW>(runtime::mul(g, xh)));
        if (wants(bv)) send(bv, sum_to<LB>(g));
        if (wants(xv))
          send(xv, layer_norm_input_grad<NormDims>(runtime::mul(g, wv.value()), xh, xv.value(), eps));
      },
      x, weight, bias);
}

/// embedding on a variable weight (indices are integers: no gradient). The weight's
/// gradient is the scatter-add of the output's gradient into the rows of the indices,
/// computed as one_hot(indices)ᵀ · g: a deterministic product (no atomics), whose sharding
/// the compiler chooses like any matmul's; a vocabulary-sharded weight gets its rows.
template <class Forced = void, element I, class LI, element T, class LW, class B, class GP>
auto embedding(const dtensor<I, LI, B>& indices, const variable<T, LW, B, GP>& weight) {
  static_assert(LW::extents_type::static_extent(0) != dyn,
                "spmd::embedding: the backward needs the vocabulary size (the weight's dim 0) static.");
  auto y = runtime::embedding<Forced>(indices, weight.value());
  return autograd_detail::make_result(
      std::move(y), "embedding",
      [indices, weight](const auto& g) {
        constexpr index_t V = LW::extents_type::static_extent(0);
        auto oh = runtime::one_hot<T, V>(indices);  // (idx..., V)
        if constexpr (LI::rank <= 2) {
          // (n, V)ᵀ·(n, H), or (b, n, V)ᵀ·(b, n, H) contracting b and n: no flatten, which an
          // uneven batch shard would not survive.
          autograd_detail::send(weight, runtime::t_matmul(oh, g));
        } else {
          constexpr int r = static_cast<int>(LI::rank);
          auto oh2 = runtime::flatten<0, r - 1>(oh);  // (n, V)
          auto g2 = runtime::flatten<0, r - 1>(g);    // (n, H)
          autograd_detail::send(weight, runtime::t_matmul(oh2, g2));
        }
      },
      weight);
}

}  // namespace spmd::runtime
