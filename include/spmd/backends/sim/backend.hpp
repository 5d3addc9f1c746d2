// spmd/backends/sim/backend.hpp — the simulation as a backend: every rank in this process.
//
// `spmd::sim::backend` holds every rank's local in one host::local_set and runs a plan's
// steps with execute.hpp: compile-time plans on static extents (up to static_ranks_limit
// ranks) through execute_static, whose schedules the compiler builds and unrolls; the
// others through the schedules built once per thread and shape.
#pragma once

#include <utility>

#include "spmd/host/local_set.hpp"
#include "spmd/backends/sim/execute.hpp"
#include "spmd/backends/sim/names.hpp"
#include "spmd/plan/lower.hpp"

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

  /// Every local is already here.
  template <class T, class M>
  static const local_set<T>& gather_all(const local_set<T>& locals, const layout_spec&,
                                        const shape_vec&) {
    return locals;
  }
};

}  // namespace spmd::sim
