// spmd/plan/traffic.hpp — the exact bytes a step moves, rank by rank (no padding).
//
// What a rank receives from other ranks in one step, for ring-style collectives:
//   all_gather, all_to_all   |box_B(r)| - |box_A(r) ∩ box_B(r)|   (every element it lacked)
//   reduce_scatter           |box_A(r)| - |box_B(r)|              (ring: all chunks but its own)
//   all_reduce               2 (|box_B(r)| - its chunk of box_B(r) over the group)
//                            (a reduce-scatter then an all-gather of the flattened block)
//   local steps              0
// in elements; times the element size for bytes. This is the bus traffic nccl-tests
// reports, counted exactly for uneven boxes; the planner's cost model is its even-split
// estimate.
#pragma once

#include "spmd/core/chunk.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/plan/step.hpp"

namespace spmd {

SPMD_HD constexpr index_t box_volume(const local_box& b) {
  index_t n = 1;
  for (index_t e : b.shape) n *= e;
  return n;
}

/// Elements in the intersection of two blocks of the same global tensor.
SPMD_HD constexpr index_t overlap_volume(const local_box& a, const local_box& b) {
  index_t n = 1;
  for (int d = 0; d < a.shape.size(); ++d) {
    const index_t lo = a.offset[d] > b.offset[d] ? a.offset[d] : b.offset[d];
    const index_t ha = a.offset[d] + a.shape[d], hb = b.offset[d] + b.shape[d];
    const index_t hi = ha < hb ? ha : hb;
    if (hi <= lo) return 0;
    n *= hi - lo;
  }
  return n;
}

/// Elements the rank at mesh index `linear` receives from other ranks in step `s`.
SPMD_HD constexpr index_t received_elements(const plan_step& s, const shape_vec& global,
                                            index_t linear) {
  if (!is_collective(s.kind)) return 0;
  const coord_vec c = unravel(s.from.mesh, linear);
  const local_box a = box_at(s.from, global, c), b = box_at(s.to, global, c);
  switch (s.kind) {
    case step_kind::all_gather:
    case step_kind::all_to_all: return box_volume(b) - overlap_volume(a, b);
    case step_kind::reduce_scatter: return box_volume(a) - box_volume(b);
    case step_kind::all_reduce: {
      const index_t n = group_size(s.from.mesh, s.mesh_dims);
      const index_t j = group_of(s.from.mesh, s.mesh_dims, linear).index;
      return 2 * (box_volume(b) - chunk(box_volume(b), n, j).size);
    }
    default: return 0;
  }
}

struct step_traffic {
  index_t max_rank_bytes = 0;  // the busiest rank
  index_t total_bytes = 0;     // over all ranks
};

SPMD_HD constexpr step_traffic traffic(const plan_step& s, const shape_vec& global,
                                       index_t element_bytes) {
  step_traffic t{};
  const index_t ranks = s.from.mesh_size();
  for (index_t r = 0; r < ranks; ++r) {
    const index_t bytes = received_elements(s, global, r) * element_bytes;
    t.total_bytes += bytes;
    if (bytes > t.max_rank_bytes) t.max_rank_bytes = bytes;
  }
  return t;
}

}  // namespace spmd
