// spmd/runtime/clip_grad.hpp — clip_grad_norm_ over sharded gradients, as
// torch.nn.utils.clip_grad_norm_.
//
//   auto total = spmd::runtime::clip_grad_norm_(1.0, w1, b1, w2);             // 2-norm
//   auto top = spmd::runtime::clip_grad_norm_(1.0, spmd::runtime::inf_norm, w1, b1);
//   double n = total.full_tensor()[0];
//
// The total norm is a reduction across ranks: each gradient's sum of squares (or largest
// magnitude) is reduced over its shards into a replicated 0-d dtensor (one all_reduce per
// gradient on a sharded one, none on a replicated one), the per-gradient norms are combined
// as torch does (the norm of the norms), and every gradient is multiplied by
// min(max_norm / (total + 1e-6), 1) — always, as torch's foreach path does — with the
// coefficient kept a 0-d dtensor, so nothing waits for the host. Returns the total norm
// (before clipping), replicated on every rank.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/reduction.hpp"

namespace spmd::runtime {

/// The norm_type of clip_grad_norm_ for the largest magnitude (torch's float('inf')).
inline constexpr double inf_norm = std::numeric_limits<double>::infinity();

namespace clip_detail {

/// Gradient g's norm contribution, replicated: its sum of squares (2-norm) or largest |g|.
template <class G>
auto contribution(const G& g, bool inf) {
  using R = typename detail::all_replicate<typename G::layout_type::mesh_type>::type;
  using Out = decltype(runtime::reduce<ops::reduce_kind::sum, over<>, false, R>(runtime::mul(g, g)));
  if (inf) return Out(runtime::reduce<ops::reduce_kind::max, over<>, false, R>(runtime::abs(g)));
  // torch: each gradient's norm, then the norm of those norms (sqrt of their squares' sum).
  auto n = runtime::sqrt(runtime::reduce<ops::reduce_kind::sum, over<>, false, R>(runtime::mul(g, g)));
  return Out(runtime::mul(n, n));
}

/// The sum of squares of the gradients of `params` in placements P (every mesh dim Partial(sum),
/// or all Replicate when every gradient is whole); none when no parameter has a gradient.
template <class P, class... Ps>
auto square_sum(const Ps&... params) {
  using First = std::tuple_element_t<0, std::tuple<Ps...>>;
  using Mesh = typename First::mesh_type;
  using T = typename First::element_type;
  static_assert(((std::is_same_v<typename Ps::mesh_type, Mesh> && std::is_same_v<typename Ps::element_type, T>) && ...),
                "spmd::total_grad_norm: every parameter must be on one mesh with one element type.");
  using Sum = dtensor<T, layout<Mesh, P, extents<>>, typename First::backend_type>;
  std::optional<Sum> acc;
  auto fold = [&](const auto& p) {
    if (!p.has_grad()) return;
    const auto& g = p.grad();
    // The reduction's own placements (Partial where g is sharded), then Replicate -> Partial
    // (a local step): forcing the reduction's output instead can move g first.
    Sum c = runtime::redistribute<P>(runtime::reduce<ops::reduce_kind::sum, over<>>(runtime::mul(g, g)));
    if (!acc) acc.emplace(std::move(c));
    else acc.emplace(runtime::add<P>(*acc, c));
  };
  (fold(params), ...);
  return acc;
}

}  // namespace clip_detail

/// The sum of squares of the gradients of `params`, each rank's part of it: a 0-d dtensor
/// Partial(sum) on every mesh dim (zero where no parameter has a gradient). Groups of
/// parameters held apart (an optimizer per unit: nn/unit_choice.hpp) add theirs and take
/// grad_norm_of the sum: total_grad_norm over all of them, in one collective.
template <class... Ps>
  requires(sizeof...(Ps) > 0 && (is_variable<Ps> && ...))
auto grad_square_sum(const Ps&... params) {
  using First = std::tuple_element_t<0, std::tuple<Ps...>>;
  using P = typename detail::all_partial<typename First::mesh_type, reduce_op::sum>::type;
  auto acc = clip_detail::square_sum<P>(params...);
  if (!acc) return factories<typename First::backend_type>::template full<typename First::element_type>(
      typename First::element_type(0), typename decltype(acc)::value_type::layout_type{});
  return std::move(*acc);
}

/// The 2-norm of a sum of squares of grad_square_sum (or several added): one all_reduce, then
/// the square root; replicated.
template <class Partial>
auto grad_norm_of(const Partial& square_sum) {
  using R = typename detail::all_replicate<typename Partial::layout_type::mesh_type>::type;
  return runtime::sqrt(runtime::redistribute<R>(square_sum));
}

/// The total 2-norm of the gradients of `params` in one collective: each gradient's sum of
/// squares is kept Partial(sum) on every mesh dim (a replicated dim takes the value on one
/// member: a local step), the partials are added, and one all_reduce over the whole mesh
/// makes the sum replicated; then its square root. clip_grad_norm_ (torch's norm of the
/// norms, one all_reduce per sharded gradient) gives the same value up to rounding; a
/// training loop that reads the norm every step (spmd-train) pays one collective for it.
/// Parameters without a gradient are left out. Returns a replicated 0-d dtensor.
template <class... Ps>
  requires(sizeof...(Ps) > 0 && (is_variable<Ps> && ...))
auto total_grad_norm(const Ps&... params) {
  using First = std::tuple_element_t<0, std::tuple<Ps...>>;
  using Mesh = typename First::mesh_type;
  using T = typename First::element_type;
  using R = typename detail::all_replicate<Mesh>::type;
  // Every gradient whole on every rank: the sum is the same everywhere, no collective;
  // otherwise each rank's part of it, Partial, and one all_reduce.
  constexpr bool whole = (std::is_same_v<typename Ps::layout_type::placements_type, R> && ...);
  using P = std::conditional_t<whole, R, typename detail::all_partial<Mesh, reduce_op::sum>::type>;
  const auto acc = clip_detail::square_sum<P>(params...);
  if (!acc) return factories<typename First::backend_type>::template full<T>(T(0), layout<Mesh, R, extents<>>{});
  return runtime::sqrt(runtime::redistribute<R>(*acc));
}

/// Scales every gradient of `params` by min(max_norm / (total + 1e-6), 1), total a norm
/// computed before (torch.nn.utils.clip_grads_with_norm_): clip_grad_norm_'s second half.
template <class Scalar, class... Ps>
  requires(sizeof...(Ps) > 0 && (is_variable<Ps> && ...))
void clip_grads_with_norm_(double max_norm, const Scalar& total, Ps&... params) {
  using T = typename Scalar::value_type;
  if (!(max_norm >= 0))
    throw std::invalid_argument("spmd::clip_grads_with_norm_: max_norm " + std::to_string(max_norm) +
                                (max_norm < 0 ? " is negative" : " is not a number"));
  const Scalar coef = runtime::minimum(runtime::div(static_cast<T>(max_norm), runtime::add(total, static_cast<T>(1e-6))),
                                       static_cast<T>(1));
  auto scale = [&](auto& p) {
    if (!p.has_grad()) return;
    auto& g = p.grad();
    using G = std::remove_cvref_t<decltype(g)>;
    g = autograd_detail::relabel<typename G::layout_type>(
        runtime::mul<typename G::layout_type::placements_type>(g, coef));
  };
  (scale(params), ...);
}

/// Scales the gradients of `params` (variables) so that their total norm (norm_type 2 or
/// inf_norm) is at most max_norm; returns the total norm before clipping as a replicated 0-d
/// dtensor. Parameters without a gradient are left out, as in torch.
template <class... Ps>
  requires(sizeof...(Ps) > 0 && (is_variable<Ps> && ...))
auto clip_grad_norm_(double max_norm, double norm_type, Ps&... params) {
  if (!(norm_type == 2.0 || norm_type == inf_norm))
    throw std::invalid_argument("spmd::clip_grad_norm_: norm_type " + std::to_string(norm_type) +
                                " is not supported (2 or inf_norm)");
  if (!(max_norm >= 0))
    throw std::invalid_argument("spmd::clip_grad_norm_: max_norm " + std::to_string(max_norm) +
                                (max_norm < 0 ? " is negative" : " is not a number"));
  using First = std::tuple_element_t<0, std::tuple<Ps...>>;
  using Mesh = typename First::mesh_type;
  using T = typename First::element_type;
  using B = typename First::backend_type;
  static_assert(((std::is_same_v<typename Ps::mesh_type, Mesh> && std::is_same_v<typename Ps::element_type, T>) && ...),
                "spmd::clip_grad_norm_: every parameter must be on one mesh with one element type.");
  using R = typename detail::all_replicate<Mesh>::type;
  using Scalar = dtensor<T, layout<Mesh, R, extents<>>, B>;
  const bool inf = norm_type == inf_norm;
  std::optional<Scalar> acc;
  auto fold = [&](const auto& p) {
    if (!p.has_grad()) return;
    Scalar c = clip_detail::contribution(p.grad(), inf);
    if (!acc) acc.emplace(std::move(c));
    else if (inf) acc.emplace(runtime::maximum(*acc, c));
    else acc.emplace(runtime::add(*acc, c));
  };
  (fold(params), ...);
  if (!acc) return factories<B>::template full<T>(T(0), layout<Mesh, R, extents<>>{});
  Scalar total = inf ? std::move(*acc) : Scalar(runtime::sqrt(*acc));
  // clip_coef = max_norm / (total + 1e-6), clamped to at most 1; then every gradient times it.
  clip_grads_with_norm_(max_norm, total, params...);
  return total;
}

/// The 2-norm form: clip_grad_norm_(max_norm, params...).
template <class... Ps>
  requires(sizeof...(Ps) > 0 && (is_variable<Ps> && ...))
auto clip_grad_norm_(double max_norm, Ps&... params) {
  return clip_grad_norm_(max_norm, 2.0, params...);
}

}  // namespace spmd::runtime
