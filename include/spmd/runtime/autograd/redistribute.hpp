// spmd/runtime/autograd/redistribute.hpp — redistribute on variables (DTensor's Redistribute
// autograd function).
//
//   auto y = redistribute<placements<replicate>>(x);                         // recorded
//   auto z = redistribute<P>(x, forward_dtype<bfloat16>, backward_dtype<float>);
//   auto w = redistribute<P>(x, grad_placements<placements<shard<0>>>);       // y.grad's placements
//   static_assert(backward_plan_of<From, To, float>::collectives() == 1);
//
// The backward redistributes the gradient from the output's gradient layout to the input's:
// the output's gradient placements are the output placements with Partial replaced by
// Replicate (or those given by grad_placements), the input's likewise (a Partial input
// placement becomes Replicate: DTensor's normalisation, so a R -> P forward has a no-op
// backward and S -> P has S -> R). The plan is the compiler's (backward_plan_of); it runs in
// backward_dtype when given (the gradient cast to it, and back), else in the element type.
// A forward with nothing to do has a backward with nothing to do.
#pragma once

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd::runtime {

/// Tag: run the backward redistribute in element type U (DTensor's backward_dtype).
template <element U>
struct backward_dtype_t {};
template <element U>
inline constexpr backward_dtype_t<U> backward_dtype{};

/// Tag: the gradient of redistribute's output has placements P (DTensor's grad_placements).
template <class P>
struct grad_placements_t {};
template <class P>
inline constexpr grad_placements_t<P> grad_placements{};

/// The plan the backward of a redistribute From -> To runs (gradient layouts: Partial ->
/// Replicate on both ends, or the output gradient's placements GradP when given).
template <class From, class To, class T = float, class GradP = default_grad_placements_t<typename To::placements_type>>
using backward_plan_of = spmd::plan_of<grad_layout_t<To, GradP>, grad_layout_t<From>, T>;

namespace autograd_detail {
struct no_option {};
template <class... O>
struct redistribute_options;
template <>
struct redistribute_options<> {
  using forward = void;
  using backward = void;
  using grad = void;
};
template <class... O>
struct redistribute_options<no_option, O...> : redistribute_options<O...> {};
template <element U, class... O>
struct redistribute_options<forward_dtype_t<U>, O...> : redistribute_options<O...> {
  using forward = U;
};
template <element U, class... O>
struct redistribute_options<backward_dtype_t<U>, O...> : redistribute_options<O...> {
  using backward = U;
};
template <class P, class... O>
struct redistribute_options<grad_placements_t<P>, O...> : redistribute_options<O...> {
  using grad = P;
};

template <class P, class X>
auto redistribute_in(const X& x) {
  if constexpr (std::is_void_v<P>) return runtime::redistribute<typename X::placements_type>(x);
  else return runtime::redistribute<typename X::placements_type>(x, forward_dtype<P>);
}
}  // namespace autograd_detail

/// x with placements NewPlacements, recorded: see the header comment. Options, in any order:
/// forward_dtype<U>, backward_dtype<V>, grad_placements<P>.
template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
          element T, class L, class B, class GP, class... Options>
auto redistribute(const variable<T, L, B, GP>& x, Options...) {
  using O = autograd_detail::redistribute_options<Options...>;
  auto y = [&] {
    if constexpr (std::is_void_v<typename O::forward>)
      return runtime::redistribute<NewPlacements, PlanOf>(x.value());
    else
      return runtime::redistribute<NewPlacements, PlanOf>(x.value(), forward_dtype<typename O::forward>);
  }();
  return autograd_detail::make_result<typename O::grad>(
      std::move(y), "redistribute",
      [x](const auto& g) {
        using Back = typename O::backward;
        auto moved = [&] {
          if constexpr (std::is_void_v<Back> || std::is_same_v<Back, T>)
            return runtime::redistribute<GP, PlanOf>(g);
          else
            return runtime::redistribute<GP, PlanOf>(g, forward_dtype<Back>);
        }();
        autograd_detail::send(x, std::move(moved));
      },
      x);
}

}  // namespace spmd::runtime
