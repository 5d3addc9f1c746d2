// spmd/plan/typed_plan.hpp — the plan between two layout types, computed by the compiler.
//
//   using From = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::shard<0>>, E>;
//   using To   = spmd::layout<M, spmd::placements<spmd::replicate, spmd::replicate>, E>;
//   using P = spmd::plan_of<From, To, float>;
//   static_assert(P::collectives() == 1 && P::count(spmd::step_kind::all_gather) == 1);
//   static_assert(P::trace() == "S(0)[0]S(0)[1]->RR");
#pragma once

#include <cstddef>
#include <type_traits>

#include "spmd/core/layout.hpp"
#include "spmd/plan/planner.hpp"
#include "spmd/plan/trace.hpp"

// How much a compile-time plan search may examine (make_plan's `work`: moves and the
// enumerations behind them) before plan_of stops it with a sentence, so that the compiler's
// own evaluation limit (which only says "possible infinite loop?") is never reached.
// Measured (bench/RESULTS.md): clang 14 spends 220-330 evaluation steps per unit (the budgeted path: 262) against its
// default -fconstexpr-steps=1048576; g++ 12 spends 1,300-2,100 operations per unit against
// its default -fconstexpr-ops-limit=33554432. Raise the budget and the limit together.
#ifndef SPMD_PLAN_CONSTEXPR_WORK
#if defined(__clang__)
#define SPMD_PLAN_CONSTEXPR_WORK 3000
#else
#define SPMD_PLAN_CONSTEXPR_WORK 14000
#endif
#endif

namespace spmd {

/// The moves a compile-time plan search may examine (SPMD_PLAN_CONSTEXPR_WORK).
inline constexpr long constexpr_plan_work = SPMD_PLAN_CONSTEXPR_WORK;

template <class Src, class Dst, class T = float>
struct plan_of {
  static_assert(std::is_same_v<typename Src::mesh_type, typename Dst::mesh_type>,
                "spmd::redistribute: the source and target layouts are on different meshes.");
  static_assert(std::is_same_v<typename Src::extents_type, typename Dst::extents_type>,
                "spmd::redistribute: the source and target layouts have different global extents.");
  static_assert(!std::is_integral_v<T> || (!holds_partial(Src::nominal_spec().placements, reduce_op::avg) &&
                                           !holds_partial(Dst::nominal_spec().placements, reduce_op::avg)),
                "spmd: P(avg) needs a floating-point element type: the average of integers is not "
                "an integer (torch.mean refuses integer tensors); hold P(sum) and divide.");

  /// Bytes of the global tensor: exact for static extents, nominal for dynamic ones.
  static constexpr double global_bytes = tensor_bytes<T, typename Src::extents_type>();

  // Over the sizes the compiler decides with (a static mesh's own; a dynamic size as
  // nominal_dyn_size): a dynamic mesh's plan is checked here, and dynamic_plan_of makes the
  // one of its bound sizes at run time.
  static constexpr plan_result result =
      make_plan(Src::nominal_spec(), Dst::nominal_spec(), global_bytes, cost_model{}, constexpr_plan_work);
  static_assert(result.error != plan_error::over_budget,
                "spmd::redistribute: the compile-time plan search examines more moves than "
                "SPMD_PLAN_CONSTEXPR_WORK allows (3000 under clang, 14000 under g++: the "
                "compilers' default evaluation limits). Define SPMD_PLAN_CONSTEXPR_WORK=N and "
                "raise the compiler's limit with it (clang: -fconstexpr-steps=400*N; g++: "
                "-fconstexpr-ops-limit=2500*N), or redistribute in two steps through an "
                "intermediate layout: `spmd-plan plan --mesh ... --from ... --to ...` prints the "
                "plan's intermediate states.");
  static_assert(result.error != plan_error::search_too_large,
                "spmd::redistribute: the plan search visits too many states (meshes of more than "
                "4-5 dims); plan in steps through an intermediate layout.");
  static_assert(result.error != plan_error::too_many_steps,
                "spmd::redistribute: the best plan has more steps than spmd::max_plan_steps.");

  static constexpr const plan& value() { return result.value; }
  static constexpr int size() { return result.value.steps.size(); }
  static constexpr const plan_step& step(int i) { return result.value.steps[i]; }
  static constexpr int count(step_kind k) { return result.value.count(k); }
  static constexpr int collectives() { return result.value.collectives(); }
  static constexpr double cost_us() { return result.value.cost_us; }
  static constexpr plan_text trace() { return spmd::trace(result.value, Src::nominal_spec(), Dst::nominal_spec()); }
};

}  // namespace spmd
