// spmd/plan.hpp — redistribute planning: steps, the planner, typed plans and traces.
// Host code only (the planner uses std::vector in constant evaluation).
#pragma once

#include "spmd/plan/cost_model.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/planner.hpp"
#include "spmd/plan/step.hpp"
#include "spmd/plan/trace.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/plan/typed_plan.hpp"
