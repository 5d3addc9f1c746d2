// spmd/runtime/ops/local_map.hpp — run a user function on every rank's shards with declared
// input and output placements (PyTorch's local_map): the escape hatch for code that has no
// sharding rule, such as a fused kernel written for one shard.
//
//   using Out = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<16, 8>>;
//   auto y = spmd::sim::local_map<Out, spmd::sim::in_placements<spmd::placements<spmd::shard<0>>>>(
//       [](auto out, auto x) { for (...) out(i, j) = f(x(i, j)); }, x);
//
// Each input is first redistributed to its declared placements (a compile-time plan; nothing
// moves when it already is there). Then f runs once per rank as f(out, in...) — or
// f(rank, out, in...) when it takes the rank first — where `out` is the rank's block of
// `OutLayout` (a strided_view<U>, already shaped) and `in...` the rank's input blocks
// (strided_view<const T>). On a device backend the views are of device memory
// (cuda::device_view) and f launches its own kernels on the backend's current stream.
// The caller promises that the blocks f writes, read through
// OutLayout's placements, are the intended global tensor: local_map checks shapes, not math.
#pragma once

#include <tuple>
#include <type_traits>
#include <utility>

#include "spmd/core/layout.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/view.hpp"

namespace spmd::runtime {

/// The declared placements of local_map's inputs, one spmd::placements<...> per input.
template <class... P>
struct in_placements {};

namespace detail {

template <class P, element T, class L, class Bk>
decltype(auto) to_placements(const dtensor<T, L, Bk>& x) {
  if constexpr (std::is_same_v<P, typename L::placements_type>)
    return (x);
  else
    return runtime::redistribute<P>(x);
}

template <class OutLayout, class U, class F, class... P, class... T, class... L, std::size_t... I, class Bk>
auto local_map_impl(F& f, in_placements<P...>, std::index_sequence<I...>,
                    const dtensor<T, L, Bk>&... x) {
  using Mesh = typename OutLayout::mesh_type;
  static_assert((std::is_same_v<typename L::mesh_type, Mesh> && ...),
                "spmd::sim::local_map: every input must be on the output layout's mesh.");
  std::tuple<decltype(to_placements<P>(x))...> ins(to_placements<P>(x)...);
  const OutLayout out_layout{};
  storage_t<Bk, U> out(Mesh::size, Bk::template held<Mesh>());
  for (const index_t i : out.held()) {
    const index_t rank = Mesh::rank_at(i);
    shape_vec s{};
    for (index_t e : out_layout.local_shape(rank)) s.push_back(e);
    out.assign(i, s);
    if constexpr (std::is_invocable_v<F&, index_t, decltype(out.view(i)),
                                      decltype(std::get<I>(ins).locals().view(i))...>)
      f(rank, out.view(i), std::get<I>(ins).locals().view(i)...);
    else
      f(out.view(i), std::get<I>(ins).locals().view(i)...);
  }
  return dtensor<U, OutLayout, Bk>(internal_t{}, out_layout, std::move(out));
}

}  // namespace detail

/// f on every rank's blocks: inputs in their declared placements, the result in OutLayout
/// (static extents) with element type U (the first input's by default).
template <class OutLayout, class InPlacements, class U = void, class F, element... T, class... L, class Bk>
auto local_map(F&& f, const dtensor<T, L, Bk>&... x) {
  static_assert(sizeof...(L) >= 1, "spmd::sim::local_map: give at least one input.");
  static_assert(OutLayout::extents_type::is_static(),
                "spmd::sim::local_map: the output layout needs static extents.");
  using V = std::conditional_t<std::is_void_v<U>, std::tuple_element_t<0, std::tuple<T...>>, U>;
  return [&]<class... P>(in_placements<P...> tag) {
    static_assert(sizeof...(P) == sizeof...(L),
                  "spmd::sim::local_map: declare one input placement list per input.");
    static_assert(((P::size == L::mesh_type::ndim) && ...),
                  "spmd::sim::local_map: each declared input placement list needs one "
                  "placement per mesh dim.");
    return detail::local_map_impl<OutLayout, V>(f, tag, std::index_sequence_for<L...>{}, x...);
  }(InPlacements{});
}

}  // namespace spmd::runtime
