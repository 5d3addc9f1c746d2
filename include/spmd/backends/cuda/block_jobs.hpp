// spmd/backends/cuda/block_jobs.hpp — what the device factories and distribute_device_tensor
// launch, built on the host from a layout and a global shape (no CUDA runtime here, so the
// CPU tests build the same jobs and tables and run them over an emulated grid):
//
//   block_places(spec, global)        each rank's block: its shape, where it starts in the
//                                     global tensor, its Partial group position, whether a
//                                     factory leaves it the identity (block_body.hpp's jobs)
//   add_blocks<E>(jobs, places, ranks, job)  each held rank's job, in work items of E
//                                     elements (the body's)
//   distribute_table(spec, global, held)  one step table that slices a global tensor in device
//                                     memory (input 0) into every rank's block (output r):
//                                     host::distribute's regions, replicas as one fan-out copy
#pragma once

#include <cstddef>
#include <type_traits>
#include <vector>

#include "spmd/backends/cuda/block_body.hpp"
#include "spmd/backends/cuda/job_batch.hpp"
#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/host/distribute.hpp"

namespace spmd::cuda {

/// One rank's block of a global tensor under a layout.
struct block_place {
  shape_vec shape{};
  index_t elems = 0;
  block_geom geom{};
  index_t base = 0;       // global row-major index of its first element
  index_t part = 0;       // position in its Partial group
  bool identity = false;  // host::holds_identity: a factory fills it with the identity
};

/// The geometry of a block of shape `block` in a row-major global tensor of shape `global`:
/// dims of extent 1 dropped, and a dim merged into the next inner one where the block spans
/// that one whole (its stride in the global tensor is the inner dim's extent times its
/// stride), so that global_index divides only where the block's rows are cut.
inline block_geom block_geometry(const shape_vec& block, const shape_vec& global) {
  block_geom g;  // one dim of extent 1: an empty block's, a scalar's
  index_t ext[max_tensor_dims] = {}, gstride[max_tensor_dims] = {};
  int nd = 0;  // dims kept so far, innermost first
  index_t stride = 1;
  for (int d = global.size() - 1; d >= 0; --d) {
    if (block[d] == 0) return g;
    if (block[d] != 1) {
      if (nd > 0 && stride == ext[nd - 1] * gstride[nd - 1]) {
        ext[nd - 1] *= block[d];  // contiguous with the inner dim: one dim
      } else {
        ext[nd] = block[d];
        gstride[nd] = stride;
        ++nd;
      }
    }
    stride *= global[d];
  }
  if (nd == 0) return g;
  g.nd = nd;
  for (int k = 0; k < nd; ++k) {  // outermost first
    g.ext[k] = divisor(ext[nd - 1 - k]);
    g.gstride[k] = gstride[nd - 1 - k];
  }
  return g;
}

/// Every mesh index's block (@pre spec from make_spec, global of its tensor rank).
inline std::vector<block_place> block_places(const layout_spec& spec, const shape_vec& global) {
  const dim_mask partial = host::detail::partial_of(spec).mask;
  std::vector<block_place> out;
  out.reserve(static_cast<std::size_t>(spec.mesh_size()));
  for (index_t r = 0; r < spec.mesh_size(); ++r) {
    const local_box b = box_at(spec, global, unravel(spec.mesh, r));
    block_place p;
    p.shape = b.shape;
    p.elems = host::shape_elems(b.shape);
    index_t stride = 1;
    for (int d = global.size() - 1; d >= 0; --d) {
      p.base += b.offset[d] * stride;
      stride *= global[d];
    }
    p.geom = block_geometry(b.shape, global);
    p.part = group_of(spec.mesh, partial, r).index;
    p.identity = host::holds_identity(spec, r);
    out.push_back(p);
  }
  return out;
}

/// Adds the block of every mesh index in `ranks` (the held ones) to `jobs` (a job_launcher of
/// block jobs) as its work items, E elements to an item (the body's: block_item_elems, or
/// random_item_elems for the random draws): job(r, place) gives the rank's job, the
/// launcher's geometry type its geometry (no_geom for bodies that need none).
template <int E = block_item_elems, class Launcher, class Ranks, class Job>
void add_blocks(Launcher& jobs, const std::vector<block_place>& places, const Ranks& ranks, Job&& job) {
  using G = typename Launcher::geom_type;
  for (const index_t r : ranks) {
    const block_place& p = places[static_cast<std::size_t>(r)];
    if constexpr (std::is_same_v<G, no_geom>) jobs.add(job(r, p), no_geom{}, block_items<E>(p.elems));
    else jobs.add(job(r, p), p.geom, block_items<E>(p.elems));
  }
}

/// The step that cuts a row-major global tensor (the launch's input 0) into every held rank's
/// block (output r): host::distribute's copy regions, before its Partial split. Ranks that
/// receive the same region share one fan-out op, so the global tensor is read once.
inline step_table distribute_table(const layout_spec& spec, const shape_vec& global, host::held_range held) {
  step_table t;
  const std::vector<host::detail::rank_slice> slices = host::detail::slices(spec, global);
  for (const index_t r : held.indices()) {
    const run_geom& geo = slices[static_cast<std::size_t>(r)].geo;
    if (geo.count() == 0) continue;
    t.ops.push_back(dev_op{op_code::copy, 0, r, geo, t.items});
    t.items += geo.count();
  }
  merge_fanout(t);
  return t;
}

}  // namespace spmd::cuda
