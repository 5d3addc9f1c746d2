// spmd/backends/sim/api.hpp — DTensor's API on the simulation: spmd::sim::dtensor<T, L>,
// distribute_tensor, from_local (every rank's local at once), empty, full, zeros, ones,
// arange. The rest (redistribute, local, full_tensor, the operators) is spmd::runtime's,
// seen from spmd::sim (names.hpp).
//
//   auto x = spmd::sim::distribute_tensor<L>(global);
//   auto y = spmd::sim::from_local<L>(locals);          // locals[i]: mesh index i's local
#pragma once

#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/sim/backend.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/random.hpp"

namespace spmd::sim {

SPMD_RUNTIME_BACKEND_API(backend);

/// A dtensor from every rank's local, `locals[i]` being the local of the rank at mesh index i
/// (Mesh::rank_at(i)). Every local's shape is checked against the layout: a mismatch throws
/// std::invalid_argument naming the rank and the dim.
template <class Layout, element T>
dtensor<T, Layout> from_local(std::span<const host_tensor<T>> locals,
                              const Layout& layout = Layout{}) {
  using M = typename Layout::mesh_type;
  if (static_cast<index_t>(locals.size()) != M::size)
    throw std::invalid_argument("spmd::sim::from_local: got " + std::to_string(locals.size()) +
                                " locals, the mesh has " + std::to_string(M::size) + " ranks");
  return factories<backend>::from_local<T>(
      layout,
      [&](index_t i, index_t) -> const host_tensor<T>& {
        return locals[static_cast<std::size_t>(i)];
      },
      "spmd::sim::from_local");
}
template <class Layout, element T>
dtensor<T, Layout> from_local(const std::vector<host_tensor<T>>& locals,
                              const Layout& layout = Layout{}) {
  return from_local<Layout>(std::span<const host_tensor<T>>(locals), layout);
}
/// The same, keyed by rank id; the map must hold exactly the mesh's ranks.
template <class Layout, element T>
dtensor<T, Layout> from_local(const std::map<index_t, host_tensor<T>>& locals,
                              const Layout& layout = Layout{}) {
  using M = typename Layout::mesh_type;
  for (const auto& [r, t] : locals)
    if (!M::contains(r))
      throw std::invalid_argument("spmd::sim::from_local: rank " + std::to_string(r) +
                                  " is not in the mesh");
  return factories<backend>::from_local<T>(
      layout,
      [&](index_t, index_t r) -> const host_tensor<T>& {
        const auto it = locals.find(r);
        if (it == locals.end())
          throw std::invalid_argument("spmd::sim::from_local: no local for rank " +
                                      std::to_string(r));
        return it->second;
      },
      "spmd::sim::from_local");
}

}  // namespace spmd::sim
