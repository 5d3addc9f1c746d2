// spmd/core/layout_spec.hpp — the value-level layout: validation, normalisation, and
// the map from a mesh coordinate to the block of the global tensor it holds.
//
// Everything here is constexpr, allocation-free and exception-free: the same
// functions answer `static_assert`s, run in device code and serve the CLI.
#pragma once

#include "spmd/core/chunk.hpp"
#include "spmd/core/config.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd {

using mesh_shape_vec = svec<index_t, max_mesh_dims>;
using coord_vec = svec<index_t, max_mesh_dims>;

/// What can be wrong with a (mesh, placements, tensor rank) triple.
enum class layout_error : unsigned char {
  none,
  placement_count_mismatch,   // placements.size() != mesh dims
  shard_dim_out_of_range,     // shard<D> with D outside [-R, R)
  mixed_partial_ops,          // two different partial ops in one layout
  inconsistent_shard_order,   // positions of one tensor dim's shards are not 0..k-1
  bad_mesh_shape,             // a mesh dim < 1, or no/too many mesh dims
  too_many_tensor_dims,       // R > max_tensor_dims
};

/// A sentence for each error (the same words the compile-time checks use).
SPMD_HD constexpr const char* describe(layout_error e) {
  switch (e) {
    case layout_error::none: return "no error";
    case layout_error::placement_count_mismatch:
      return "the number of placements differs from the number of mesh dims";
    case layout_error::shard_dim_out_of_range: return "a shard dim is outside the tensor's dims";
    case layout_error::mixed_partial_ops: return "two different partial ops in one layout";
    case layout_error::inconsistent_shard_order:
      return "inconsistent shard order; the positions given to the shards of one tensor dim "
             "must be 0..k-1, each once, on all of them or on none";
    case layout_error::bad_mesh_shape: return "a mesh needs 1 to 8 dims, each of size >= 1";
    case layout_error::too_many_tensor_dims: return "a tensor may have at most 8 dims";
  }
  return "unknown error";
}

/// A validated layout in value form. Shard dims are non-negative and every shard
/// carries its explicit position in its tensor dim's shard order.
struct layout_spec {
  mesh_shape_vec mesh{};
  placement_vec placements{};
  int tensor_rank = 0;

  /// Mesh dims that shard tensor dim d, in shard order (first split first).
  SPMD_HD constexpr svec<int, max_mesh_dims> shard_order(int d) const {
    svec<int, max_mesh_dims> out{};
    for (int pos = 0; pos < placements.size(); ++pos)
      for (int m = 0; m < placements.size(); ++m)
        if (placements[m].is_shard(d) && placements[m].order == pos) out.push_back(m);
    return out;
  }

  /// True when tensor dim d's shards apply in the default order (left to right).
  SPMD_HD constexpr bool default_order(int d) const {
    int expect = 0;
    for (int m = 0; m < placements.size(); ++m)
      if (placements[m].is_shard(d) && placements[m].order != expect++) return false;
    return true;
  }

  SPMD_HD constexpr index_t mesh_size() const {
    index_t n = 1;
    for (index_t s : mesh) n *= s;
    return n;
  }

  SPMD_HD friend constexpr bool operator==(const layout_spec& a, const layout_spec& b) {
    return a.mesh == b.mesh && a.placements == b.placements && a.tensor_rank == b.tensor_rank;
  }
};

struct spec_result {
  layout_spec spec{};
  layout_error error = layout_error::none;
  int where = -1;  // the mesh dim (placement index) the error is about, when there is one
  SPMD_HD constexpr bool ok() const { return error == layout_error::none; }
};

