// spmd/runtime/autograd/local_map.hpp — local_map on variables, with a user-supplied backward
// (PyTorch's local_map under autograd: the function is opaque, so its derivative is the
// user's).
//
//   auto y = local_map<Out, in_placements<P>>(f, grad_fns(df), x);
//
// grad_fns(df_0, df_1, ...) gives one function per input. df_i runs on every rank like f, as
// df_i(gx_i, g, x...) (or with the rank first): gx_i is the rank's block of input i's gradient
// in input i's declared placements (Partial -> Replicate), g the rank's block of the output's
// gradient in the output's placements (Partial -> Replicate), x... the inputs' blocks in their
// declared placements. What df_i writes is taken as that gradient: local_map checks shapes,
// not math (as in the forward).
#pragma once

#include <tuple>
#include <utility>

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/ops/local_map.hpp"

namespace spmd::runtime {

/// One backward function per input of local_map.
template <class... F>
struct grad_fns_t {
  std::tuple<F...> fns;
};
template <class... F>
grad_fns_t<std::decay_t<F>...> grad_fns(F&&... f) {
  return {{std::forward<F>(f)...}};
}

template <class OutLayout, class InPlacements, class U = void, class F, class... DF, class... X>
  requires grad_operands<X...>
auto local_map(F&& f, grad_fns_t<DF...> df, const X&... x) {
  static_assert(sizeof...(DF) == sizeof...(X),
                "spmd::local_map: give one backward function per input (grad_fns(df_0, ...)).");
  auto y = runtime::local_map<OutLayout, InPlacements, U>(std::forward<F>(f), value_of(x)...);
  return autograd_detail::make_result(
      std::move(y), "local_map",
      [df = std::move(df), ins = std::make_tuple(autograd_detail::keep(x)...)](const auto& g) {
        using G = std::remove_cvref_t<decltype(g)>;
        [&]<class... P>(in_placements<P...>) {
          [&]<std::size_t... I>(std::index_sequence<I...>) {
            (
                [&] {
                  const auto& xi = std::get<I>(ins);
                  using XI = std::remove_cvref_t<decltype(xi)>;
                  using GL = grad_layout_t<layout<typename XI::mesh_type,
                                                  std::tuple_element_t<I, std::tuple<P...>>,
                                                  typename XI::extents_type>>;
                  if (!autograd_detail::wants(xi)) return;
                  auto dfi = std::get<I>(df.fns);
                  autograd_detail::send(
                      xi, runtime::local_map<GL, in_placements<typename G::placements_type, P...>>(
                              dfi, g, std::get<I>(ins).value()...));
                }(),
                ...);
          }(std::index_sequence_for<P...>{});
        }(InPlacements{});
      },
      x...);
}

}  // namespace spmd::runtime
