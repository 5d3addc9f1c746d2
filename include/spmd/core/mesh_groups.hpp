// spmd/core/mesh_groups.hpp — the groups of ranks a collective over some mesh dims runs on.
//
// A set of mesh dims is a bit mask (bit m = mesh dim m). Ranks that agree on every
// coordinate outside the mask form one group; several dims in the mask are flattened
// into one group, row-major in mesh-dim order (as DeviceMesh._flatten does).
#pragma once

#include "spmd/core/config.hpp"
#include "spmd/core/layout_spec.hpp"

namespace spmd {

using dim_mask = unsigned;

SPMD_HD constexpr bool in_mask(dim_mask mask, int m) { return (mask >> m) & 1u; }

/// Number of ranks in each group of `mask`.
SPMD_HD constexpr index_t group_size(const mesh_shape_vec& mesh, dim_mask mask) {
  index_t n = 1;
  for (int m = 0; m < mesh.size(); ++m)
    if (in_mask(mask, m)) n *= mesh[m];
  return n;
}

/// Number of groups of `mask` (one per coordinate of the other dims).
SPMD_HD constexpr index_t group_count(const mesh_shape_vec& mesh, dim_mask mask) {
  index_t n = 1;
  for (int m = 0; m < mesh.size(); ++m)
    if (!in_mask(mask, m)) n *= mesh[m];
  return n;
}

/// Mesh index (row-major position in the mesh) of member j of group g.
/// Groups are numbered row-major over the dims outside the mask, members row-major
/// over the dims inside it.
SPMD_HD constexpr index_t group_member(const mesh_shape_vec& mesh, dim_mask mask, index_t g,
                                       index_t j) {
  coord_vec c{};
  c.n = mesh.size();
  for (int m = mesh.size() - 1; m >= 0; --m) {
    index_t& k = in_mask(mask, m) ? j : g;
    c[m] = k % mesh[m];
    k /= mesh[m];
  }
  return ravel(mesh, c);
}

struct group_position {
  index_t group;  // which group
  index_t index;  // position inside it
};

/// Inverse of group_member for the mesh index `linear`.
SPMD_HD constexpr group_position group_of(const mesh_shape_vec& mesh, dim_mask mask,
                                          index_t linear) {
  const coord_vec c = unravel(mesh, linear);
  group_position p{0, 0};
  for (int m = 0; m < mesh.size(); ++m) {
    if (in_mask(mask, m))
      p.index = p.index * mesh[m] + c[m];
    else
      p.group = p.group * mesh[m] + c[m];
  }
  return p;
}

}  // namespace spmd