/// Check and normalise: negative shard dims count from the end; shards of a tensor dim
/// with no explicit positions get positions in mesh-dim order.
SPMD_HD constexpr spec_result make_spec(const mesh_shape_vec& mesh, const placement_vec& raw,
                                        int tensor_rank) {
  spec_result r{};
  r.spec.mesh = mesh;
  r.spec.tensor_rank = tensor_rank;
  auto fail = [&r](layout_error e, int where) {
    r.error = e;
    r.where = where;
    return r;
  };
  if (mesh.size() < 1) return fail(layout_error::bad_mesh_shape, -1);
  for (int m = 0; m < mesh.size(); ++m)
    if (mesh[m] < 1) return fail(layout_error::bad_mesh_shape, m);
  if (tensor_rank < 0 || tensor_rank > max_tensor_dims)
    return fail(layout_error::too_many_tensor_dims, -1);
  if (raw.size() != mesh.size()) return fail(layout_error::placement_count_mismatch, -1);

  // The placements are read through their array, not svec's accessors: the automatic
  // sharding search makes thousands of layouts in the compiler's evaluator, where each
  // accessor call costs about what a loop step does.
  r.spec.placements = raw;
  placement* const p = r.spec.placements.elems;
  const int n = r.spec.placements.n;
  constexpr placement_kind shard = placement_kind::shard, partial = placement_kind::partial;
  int partial_at = -1;
  for (int m = 0; m < n; ++m) {
    if (p[m].kind == shard) {
      if (p[m].dim < -tensor_rank || p[m].dim >= tensor_rank)
        return fail(layout_error::shard_dim_out_of_range, m);
      if (p[m].dim < 0) p[m].dim += tensor_rank;
    } else if (p[m].kind == partial) {
      if (partial_at >= 0 && p[partial_at].op != p[m].op)
        return fail(layout_error::mixed_partial_ops, m);
      partial_at = m;
    } else {
      p[m].order = default_order;
    }
  }
  // Shard order, one tensor dim at a time.
  for (int d = 0; d < tensor_rank; ++d) {
    int count = 0, given = 0;
    for (int m = 0; m < n; ++m)
      if (p[m].kind == shard && p[m].dim == d) {
        ++count;
        given += p[m].order != default_order;
      }
    if (given == 0) {
      int pos = 0;
      for (int m = 0; m < n; ++m)
        if (p[m].kind == shard && p[m].dim == d) p[m].order = pos++;
      continue;
    }
    for (int m = 0; m < n; ++m) {
      if (p[m].kind != shard || p[m].dim != d) continue;
      if (given != count || p[m].order < 0 || p[m].order >= count)
        return fail(layout_error::inconsistent_shard_order, m);
      for (int k = 0; k < m; ++k)
        if (p[k].kind == shard && p[k].dim == d && p[k].order == p[m].order)
          return fail(layout_error::inconsistent_shard_order, m);
    }
  }
  return r;
}

/// The block of the global tensor that one mesh coordinate holds.
struct local_box {
  shape_vec shape{};
  shape_vec offset{};
  SPMD_HD friend constexpr bool operator==(const local_box& a, const local_box& b) {
    return a.shape == b.shape && a.offset == b.offset;
  }
};

/// Local shape and global offset of the rank at `coord`, exactly as DTensor's
/// compute_local_shape_and_global_offset: each shard of a tensor dim applies chunk()
/// to the size left by the previous one (chunk of chunk, in shard order). A zero-size
/// piece reports offset = the global extent, an out-of-bounds value no real block has.
/// @pre `spec` came from make_spec; global.size() == spec.tensor_rank;
///      0 <= coord[m] < spec.mesh[m]
SPMD_HD constexpr local_box box_at(const layout_spec& spec, const shape_vec& global,
                                   const coord_vec& coord) {
  local_box b{global, {}};
  for (int d = 0; d < spec.tensor_rank; ++d) {
    b.offset.push_back(0);
    const auto order = spec.shard_order(d);
    for (int m : order) {
      const chunk_piece piece = chunk(b.shape[d], spec.mesh[m], coord[m]);
      b.shape[d] = piece.size;
      b.offset[d] = piece.size == 0 ? global[d] : b.offset[d] + piece.start;
    }
  }
  return b;
}

/// Row-major coordinate of the mesh index `linear` (0 <= linear < prod(mesh)).
SPMD_HD constexpr coord_vec unravel(const mesh_shape_vec& mesh, index_t linear) {
  coord_vec c{};
  c.n = mesh.size();
  for (int m = mesh.size() - 1; m >= 0; --m) {
    c[m] = linear % mesh[m];
    linear /= mesh[m];
  }
  return c;
}

/// Row-major mesh index of a coordinate.
SPMD_HD constexpr index_t ravel(const mesh_shape_vec& mesh, const coord_vec& c) {
  index_t linear = 0;
  for (int m = 0; m < mesh.size(); ++m) linear = linear * mesh[m] + c[m];
  return linear;
}

/// True when every rank holds the same extent along tensor dim d (each nested split
/// divides evenly), so the local extent is independent of the rank.
SPMD_HD constexpr bool uniform_extent(const layout_spec& spec, index_t global_extent, int d) {
  index_t size = global_extent;
  for (int m : spec.shard_order(d)) {
    if (size % spec.mesh[m] != 0) return false;
    size /= spec.mesh[m];
  }
  return true;
}

}  // namespace spmd
