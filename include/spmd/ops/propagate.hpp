// spmd/ops/propagate.hpp — choose an operator's sharding: expand its rule (ops/rule.hpp) over
// the mesh dims into candidate strategies, cost each by the redistributions its inputs need
// (the planner's cost model), and pick one. constexpr: the typed API runs it in the compiler
// (ops/typed_op.hpp), `spmd-plan explain` at run time; both make the same choice.
//
//   op_context c = ...;                       // the inputs' layouts and global shapes
//   resolution r = resolve(einsum("mk,kn->mn"), c);
//   r.chosen.in[0], r.chosen.in[1], r.chosen.out   // placements the op runs with
//
// Candidates. On each mesh dim a candidate picks one of: replicate everything; shard one
// factor (every tensor that has it is sharded on that factor's dim, the others replicated;
// an output missing the factor becomes Partial(factor's reduce op)); or one of the rule's
// Partial pass-throughs. A factor chosen on several mesh dims is split in mesh-dim order
// (nested sharding). A candidate is invalid when it shards a `fixed` factor, an `even_only`
// factor whose pieces are not all equal (or whose extent is dynamic), a non-reducible factor
// the output lacks, when its placements are not a valid layout (two partial ops mixed), or
// when it needs an input to hold a Partial that input does not already hold (DTensor's
// rule: the local fill looks free, but it defers a reduction no cost here accounts for).
// The all-replicate candidate is always valid, so an op always has a strategy.
//
// Choice (DTensor's rule, made deterministic):
//   1. the first valid candidate whose inputs are already where they are (no redistribution,
//      mesh dims of size 1 compared as replicate) wins at cost 0;
//   2. otherwise the valid candidate with the least total cost of redistributing its inputs
//      (each the planner's exact plan cost), ties to the first in enumeration order (mesh
//      dim 0 varies slowest; on each mesh dim replicate, then factors in order, then partial
//      rules). Branch and bound keeps this cheap to compile: candidates are planned in order
//      of the planner's lower bound, and planning stops once the bound exceeds the best cost.
// With a forced output (out_sharding), only candidates producing it count in step 1, and
// step 2 adds the cost of redistributing the candidate's output to the forced placements.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "spmd/core/extents.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/ops/rule.hpp"
#include "spmd/plan/cost_model.hpp"
#include "spmd/plan/planner.hpp"

