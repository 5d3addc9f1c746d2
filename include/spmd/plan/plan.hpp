// spmd/plan/plan.hpp — a redistribute plan: the steps from one layout to another.
//
// (Interface; the planner that fills it is spmd/plan/planner.hpp.)
#pragma once

#include "spmd/core/small_array.hpp"
#include "spmd/plan/step.hpp"

namespace spmd {

inline constexpr int max_plan_steps = 24;

struct plan {
  svec<plan_step, max_plan_steps> steps{};
  double cost_us = 0;  // the cost model's estimate (see docs/redistribute.md)

  SPMD_HD constexpr int count(step_kind k) const {
    int n = 0;
    for (const plan_step& s : steps) n += s.kind == k;
    return n;
  }
  SPMD_HD constexpr int collectives() const {
    int n = 0;
    for (const plan_step& s : steps) n += is_collective(s.kind);
    return n;
  }
};

}  // namespace spmd
