// spmd/backends/sim/backend.hpp — the simulation as a backend: every rank in this process.
//
// `spmd::sim::backend` holds every rank's local in one host::local_set and runs a plan's
// steps with execute.hpp: compile-time plans on static extents (up to static_ranks_limit
// ranks) through execute_static, whose schedules the compiler builds and unrolls; the
// others through the schedules built once per thread and shape.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "spmd/host/local_set.hpp"
#include "spmd/backends/sim/execute.hpp"
#include "spmd/backends/sim/names.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/plan/lower.hpp"
#include "spmd/plan/p2p_schedule.hpp"
#include "spmd/runtime/comm_counter.hpp"

namespace spmd::sim {

/// The key of the replica plans kept beside Key's schedules.
template <class Key>
struct replica_plan_key {};
/// The key of the steps' compact forms kept beside the schedules of Key.
template <class Key>
struct compact_key {};

struct backend {
  static constexpr const char* name = "sim";

  /// Every mesh index.
  template <class M>
  static held_range held() {
    return {0, M::size};
  }
  /// Said at compile time: the runtime's per-rank loops then have constant bounds.
  static constexpr bool holds_every_rank = true;

  template <class T, class Holder, class M, class Ext, class In>
  static local_set<T> run_plan(const Ext& ext, In&& in) {
    if constexpr (Ext::is_static() && Holder::value.steps.size() > 0 &&
                  Holder::value.steps[0].from.mesh_size() <= detail::static_ranks_limit) {
      return detail::execute_static<T, Holder, Ext>(std::forward<In>(in));
    } else {  // schedules built at run time, once per shape
      const shape_vec global = ext.to_vec();
      const auto& scheds = cached_schedules<Holder>(global, "spmd::sim::redistribute");
      const auto& compact =
          cached_per_shape<compact_key<Holder>>(global, [&] { return detail::compact_steps(scheds); });
      return detail::run_schedules<T>(Holder::value, scheds,
                                      detail::cached_replica_plans<Holder>(global, scheds), global,
                                      std::forward<In>(in), &compact);
    }
  }

  /// A plan known at run time only (a mesh with a dynamic size: plan/dynamic_plan.hpp), by
  /// the schedules execute() builds for it.
  template <class T, class M, class Key, class Ext, class In>
  static local_set<T> run_plan_value(const plan& p, const Ext& ext, In&& in) {
    const shape_vec global = ext.to_vec();
    const auto& scheds =
        cached_per_plan<Key>(p, global, [&] { return build_schedules(p, global, "spmd::sim::redistribute"); });
    const auto& reps = cached_per_plan<replica_plan_key<Key>>(p, global, [&] { return detail::replica_plans(scheds); });
    const auto& compact = cached_per_plan<compact_key<Key>>(p, global, [&] { return detail::compact_steps(scheds); });
    return detail::run_schedules<T>(p, scheds, reps, global, std::forward<In>(in), &compact);
  }

  /// One slot of a point-to-point schedule over mesh dim `dim` (plan/p2p_schedule.hpp):
  /// action(n, j) is what group position j of n does; each rank's block becomes the one it
  /// receives (one that receives none keeps its own). The blocks of a group are of one shape
  /// (the sender's is what arrives; the per-process backends receive into that size). Every
  /// rank is here: the buffers change hands, nothing is copied.
  template <class T, class M, class Action>
  static void p2p_slot(local_set<T>& x, int dim, Action&& action) {
    const mesh_shape_vec shape = M::shape_vec();
    const index_t n = shape[dim];
    if (n <= 1) return;
    local_set<T> y(x.ranks());
    std::int64_t bytes = 0;
    for (const index_t i : x.held()) {
      coord_vec c = unravel(shape, i);
      const p2p::action a = action(static_cast<int>(n), static_cast<int>(c[dim]));
      if (a.recv_from < 0) {
        y.share_from(i, x, i);
        continue;
      }
      c[dim] = a.recv_from;
      const index_t from = ravel(shape, c);
      if (x.shape(from) != x.shape(i))
        throw std::logic_error("spmd::sim: a point-to-point slot's blocks differ in shape (rank " +
                               std::to_string(from) + " to rank " + std::to_string(i) + ")");
      y.share_from(i, x, from);
      bytes += x.size(from) * static_cast<std::int64_t>(sizeof(T));
    }
    x = std::move(y);
    runtime::detail::record_p2p(dim_mask{1} << dim, bytes);
  }

  /// Every local is already here.
  template <class T, class M>
  static const local_set<T>& gather_all(const local_set<T>& locals, const layout_spec&,
                                        const shape_vec&) {
    return locals;
  }
};

}  // namespace spmd::sim