namespace spmd::ops {

/// What an op sees: every input's layout and global shape (dyn where unknown), the output's
/// global shape, and the bytes of each tensor for the cost model.
struct op_context {
  mesh_shape_vec mesh{};
  svec<layout_spec, max_op_inputs> in{};
  svec<shape_vec, max_op_inputs> in_shape{};
  shape_vec out_shape{};
  svec<double, max_op_inputs> in_bytes{};
  double out_bytes = 0;
  // Integer elements wrap: -x and x + c are not monotone there (-lowest is lowest), so the
  // rules pass P(max)/P(min) through fewer functions, and P(avg) through none.
  bool integral = false;
};

enum class candidate_error : std::uint8_t {
  none,
  fixed_factor,        // shards a factor the op needs whole
  uneven_factor,       // shards an even_only factor whose pieces differ (or are unknown)
  unreducible_factor,  // shards a factor the output lacks and the op cannot reduce
  invalid_layout,      // the placements are not a layout (e.g. two partial ops mixed)
  new_partial,         // needs an input to hold a Partial it does not already hold
};

constexpr const char* describe(candidate_error e) {
  switch (e) {
    case candidate_error::none: return "valid";
    case candidate_error::fixed_factor: return "shards a dim the op needs whole";
    case candidate_error::uneven_factor: return "shards a dim that must split evenly, unevenly";
    case candidate_error::unreducible_factor: return "shards a dim the output lacks and the op cannot reduce";
    case candidate_error::invalid_layout: return "its placements are not a valid layout";
    case candidate_error::new_partial: return "turns an input into a Partial it does not hold";
  }
  return "?";
}

/// One strategy: per mesh dim a choice, and the layouts it implies.
struct candidate {
  svec<std::int8_t, max_mesh_dims> choice{};  // -1 replicate, 0..F-1 factor, F.. partial rule
  svec<layout_spec, max_op_inputs> in{};
  layout_spec out{};
  candidate_error error = candidate_error::none;
  bool exact = false;   // every input already holds its layout
  double cost_us = 0;   // redistributing the inputs (and the output, when forced)
  constexpr bool valid() const { return error == candidate_error::none; }
};

namespace propagate_detail {

/// Placements with size-1 mesh dims as replicate (they hold the same blocks either way).
constexpr placement_vec unit_dims_replicated(const layout_spec& s) {
  placement_vec p = s.placements;
  for (int m = 0; m < p.size(); ++m)
    if (s.mesh[m] == 1) p[m] = make_replicate();
  return p;
}

constexpr bool same_op_blocks(const layout_spec& a, const layout_spec& b) {
  return a.mesh == b.mesh && a.tensor_rank == b.tensor_rank &&
         unit_dims_replicated(a) == unit_dims_replicated(b);
}

/// The planner's cost of moving a tensor of `bytes` from `from` to `to`. The layouts are taken
/// by value so that g++ remembers each answer for the whole translation unit: it memoises a
/// constant call whose arguments are constants, and a reference to a resolution's own
/// candidate is not one. Different resolutions ask for the same transitions again and again
/// (256 resolutions of `add` on a 2×2 mesh plan 1,218 transitions, 131 of them distinct), so
/// this cut that benchmark from 34 to 10 s of g++ (bench/RESULTS.md). clang memoises nothing;
/// plan_cache below still saves it the repeats within one resolution.
constexpr double plan_cost(layout_spec from, layout_spec to, double bytes) {
  if (same_op_blocks(from, to)) return 0;
  return make_plan(from, to, bytes).value.cost_us;
}

/// A lower bound on plan_cost (the planner's A* bound: one collective when a local move
/// cannot reach the target).
constexpr double transition_bound(const layout_spec& from, const layout_spec& to) {
  if (same_op_blocks(from, to)) return 0;
  return plan_detail::collective_bound(plan_detail::without_unit_dims(plan_detail::pack(from), from),
                                       plan_detail::without_unit_dims(plan_detail::pack(to), to), from.mesh,
                                       cost_model{});
}

/// plan_cost, remembered (one cache per input, whose tensor size is fixed).
struct plan_cache {
  struct item {
    layout_spec from, to;
    double cost;
  };
  std::vector<item> items;
  constexpr double cost(const layout_spec& from, const layout_spec& to, double bytes) {
    for (const item& it : items)
      if (it.to == to && it.from == from) return it.cost;
    const double c = plan_cost(from, to, bytes);
    items.push_back({from, to, c});
    return c;
  }
};

/// Every tensor that has factor f splits it evenly at every level of `spec`.
constexpr bool even_everywhere(const op_rule& rule, const op_context& c, const candidate& k, int f) {
  auto even = [&](const factor_dims& dims, const shape_vec& shape, const layout_spec& s) {
    const int d = op_rule::dim_of(dims, f);
    if (d < 0) return true;
    if (shape[d] == dyn) return false;
    const index_t g = rule.factors[f].granule;  // pieces in whole granules: split extent / g
    if (shape[d] % g != 0) return false;
    return uniform_extent(s, shape[d] / g, d);
  };
  for (int i = 0; i < rule.inputs(); ++i)
    if (!even(rule.in[i], c.in_shape[i], k.in[i])) return false;
  return even(rule.out, c.out_shape, k.out);
}

}  // namespace propagate_detail

/// Choices per mesh dim: replicate, each factor, each partial rule.
constexpr int choices_per_dim(const op_rule& rule) {
  return 1 + rule.factors.size() + rule.partials.size();
}
/// Candidates in all: choices_per_dim ^ mesh dims.
constexpr index_t candidate_count(const op_rule& rule, const op_context& c) {
  index_t n = 1;
  for (int m = 0; m < c.mesh.size(); ++m) n *= choices_per_dim(rule);
  return n;
}

namespace propagate_detail {

/// Input i's placement (before make_spec) under choice `ch` on a mesh dim, the placement make_candidate
/// gives it there.
constexpr placement choice_input(const op_rule& rule, int i, int ch) {
  const int nf = rule.factors.size();
  if (ch < 0) return make_replicate();
  if (ch < nf) {
    const int d = op_rule::dim_of(rule.in[i], ch);
    return d >= 0 ? make_shard(d) : make_replicate();
  }
  placement p = rule.partials[ch - nf].in[i];
  if (p.is_shard() && p.dim < 0) p.dim += rule.in[i].size();  // as make_spec does
  return p;
}

}  // namespace propagate_detail

/// Candidate number `index` (mesh dim 0 varies slowest), its layouts and validity; the cost
/// is left at 0 (cost_candidate fills it).
constexpr candidate make_candidate(const op_rule& rule, const op_context& c, index_t index) {
  using namespace propagate_detail;
  candidate k{};
  const int per = choices_per_dim(rule), dims = c.mesh.size(), nf = rule.factors.size();
  for (int m = dims - 1; m >= 0; --m) {
    k.choice.n = dims;
    k.choice[m] = static_cast<std::int8_t>(index % per - 1);
    index /= per;
  }
  svec<placement_vec, max_op_inputs> in{};
  for (int i = 0; i < rule.inputs(); ++i) in.push_back(placement_vec{});
  placement_vec out{};
  for (int m = 0; m < dims; ++m) {
    const int ch = k.choice[m];
    for (int i = 0; i < rule.inputs(); ++i) in[i].push_back(choice_input(rule, i, ch));
    if (ch < 0) {  // replicate
      out.push_back(make_replicate());
    } else if (ch < nf) {  // shard factor ch
      const factor_info& f = rule.factors[ch];
      if (f.fixed) k.error = candidate_error::fixed_factor;
      const int d = op_rule::dim_of(rule.out, ch);
      if (d >= 0) {
        out.push_back(make_shard(d));
      } else {
        if (!f.reducible) k.error = candidate_error::unreducible_factor;
        out.push_back(make_partial(f.reduce));
      }
    } else {  // partial rule
      out.push_back(rule.partials[ch - nf].out);
    }
  }
  for (int i = 0; i < rule.inputs(); ++i) {
    const spec_result s = make_spec(c.mesh, in[i], rule.in[i].size());
    if (!s.ok() && k.error == candidate_error::none) k.error = candidate_error::invalid_layout;
    k.in.push_back(s.spec);
  }
  const spec_result so = make_spec(c.mesh, out, rule.out.size());
  if (!so.ok() && k.error == candidate_error::none) k.error = candidate_error::invalid_layout;
  k.out = so.spec;
  if (k.error == candidate_error::none)
    for (int m = 0; m < dims; ++m)
      if (k.choice[m] >= 0 && k.choice[m] < nf && rule.factors[k.choice[m]].even_only &&
          !even_everywhere(rule, c, k, k.choice[m])) {
        k.error = candidate_error::uneven_factor;
        break;
      }
  // Never make an input Partial (DTensor gives that an infinite cost): the fill is local
  // and looks free, but it leaves a reduction for later that no cost here accounts for.
  if (k.valid())
    for (int i = 0; i < rule.inputs() && k.valid(); ++i)
      for (int m = 0; m < dims; ++m) {
        const placement& want = k.in[i].placements[m];
        if (want.is_partial() && c.mesh[m] > 1 && !(c.in[i].placements[m] == want)) {
          k.error = candidate_error::new_partial;
          break;
        }
      }
  if (k.valid()) {
    k.exact = true;
    for (int i = 0; i < rule.inputs(); ++i) k.exact = k.exact && same_op_blocks(c.in[i], k.in[i]);
  }
  return k;
}

/// The candidate's cost: its inputs' redistributions (and its output's to `forced`, if any).
constexpr double cost_candidate(const candidate& k, const op_context& c, const layout_spec* forced) {
  using namespace propagate_detail;
  double cost = 0;
  for (int i = 0; i < k.in.size(); ++i) cost += plan_cost(c.in[i], k.in[i], c.in_bytes[i]);
  if (forced != nullptr) cost += plan_cost(k.out, *forced, c.out_bytes);
  return cost;
}

/// The most choices one mesh dim has (choices_per_dim).
inline constexpr int max_choices_per_dim = 1 + max_factors + max_partial_rules;

namespace propagate_detail {

/// Whether choice `ch` on mesh dim m makes every candidate with it invalid, whatever the
/// other dims choose: a fixed factor, an unreducible factor the output lacks, or an input
/// made Partial that does not hold it (make_candidate's checks that look at one dim).
constexpr bool choice_invalid(const op_rule& rule, const op_context& c, int m, int ch) {
  const int nf = rule.factors.size();
  if (ch >= 0 && ch < nf) {
    const factor_info& f = rule.factors[ch];
    if (f.fixed || (op_rule::dim_of(rule.out, ch) < 0 && !f.reducible)) return true;
  }
  if (c.mesh[m] > 1)
    for (int i = 0; i < rule.inputs(); ++i) {
      const placement want = choice_input(rule, i, ch);
      if (want.is_partial() && !(c.in[i].placements[m] == want)) return true;
    }
  return false;
}

/// Whether choice `ch` on mesh dim m gives every input the kind of placement it holds there
/// (shard of the same dim, the same partial op, or replicate), which an exact candidate
/// needs; on a dim of size 1 every choice may.
constexpr bool choice_may_keep(const op_rule& rule, const op_context& c, int m, int ch) {
  if (c.mesh[m] == 1) return true;
  for (int i = 0; i < rule.inputs(); ++i) {
    const placement want = choice_input(rule, i, ch), &has = c.in[i].placements[m];
    if (has.kind != want.kind || (want.is_shard() && has.dim != want.dim) ||
        (want.is_partial() && has.op != want.op))
      return false;
  }
  return true;
}

/// Per mesh dim, the choices a search looks at, in enumeration order.
using choice_lists = svec<svec<std::int8_t, max_choices_per_dim>, max_mesh_dims>;

/// The choices that are not invalid on their own dim (and, when `exact_only`, that may keep
/// every input where it is).
constexpr choice_lists live_choices(const op_rule& rule, const op_context& c, bool exact_only) {
  choice_lists out{};
  for (int m = 0; m < c.mesh.size(); ++m) {
    out.push_back({});
    for (int ch = -1; ch < choices_per_dim(rule) - 1; ++ch)
      if (!choice_invalid(rule, c, m, ch) && (!exact_only || choice_may_keep(rule, c, m, ch)))
        out[m].push_back(static_cast<std::int8_t>(ch));
  }
  return out;
}

/// Calls f(index) for every candidate whose choice on each dim is in `lists`, in
/// enumeration order (mesh dim 0 slowest), until f returns true; returns whether it did.
template <class F>
constexpr bool for_each_choice(const op_rule& rule, const choice_lists& lists, F&& f) {
  const int dims = lists.size(), per = choices_per_dim(rule);
  svec<int, max_mesh_dims> at{};
  for (int m = 0; m < dims; ++m) {
    if (lists[m].size() == 0) return false;
    at.push_back(0);
  }
  for (;;) {
    index_t i = 0;
    for (int m = 0; m < dims; ++m) i = i * per + (lists[m][at[m]] + 1);
    if (f(i)) return true;
    int m = dims - 1;
    while (m >= 0 && ++at[m] == lists[m].size()) at[m--] = 0;
    if (m < 0) return false;
  }
}

}  // namespace propagate_detail

enum class resolve_error : std::uint8_t {
  none,
  bad_rule,          // the rule's einsum text was malformed
  arity,             // the inputs do not match the rule's subscripts
  forced_invalid,    // the forced output placements are not a layout of the output
};

constexpr const char* describe(resolve_error e) {
  switch (e) {
    case resolve_error::none: return "resolved";
    case resolve_error::bad_rule: return "the operator's rule is malformed";
    case resolve_error::arity: return "the inputs do not match the operator's rule";
    case resolve_error::forced_invalid: return "the forced output placements are not a layout of the output";
  }
  return "?";
}

struct resolution {
  candidate chosen{};
  index_t index = -1;       // its number
  index_t valid = 0;        // valid candidates: 1 when step 1 chose, else all of them
  bool costed = false;      // chosen by cost (no candidate took the inputs as they are)
  bool forced = false;
  layout_spec forced_out{};  // the output's final layout when forced
  resolve_error error = resolve_error::none;
  constexpr bool ok() const { return error == resolve_error::none; }
};

/// The op's strategy for these inputs (see the top of this file), with the output forced to
/// `forced` when `is_forced`. (A flag, not a null pointer: the compile-time callers hold the
/// placements in a static member, whose address g++ -fsanitize=undefined will not compare
/// with null in a constant expression.)
constexpr resolution resolve(const op_rule& rule, const op_context& c, const placement_vec& forced,
                             bool is_forced) {
  using namespace propagate_detail;
  resolution r{};
  if (!rule.ok) return r.error = resolve_error::bad_rule, r;
  if (rule.inputs() != c.in.size()) return r.error = resolve_error::arity, r;
  for (int i = 0; i < rule.inputs(); ++i)
    if (rule.in[i].size() != c.in[i].tensor_rank || !(c.in[i].mesh == c.mesh))
      return r.error = resolve_error::arity, r;
  if (is_forced) {
    const spec_result f = make_spec(c.mesh, forced, rule.out.size());
    if (!f.ok()) return r.error = resolve_error::forced_invalid, r;
    r.forced = true;
    r.forced_out = f.spec;
  }
  const layout_spec* want = r.forced ? &r.forced_out : nullptr;
  // Candidates are built only from the choices that are not invalid on their own dim (most
  // Partial pass-throughs, fixed factors): building every candidate was most of an
  // operator's compile time, and those are invalid whatever the other dims choose.
  // 1. Inputs as they are: only choices that give each input the kind of placement it holds.
  if (for_each_choice(rule, live_choices(rule, c, true), [&](index_t i) {
        const candidate k = make_candidate(rule, c, i);
        if (!k.valid() || !k.exact || (want != nullptr && !same_op_blocks(k.out, *want))) return false;
        r.chosen = k;
        r.index = i;
        return true;
      })) {
    r.valid = 1;
    return r;
  }
  // 2. The cheapest, by branch and bound: a candidate whose lower bound (one collective's
  // latency per input that a local move cannot fix, the planner's A* bound) exceeds the best
  // exact cost so far cannot win, so only the promising ones are planned; plans are cached
  // per input and target. Candidates go in order of their bound, and ties between exact
  // costs still go to the lower candidate number.
  r.costed = true;
  struct entry {
    double bound;
    index_t index;
  };
  std::vector<entry> order;
  for_each_choice(rule, live_choices(rule, c, false), [&](index_t i) {
    const candidate k = make_candidate(rule, c, i);
    if (!k.valid()) return false;
    double bound = 0;
    for (int j = 0; j < k.in.size(); ++j) bound += transition_bound(c.in[j], k.in[j]);
    if (want != nullptr) bound += transition_bound(k.out, *want);
    order.push_back({bound, i});
    return false;
  });
  r.valid = static_cast<index_t>(order.size());
  std::sort(order.begin(), order.end(), [](const entry& a, const entry& b) {
    return a.bound < b.bound || (a.bound == b.bound && a.index < b.index);
  });
  plan_cache cache[max_op_inputs + 1];
  for (const entry& e : order) {
    if (r.index >= 0 && e.bound > r.chosen.cost_us) break;  // sorted: no later one can win
    candidate k = make_candidate(rule, c, e.index);
    k.cost_us = 0;
    for (int j = 0; j < k.in.size(); ++j)
      k.cost_us += cache[j].cost(c.in[j], k.in[j], c.in_bytes[j]);
    if (want != nullptr) k.cost_us += cache[max_op_inputs].cost(k.out, *want, c.out_bytes);
    if (r.index < 0 || k.cost_us < r.chosen.cost_us ||
        (k.cost_us == r.chosen.cost_us && e.index < r.index)) {
      r.chosen = k;
      r.index = e.index;
    }
  }
  return r;
}

/// The op's strategy with a free output.
constexpr resolution resolve(const op_rule& rule, const op_context& c) {
  return resolve(rule, c, placement_vec{}, false);
}

/// The op's strategy; `forced`, when not null, is the output placements the caller wants.
constexpr resolution resolve(const op_rule& rule, const op_context& c, const placement_vec* forced) {
  return forced != nullptr ? resolve(rule, c, *forced, true) : resolve(rule, c);
}

}  // namespace spmd::ops
