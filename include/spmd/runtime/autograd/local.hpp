// spmd/runtime/autograd/local.hpp — from_local and to_local on variables: the brackets around
// per-rank code, with DTensor's gradient rules (PRs #173153, #173454) fixed by types.
//
//   auto y = from_local<placements<partial<>>>(x);             // x's locals, read as P(sum)
//   auto z = from_local<placements<replicate>, placements<partial<>>>(x);  // its gradient arrives P
//   auto w = to_local(x);   // the same locals; the gradient arriving here is in x's placements
//
// from_local<P, GradP>(x) reads x's locals (unchanged, not moved) as a tensor with placements
// P: every rank's local shape must be the same under both (checked by the compiler). Its
// gradient is held in GradP (by default P with Partial -> Replicate) and the backward
// returns it in P with Partial -> Replicate — reduced when it arrives Partial — read back as
// x's gradient. Forward placement -> incoming gradient -> gradient returned:
//   Shard -> Shard -> Shard;  Replicate -> Replicate -> Replicate;
//   Replicate -> Partial -> Replicate (reduced);  Partial -> Replicate -> Replicate;
//   Partial -> Partial -> Replicate (reduced).
// to_local<GradP>(x) is x, with the gradient of what comes out declared as GradP (default:
// x's placements with Partial -> Replicate, so to_local then from_local on a Partial tensor
// gives the gradient the pure-DTensor path gives); the backward brings it to x's.
#pragma once

#include <type_traits>

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/autograd/redistribute.hpp"

namespace spmd::runtime {

namespace autograd_detail {
/// True when every rank's local of layout A has the shape it has under layout B.
template <class A, class B>
constexpr bool same_local_shapes() {
  using M = typename A::mesh_type;
  for (index_t i = 0; i < M::size; ++i)
    if (!(A{}.local_shape(M::rank_at(i)) == B{}.local_shape(M::rank_at(i)))) return false;
  return true;
}

/// x's locals as layout To (same local shapes): nothing moves.
template <class To, element T, class L, class B>
dtensor<T, To, B> read_as(const dtensor<T, L, B>& x) {
  return dtensor<T, To, B>(detail::internal_t{}, To{x.layout().extents()}, storage_t<B, T>(x.locals()));
}
}  // namespace autograd_detail

template <class NewPlacements, class GradPlacements = void, element T, class L, class B, class GP>
auto from_local(const variable<T, L, B, GP>& x) {
  static_assert(L::extents_type::is_static(), "spmd::from_local: the extents must be static.");
  using To = spmd::layout<typename L::mesh_type, NewPlacements, typename L::extents_type>;
  using Back = grad_layout_t<To>;  // where the gradient returns: Partial -> Replicate
  static_assert(autograd_detail::same_local_shapes<L, To>(),
                "spmd::from_local: the placements give some rank a local of another shape than "
                "the one it holds; from_local reads the locals as they are.");
  static_assert(autograd_detail::same_local_shapes<Back, typename variable<T, L, B, GP>::grad_layout>(),
                "spmd::from_local: the gradient returned in the new placements (Partial -> "
                "Replicate) does not have the shapes of the input's gradient locals.");
  using GradP = std::conditional_t<std::is_void_v<GradPlacements>,
                                   default_grad_placements_t<NewPlacements>, GradPlacements>;
  return autograd_detail::make_result<GradP>(
      autograd_detail::read_as<To>(x.value()), "from_local",
      [x](const auto& g) {
        using XG = typename variable<T, L, B, GP>::grad_layout;
        autograd_detail::send(x, autograd_detail::read_as<XG>(
                                     runtime::redistribute<typename Back::placements_type>(g)));
      },
      x);
}

template <class GradPlacements = void, element T, class L, class B, class GP>
auto to_local(const variable<T, L, B, GP>& x) {
  using GradP = std::conditional_t<std::is_void_v<GradPlacements>,
                                   default_grad_placements_t<typename L::placements_type>, GradPlacements>;
  return redistribute<typename L::placements_type>(x, grad_placements<GradP>);
}

}  // namespace spmd::runtime
