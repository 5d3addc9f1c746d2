// spmd/plan/trace.hpp — a plan as text, in DTensor's trace format, at compile time.
//
//   S(0)[0]S(0)[1]->S(0)R->RR
//
// Each state is its placements run together; a shard carries its position `[k]` in the
// shard order when several mesh dims shard the same tensor dim. Built in a fixed buffer so
// a static_assert can compare it with a string literal.
#pragma once

#include <string_view>

#include "spmd/core/fixed_text.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/put_placement.hpp"
#include "spmd/plan/plan.hpp"

namespace spmd {

/// A plan's text: a trace of max_plan_steps + 1 states of max_mesh_dims placements of at
/// most 10 characters ("P(product)"), joined by "->", fits.
using plan_text = fixed_text<(max_plan_steps + 1) * (max_mesh_dims * placement_chars + 2)>;

/// One state, e.g. `S(0)[0]S(0)[1]`, `P(sum)R`.
template <int N>
constexpr void put_state(fixed_text<N>& t, const layout_spec& s) {
  for (const placement& p : s.placements) {
    int sharing = 0;
    if (p.is_shard())
      for (const placement& q : s.placements) sharing += q.is_shard(p.dim);
    put_placement(t, p, sharing > 1);
  }
}

/// The states a plan goes through from `src` to `dst`, joined by "->". The ends are the
/// caller's layouts (the plan's own states hold R on mesh dims of size 1).
constexpr plan_text trace(const plan& p, const layout_spec& src, const layout_spec& dst) {
  plan_text t{};
  put_state(t, src);
  for (int i = 0; i < p.steps.size(); ++i) {
    t.put("->");
    put_state(t, i + 1 == p.steps.size() ? dst : p.steps[i].to);
  }
  return t;
}

}  // namespace spmd
