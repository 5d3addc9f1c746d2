// spmd/core/with_rank.hpp — from a run-time rank to a compiled per-rank path.
//
//   spmd::with_rank<M>(my_rank, [&](auto rank) {
//     constexpr auto e = L{}.local_extents<decltype(rank)::value>();  // static per rank
//   });
//
// Host only: a rank outside the mesh is a run-time error and throws.
#pragma once

#include <boost/mp11/algorithm.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "spmd/core/mesh.hpp"

namespace spmd {

/// A rank as a compile-time constant.
template <index_t R>
using rank_c = std::integral_constant<index_t, R>;

/// Calls f(rank_c<rank>{}) — one instantiation of f per rank of the mesh, chosen by a
/// jump table (Boost.MP11's mp_with_index). Throws std::out_of_range naming the rank
/// when it is not in the mesh.
template <class Mesh, class F>
decltype(auto) with_rank(index_t rank, F&& f) {
  const index_t i = Mesh::index_of(rank);
  if (i < 0)
    throw std::out_of_range("spmd::with_rank: rank " + std::to_string(rank) +
                            " is not in the mesh");
  return boost::mp11::mp_with_index<static_cast<std::size_t>(Mesh::size)>(
      static_cast<std::size_t>(i), [&](auto index) -> decltype(auto) {
        return f(rank_c<Mesh::rank_at(decltype(index)::value)>{});
      });
}

}  // namespace spmd
