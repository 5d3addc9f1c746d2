// spmd/host/groups.hpp — the members of a mesh group as a host vector, for the backends'
// collectives on local tensors (the simulation's and the CUDA backend's tables agree on
// them, so both chunk and reduce in the same group order).
#pragma once

#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/mesh_groups.hpp"

namespace spmd::host {

/// The mask of every dim of Mesh (the whole mesh as one group).
template <class Mesh>
constexpr dim_mask whole_mesh_mask() {
  return Mesh::ndim >= 32 ? ~dim_mask{0} : (dim_mask{1} << Mesh::ndim) - 1;
}

/// Mesh indices of the members of group g, in group order.
template <class Mesh>
std::vector<index_t> group_members(dim_mask group, index_t g) {
  const index_t n = Mesh::group_size(group);
  std::vector<index_t> m(static_cast<std::size_t>(n));
  for (index_t j = 0; j < n; ++j)
    m[static_cast<std::size_t>(j)] = group_member(Mesh::shape_vec(), group, g, j);
  return m;
}

}  // namespace spmd::host
