// spmd/plan/step.hpp — one step of a redistribute plan, and what it means.
//
// A plan moves a tensor from layout A to layout B through a sequence of states (layout
// specs over the same mesh and tensor rank). Each step changes the placements of a set of
// mesh dims G (a dim_mask) and nothing else. Its semantics are defined on boxes, so one
// definition covers even and uneven shards and every backend:
//
//   box_X(r)   = the block rank r holds under state X (box_at),
//   group(r)   = the ranks that agree with r on every coordinate outside G, in group order.
//
//   all_gather, all_to_all   (G dims: S -> R, S -> S)
//       out_r[box_B(r)] = union over s in group(r) of in_s[box_A(s) ∩ box_B(r)]  (disjoint copies)
//   all_reduce, reduce_scatter   (G dims: P(op) -> R, P(op) -> S)
//       out_r = op-reduction over s in group(r), in group order, of in_s[box_B(r)];
//       avg = sum, then divide by the group size
//   chunk      (G dims: R -> S, local)      out_r = in_r[box_B(r)]
//   partition  (G dims: R -> P(op), local)  sum/product: the rank with G-coordinates all 0
//                                           keeps in_r, the others hold op's identity;
//                                           avg/max/min: out_r = in_r
//   fill       (G dims: S -> P(op), local)  out_r = op's identity over box_B(r), then
//                                           out_r[box_A(r)] = in_r (times the group size
//                                           for avg, so that the average is in_r)
//
// No step pads: every copy is an exact box, so uneven shards move only real elements.
#pragma once

#include <cstdint>

#include "spmd/core/config.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/core/placement.hpp"

namespace spmd {

enum class step_kind : std::uint8_t {
  all_gather,
  all_reduce,
  reduce_scatter,
  all_to_all,
  chunk,      // local
  partition,  // local
  fill,       // local
};
inline constexpr int step_kind_count = 7;
inline constexpr int collective_kind_count = 4;  // the first four kinds communicate

SPMD_HD constexpr bool is_collective(step_kind k) {
  return static_cast<int>(k) < collective_kind_count;
}

SPMD_HD constexpr const char* step_kind_name(step_kind k) {
  switch (k) {
    case step_kind::all_gather: return "all_gather";
    case step_kind::all_reduce: return "all_reduce";
    case step_kind::reduce_scatter: return "reduce_scatter";
    case step_kind::all_to_all: return "all_to_all";
    case step_kind::chunk: return "chunk";
    case step_kind::partition: return "partition";
    case step_kind::fill: return "fill";
  }
  return "?";
}

struct plan_step {
  step_kind kind = step_kind::chunk;
  dim_mask mesh_dims = 0;     // G: the mesh dims whose placements change
  reduce_op op = reduce_op::sum;  // reductions, partition and fill
  layout_spec from{};         // state A
  layout_spec to{};           // state B (equal to A outside G)

  SPMD_HD friend constexpr bool operator==(const plan_step& a, const plan_step& b) {
    return a.kind == b.kind && a.mesh_dims == b.mesh_dims && a.op == b.op && a.from == b.from &&
           a.to == b.to;
  }
};

}  // namespace spmd
