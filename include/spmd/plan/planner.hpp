// spmd/plan/planner.hpp — the cheapest redistribute plan, by exact search over states.
//
//   constexpr plan_result r = make_plan(src_spec, dst_spec, global_bytes);
//
// States are layouts (placements + shard order) over the source's mesh and tensor rank.
// Edges are the steps of step.hpp on one mesh dim, or one collective over several mesh
// dims at once (their combined group), so consecutive same-kind collectives need no
// user-declared flattened mesh. A* over (cost, collectives, steps), with a consistent lower
// bound, finds the best path; the same constexpr function runs in the compiler and in
// spmd-plan.
//
// Moves from a state A, for a mesh dim m of size > 1:
//   S(a) -> R | S(b) | P(op)   all_gather | all_to_all | fill     (m must split `a` last)
//   R    -> S(b) | P(op)       chunk | partition                  (S(b) splits `b` last)
//   P(op)-> R | S(b)           all_reduce | reduce_scatter
// Any tensor dim may be sharded on the way; partial ops are those the ends hold (sum if
// none). P(a) -> P(b) goes through a state without partials. Mesh dims of size 1 are
// planned as R in every state, the plan's ends included (their placements change no block).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/cost_model.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/state.hpp"
#include "spmd/plan/step.hpp"

namespace spmd {

enum class plan_error : unsigned char {
  none,
  different_mesh,        // source and target are on different meshes
  different_rank,        // source and target tensors differ in rank
  invalid_layout,        // a spec did not come from make_spec
  search_too_large,      // more states than max_plan_states
  too_many_steps,        // the best plan is longer than max_plan_steps
  over_budget,           // more moves examined than the caller's budget (compile time)
};

constexpr const char* describe(plan_error e) {
  switch (e) {
    case plan_error::none: return "no error";
    case plan_error::different_mesh: return "the source and target layouts are on different meshes";
    case plan_error::different_rank: return "the source and target tensors have different ranks";
    case plan_error::invalid_layout: return "a layout is invalid";
    case plan_error::search_too_large: return "the plan search visits too many states";
    case plan_error::too_many_steps: return "the best plan has more steps than a plan can hold";
    case plan_error::over_budget: return "the plan search examines more moves than its budget";
  }
  return "unknown error";
}

/// States the search may create before it gives up (2^15: meshes up to 4-5 dims).
inline constexpr int max_plan_states = 1 << 15;

/// No limit on the moves a search examines (the run-time default; max_plan_states holds).
inline constexpr long unlimited_plan_work = -1;

struct plan_result {
  plan value{};
  plan_error error = plan_error::none;
  int states = 0;  // states the search created (for diagnostics and benchmarks)
  long work = 0;   // moves examined: what a compile-time evaluation's cost grows with
  constexpr bool ok() const { return error == plan_error::none; }
};

namespace plan_detail {

struct node {
  state key;
  double cost;  // of the best path found so far
  double bound;  // lower bound on what is left to the goal
  int collectives, steps;
  int parent;
  step_kind kind;
  dim_mask mesh_dims;
  reduce_op op;
  bool done;
};

struct queued {
  double cost;
  int collectives, steps, index;
};

/// a is worse than b (for a max-heap that pops the cheapest): cost, then collectives,
/// then steps; costs within a relative 1e-9 count as equal.
constexpr bool worse(const queued& a, const queued& b) {
  const double eps = 1e-9 * (1 + (a.cost > b.cost ? a.cost : b.cost));
  if (a.cost > b.cost + eps) return true;
  if (b.cost > a.cost + eps) return false;
  if (a.collectives != b.collectives) return a.collectives > b.collectives;
  return a.steps > b.steps;
}

// The open list as a binary max-heap under `worse`, written out rather than std::push_heap
// and std::pop_heap: in the compiler's evaluator each iterator operation of the library's
// heap is a call, and they were a third of a plan's cost. These are the same algorithms as
// libstdc++'s (the hole moved to a leaf, then sifted up), so equal entries pop in the same
// order on every standard library.

/// Moves `value` up from `hole` towards the root.
constexpr void sift_up(std::vector<queued>& heap, long hole, queued value) {
  queued* const h = heap.data();
  for (long parent = (hole - 1) / 2; hole > 0 && worse(h[parent], value); parent = (hole - 1) / 2) {
    h[hole] = h[parent];
    hole = parent;
  }
  h[hole] = value;
}

/// Adds `value`.
constexpr void heap_push(std::vector<queued>& h, queued value) {
  h.push_back(value);
  sift_up(h, static_cast<long>(h.size()) - 1, value);
}

/// Removes and returns the first entry (the cheapest).
constexpr queued heap_pop(std::vector<queued>& heap) {
  const queued top = heap[0];
  const queued value = heap.back();
  heap.pop_back();
  const long len = static_cast<long>(heap.size());
  if (len == 0) return top;
  queued* const h = heap.data();
  long hole = 0, child = 0;
  while (child < (len - 1) / 2) {
    child = 2 * (child + 1);
    if (worse(h[child], h[child - 1])) --child;
    h[hole] = h[child];
    hole = child;
  }
  if ((len & 1) == 0 && child == (len - 2) / 2) {
    child = 2 * (child + 1);
    h[hole] = h[child - 1];
    hole = child - 1;
  }
  sift_up(heap, hole, value);
  return top;
}

/// A lower bound on the cost from `s` to `goal` (A*'s heuristic): one collective when no
/// local move can reach the goal — some mesh dim holds a partial the goal lacks, or a
/// shard the goal wants as R or as another shard (local moves leave P only by a
/// collective, and S only towards P). Consistent: local moves never clear those
/// conditions, and every collective costs at least the bound.
constexpr double collective_bound(state s, state goal, const mesh_shape_vec& mesh,
                                  const cost_model& cm) {
  for (int m = 0; m < mesh.size(); ++m) {
    const unsigned c = code(s, m), t = code(goal, m);
    const bool stuck = (is_partial(c) && c != t) ||
                       (is_shard(c) && (is_replicate(t) || (is_shard(t) && what_of(t) != what_of(c))));
    if (stuck) return cm.collective_us + cm.hop_us;
  }
  return 0;
}

/// What the search may use: tensor dims to shard (bit d) and partial ops (bit op).
/// Every tensor dim may be sharded on the way (chunking early shrinks later collectives),
/// and the ops of the two ends — or sum when neither holds one (a fill then one
/// all_reduce can replace a gather and a reduction).
struct vocabulary {
  unsigned shard_dims = 0;
  unsigned ops = 0;
};

constexpr vocabulary vocabulary_of(state a, state b, int dims, int tensor_rank) {
  vocabulary v{};
  v.shard_dims = (1u << tensor_rank) - 1u;
  for (state s : {a, b})
    for (int m = 0; m < dims; ++m)
      if (is_partial(code(s, m))) v.ops |= 1u << what_of(code(s, m));
  if (v.ops == 0) v.ops = 1u << static_cast<unsigned>(reduce_op::sum);
  return v;
}

/// A state may hold one reduce op only.
constexpr bool may_hold_partial(state s, int dims, int m, int op) {
  for (int k = 0; k < dims; ++k) {
    const unsigned c = static_cast<unsigned>(s >> (8 * k)) & 0xFFu;
    if (k != m && (c >> 6) == partial_kind && static_cast<int>((c >> 3) & 7u) != op) return false;
  }
  return true;
}

constexpr int popcount(unsigned x) {
  int n = 0;
  for (; x; x &= x - 1) ++n;
  return n;
}

/// Unshard every mesh dim of `group` (each must shard); false when one cannot go because
/// a mesh dim outside the group splits its tensor dim later.
constexpr bool unshard_group(state& s, int dims, dim_mask group) {
  for (bool progress = true; progress;) {
    progress = false;
    for (int m = 0; m < dims; ++m)
      if (in_mask(group, m) && splits_last(s, dims, m)) {
        s = unshard(s, dims, m);
        progress = true;
      }
  }
  for (int m = 0; m < dims; ++m)
    if (in_mask(group, m) && is_shard(code(s, m))) return false;
  return true;
}

/// Shard the group's mesh dims as `target` does, appending to each tensor dim's order in
/// the target's relative order.
constexpr state shard_group_like(state s, int dims, dim_mask group, state target) {
  for (int pos = 0; pos < dims; ++pos)
    for (int m = 0; m < dims; ++m) {
      const unsigned t = code(target, m);
      if (in_mask(group, m) && is_shard(t) && order_of(t) == pos) s = shard_last(s, dims, m, what_of(t));
    }
  return s;
}

/// Calls f(next) for every way of sharding each mesh dim of the group (none sharding in
/// `s`) along a tensor dim of the vocabulary, appended to each order in mesh order.
template <class F>
constexpr void for_each_group_sharding(state s, int dims, int tensor_rank, dim_mask group,
                                       vocabulary v, long& work, F&& f) {
  if (tensor_rank == 0) return;  // nothing to shard
  int members[max_mesh_dims]{}, count = 0, choice[max_mesh_dims]{};
  for (int m = 0; m < dims; ++m)
    if (in_mask(group, m)) members[count++] = m;
  while (true) {
    ++work;
    state next = s;
    bool allowed = true;
    for (int i = 0; i < count; ++i) {
      allowed = allowed && (v.shard_dims >> choice[i] & 1u);
      next = shard_last(next, dims, members[i], choice[i]);
    }
    if (allowed) f(next);
    int i = 0;  // next assignment, mixed radix over tensor dims
    while (i < count && ++choice[i] == tensor_rank) choice[i++] = 0;
    if (i == count) return;
  }
}

/// Calls emit(kind, mesh_dims, op, next) for every move out of state `a`. `work` counts
/// what the enumeration examined (moves emitted or not), the measure of a search's cost.
/// The codes are read with the shifts of code(), kind_of() and what_of() written out: this
/// runs for every state a search expands, and in the compiler each small call costs.
template <class Emit>
constexpr void for_each_move(state a, const mesh_shape_vec& mesh, int tensor_rank, state target,
                             vocabulary v, long& work, Emit&& emit) {
  const int dims = mesh.size();
  dim_mask active = 0;
  for (int m = 0; m < dims; ++m)
    if (mesh.elems[m] > 1) active |= 1u << m;

  for (int m = 0; m < dims; ++m) {
    if (!((active >> m) & 1u)) continue;
    const unsigned c = static_cast<unsigned>(a >> (8 * m)) & 0xFFu;  // code(a, m)
    const dim_mask g = 1u << m;
    if ((c >> 6) == shard_kind) {
      if (!splits_last(a, dims, m)) continue;
      const state r = unshard(a, dims, m);
      emit(step_kind::all_gather, g, reduce_op::sum, r);
      const int from_dim = static_cast<int>((c >> 3) & 7u);
      for (int b = 0; b < tensor_rank; ++b)
        if ((v.shard_dims >> b & 1u) && b != from_dim)
          emit(step_kind::all_to_all, g, reduce_op::sum, shard_last(r, dims, m, b));
      for (int o = 0; o < 5; ++o)
        if ((v.ops >> o & 1u) && may_hold_partial(a, dims, m, o))
          emit(step_kind::fill, g, static_cast<reduce_op>(o),
               unshard(a, dims, m, partial_code(static_cast<reduce_op>(o))));
    } else if ((c >> 6) == replicate_kind) {
      for (int b = 0; b < tensor_rank; ++b)
        if (v.shard_dims >> b & 1u) emit(step_kind::chunk, g, reduce_op::sum, shard_last(a, dims, m, b));
      for (int o = 0; o < 5; ++o)
        if ((v.ops >> o & 1u) && may_hold_partial(a, dims, m, o))
          emit(step_kind::partition, g, static_cast<reduce_op>(o),
               with_code(a, m, partial_code(static_cast<reduce_op>(o))));
    } else {
      const auto op = static_cast<reduce_op>((c >> 3) & 7u);
      const state r = with_code(a, m, replicate_code());
      emit(step_kind::all_reduce, g, op, r);
      for (int b = 0; b < tensor_rank; ++b)
        if (v.shard_dims >> b & 1u) emit(step_kind::reduce_scatter, g, op, shard_last(r, dims, m, b));
    }
  }

  // One collective over several mesh dims: their combined group. Targets are R or the
  // final placements: the moves that fuse a run of same-kind collectives.
  for (dim_mask g = 1; g < (1u << dims); ++g) {
    ++work;
    if ((g & ~active) != 0 || popcount(g) < 2) continue;
    bool all_shard = true, all_partial = true, targets_shard = true, moves = true;
    for (int m = 0; m < dims; ++m) {
      if (!((g >> m) & 1u)) continue;
      const unsigned c = static_cast<unsigned>(a >> (8 * m)) & 0xFFu, t = static_cast<unsigned>(target >> (8 * m)) & 0xFFu;
      const bool c_shard = (c >> 6) == shard_kind, t_shard = (t >> 6) == shard_kind;
      all_shard = all_shard && c_shard;
      all_partial = all_partial && (c >> 6) == partial_kind;
      targets_shard = targets_shard && t_shard;
      moves = moves && !(c_shard && t_shard && ((c >> 3) & 7u) == ((t >> 3) & 7u));
    }
    reduce_op op{};
    if (all_shard) {
      state r = a;
      if (!unshard_group(r, dims, g)) continue;
      emit(step_kind::all_gather, g, reduce_op::sum, r);
      if (targets_shard && moves) emit(step_kind::all_to_all, g, reduce_op::sum, shard_group_like(r, dims, g, target));
      for_each_group_sharding(r, dims, tensor_rank, g, v, work, [&](state next) {
        for (int m = 0; m < dims; ++m)  // every mesh dim of the group must move (what_of differs)
          if (((g >> m) & 1u) && ((next >> (8 * m + 3)) & 7u) == ((a >> (8 * m + 3)) & 7u)) return;
        emit(step_kind::all_to_all, g, reduce_op::sum, next);
      });
    } else if (all_partial && partial_op(a, dims, op)) {
      state r = a;
      for (int m = 0; m < dims; ++m)
        if (in_mask(g, m)) r = with_code(r, m, replicate_code());
      emit(step_kind::all_reduce, g, op, r);
      if (targets_shard) emit(step_kind::reduce_scatter, g, op, shard_group_like(r, dims, g, target));
      for_each_group_sharding(r, dims, tensor_rank, g, v, work,
                              [&](state next) { emit(step_kind::reduce_scatter, g, op, next); });
    }
  }
}

/// The most work for_each_move (with its emits) can count from state `a`: per mesh dim, a
/// gather, the all_to_alls, the fills or chunks and partitions; per group of mesh dims, its
/// loop step and, for the groups it fuses (all shard or all partial), two enumerations of
/// the group's shardings and the fused moves.
constexpr long expansion_work_bound(state a, int dims, int tensor_rank) {
  long w = static_cast<long>(dims) * (tensor_rank + 6);
  for (dim_mask g = 1; g < (1u << dims); ++g) {
    bool all_shard = true, all_partial = true;
    long assignments = 1;
    for (int m = 0; m < dims; ++m)
      if (in_mask(g, m)) {
        all_shard = all_shard && is_shard(code(a, m));
        all_partial = all_partial && is_partial(code(a, m));
        assignments *= tensor_rank > 0 ? tensor_rank : 1;
      }
    w += 1 + ((all_shard || all_partial) ? 2 + 2 * 2 * assignments : 0);
  }
  return w;
}

/// Open-addressing map from states to node indices; grows to stay at most half full.
class state_index {
  std::vector<int> slots_ = std::vector<int>(64, -1);
  std::size_t size_ = 64;  // slots_.size(), kept: a call per lookup costs in the compiler

  static constexpr std::size_t home(state key, std::size_t size) {
    return static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & (size - 1);
  }

 public:
  /// The node of `key`, or -1 after inserting `fresh` for it (`at`: nodes.data()).
  constexpr int find_or_insert(state key, const std::vector<node>& nodes, const node* at, int fresh) {
    if (static_cast<std::size_t>(fresh) * 2 >= size_) grow(nodes);
    int* const slots = slots_.data();  // through pointers: operator[] is a call in the compiler
    const std::size_t mask = size_ - 1;
    for (std::size_t i = static_cast<std::size_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & mask;; i = (i + 1) & mask) {  // home()
      if (slots[i] < 0) {
        slots[i] = fresh;
        return -1;
      }
      if (at[slots[i]].key == key) return slots[i];
    }
  }

 private:
  constexpr void grow(const std::vector<node>& nodes) {
    std::vector<int> old = slots_;
    slots_.assign(old.size() * 2, -1);
    size_ = slots_.size();
    for (int n : old)
      if (n >= 0)
        for (std::size_t i = home(nodes[static_cast<std::size_t>(n)].key, slots_.size());;
             i = (i + 1) & (slots_.size() - 1))
          if (slots_[i] < 0) {
            slots_[i] = n;
            break;
          }
  }
};

}  // namespace plan_detail

namespace plan_detail {

/// A plan step as the search finds it: packed states, no layouts (a plan of 24 steps of two
/// layouts each is thousands of values to build in the compiler; callers that only cost a
/// plan read this).
struct packed_step {
  step_kind kind = step_kind::chunk;
  dim_mask mesh_dims = 0;
  reduce_op op = reduce_op::sum;
  state from = 0, to = 0;
};

struct packed_plan {
  svec<packed_step, max_plan_steps> steps{};
  double cost_us = 0;
  plan_error error = plan_error::none;
  int states = 0;
  long work = 0;
};

/// The search on packed ends whose tensor dims are already named canonically (and whose
/// one-rank mesh dims are R): its steps in those names. search_plan names them; a caller
/// that only costs plans (autoshard's move cache) keeps the canonical pair as its key.
constexpr packed_plan search_canonical(state start, state goal, const mesh_shape_vec& mesh, int tensor_rank,
                                       double global_bytes, const cost_model& cm, long max_work) {
  packed_plan out{};
  const int dims = mesh.size();
  const vocabulary v = vocabulary_of(start, goal, dims, tensor_rank);

  double group_sizes[1u << max_mesh_dims]{};  // ranks in the group of each dim mask
  for (dim_mask g = 0; g < (1u << dims); ++g) group_sizes[g] = static_cast<double>(group_size(mesh, g));
  // block_fraction and collective_bound on packed states, written out over arrays made once:
  // they run per move, and in the compiler's evaluator each small call they make costs
  double sizes[max_mesh_dims]{};
  unsigned goal_code[max_mesh_dims]{};
  for (int m = 0; m < dims; ++m) sizes[m] = static_cast<double>(mesh[m]), goal_code[m] = code(goal, m);
  constexpr unsigned shard_kind = static_cast<unsigned>(placement_kind::shard);
  constexpr unsigned partial_kind = static_cast<unsigned>(placement_kind::partial);
  constexpr unsigned replicate_kind = static_cast<unsigned>(placement_kind::replicate);
  const auto fraction = [&](state s) {  // block_fraction(s, mesh)
    double f = 1;
    for (int m = 0; m < dims; ++m)
      if ((s >> (8 * m + 6) & 3u) == shard_kind) f /= sizes[m];
    return f;
  };
  const double stuck_cost = cm.collective_us + cm.hop_us;
  const auto bound = [&](state s) {  // collective_bound(s, goal, mesh, cm)
    for (int m = 0; m < dims; ++m) {
      const unsigned c = static_cast<unsigned>(s >> (8 * m)) & 0xFFu, t = goal_code[m];
      const unsigned kc = c >> 6, kt = t >> 6;
      const bool stuck = (kc == partial_kind && c != t) ||
                         (kc == shard_kind && (kt == replicate_kind || (kt == shard_kind && ((t >> 3) & 7u) != ((c >> 3) & 7u))));
      if (stuck) return stuck_cost;
    }
    return 0.0;
  };

  std::vector<node> nodes;
  state_index index;
  std::vector<queued> heap;  // keyed by cost so far + bound (A*)
  nodes.reserve(32);          // most searches stay below (one allocation, no copies)
  heap.reserve(32);
  nodes.push_back({start, 0, collective_bound(start, goal, mesh, cm), 0, 0, -1, step_kind::chunk, 0,
                   reduce_op::sum, false});
  index.find_or_insert(start, nodes, nodes.data(), 0);
  heap.push_back({nodes[0].bound, 0, 0, 0});
  int reached = -1;
  bool overflow = false, over_budget = false;
  long work = 0;
  while (!heap.empty() && reached < 0 && !overflow && !over_budget) {
    const queued q = heap_pop(heap);
    node& n = nodes[static_cast<std::size_t>(q.index)];
    if (n.done || worse(q, {n.cost + n.bound, n.collectives, n.steps, 0})) continue;  // stale
    n.done = true;
    if (n.key == goal) {
      reached = q.index;
      break;
    }
    const state here = n.key;
    const double here_cost = n.cost, here_fraction = fraction(here);
    if (max_work >= 0 && work + expansion_work_bound(here, dims, tensor_rank) > max_work) {
      // stop before an expansion that could cross the budget, not inside it
      over_budget = true;
      break;
    }
    for_each_move(here, mesh, tensor_rank, goal, v, work, [&](step_kind kind, dim_mask g, reduce_op op, state next) {
      if (overflow) return;
      ++work;
      const int fresh = static_cast<int>(nodes.size());
      node* const at = nodes.data();
      const int i = index.find_or_insert(next, nodes, at, fresh);
      if (i >= 0 && at[i].done) return;  // settled: no better path
      const bool collective = is_collective(kind);
      const double cost = here_cost + (collective ? collective_cost_us(kind, here_fraction, group_sizes[g], global_bytes, cm)
                                                  : local_cost_us(fraction(next), global_bytes, cm));
      const int collectives = q.collectives + (collective ? 1 : 0), steps = q.steps + 1;
      if (i < 0) {
        if (fresh >= max_plan_states) return void(overflow = true);
        const double b = bound(next);
        nodes.push_back({next, cost, b, collectives, steps, q.index, kind, g, op, false});
        heap_push(heap, {cost + b, collectives, steps, fresh});
        return;
      }
      node& to = at[i];
      if (!worse({to.cost, to.collectives, to.steps, 0}, {cost, collectives, steps, 0})) return;
      to.cost = cost;
      to.collectives = collectives;
      to.steps = steps;
      to.parent = q.index;
      to.kind = kind;
      to.mesh_dims = g;
      to.op = op;
      heap_push(heap, {cost + to.bound, collectives, steps, i});
    });
  }
  out.states = static_cast<int>(nodes.size());
  out.work = work;
  if (over_budget) return out.error = plan_error::over_budget, out;
  if (overflow) return out.error = plan_error::search_too_large, out;
  // The goal is always reachable: gather or reduce everything to R, then chunk/partition.
  const node& last = nodes[static_cast<std::size_t>(reached)];
  if (last.steps > max_plan_steps) return out.error = plan_error::too_many_steps, out;
  out.cost_us = last.cost;
  out.steps.n = last.steps;
  for (int i = reached, k = last.steps - 1; k >= 0; --k) {
    const node& to = nodes[static_cast<std::size_t>(i)];
    const node& from = nodes[static_cast<std::size_t>(to.parent)];
    out.steps[k] = {to.kind, to.mesh_dims, to.op, from.key, to.key};
    i = to.parent;
  }
  return out;
}

/// make_plan's search, its steps packed. `src` and `dst` are checked by the caller.
constexpr packed_plan search_plan(const layout_spec& src, const layout_spec& dst, double global_bytes,
                                  const cost_model& cm, long max_work) {
  const int dims = src.mesh.size();
  // the search runs on the pair with its tensor dims renamed canonically (state.hpp), so the
  // plan, ties included, does not depend on the dims' names; its steps are renamed back
  const state raw_start = without_unit_dims(pack(src), src), raw_goal = without_unit_dims(pack(dst), dst);
  const dim_renaming names = canonical_renaming(raw_start, raw_goal, dims, src.tensor_rank);
  packed_plan out = search_canonical(rename_dims(raw_start, dims, names.to), rename_dims(raw_goal, dims, names.to), src.mesh,
                                     src.tensor_rank, global_bytes, cm, max_work);
  for (int k = 0; k < out.steps.size(); ++k) {
    out.steps[k].from = rename_dims(out.steps[k].from, dims, names.from);
    out.steps[k].to = rename_dims(out.steps[k].to, dims, names.from);
  }
  return out;
}

/// Whether make_plan can plan between the two (the errors it reports before searching).
constexpr plan_error plannable(const layout_spec& src, const layout_spec& dst) {
  if (!(src.mesh == dst.mesh)) return plan_error::different_mesh;
  if (src.tensor_rank != dst.tensor_rank) return plan_error::different_rank;
  if (src.placements.size() != src.mesh.size() || dst.placements.size() != dst.mesh.size())
    return plan_error::invalid_layout;
  return plan_error::none;
}

}  // namespace plan_detail

/// The cheapest plan from `src` to `dst` (both from make_spec) for a tensor of
/// `global_bytes` bytes, under `cm`. Ties go to fewer collectives, then fewer steps. With a
/// `max_work` >= 0, the search gives up (over_budget) after examining that many moves: the
/// compile-time callers stop before the compiler's own evaluation limit does.
constexpr plan_result make_plan(const layout_spec& src, const layout_spec& dst, double global_bytes,
                                const cost_model& cm = {}, long max_work = unlimited_plan_work) {
  plan_result out{};
  if (const plan_error e = plan_detail::plannable(src, dst); e != plan_error::none) return out.error = e, out;
  const plan_detail::packed_plan p = plan_detail::search_plan(src, dst, global_bytes, cm, max_work);
  out.states = p.states;
  out.work = p.work;
  if (p.error != plan_error::none) return out.error = p.error, out;
  out.value.cost_us = p.cost_us;
  out.value.steps.n = p.steps.size();
  // Every state keeps R on mesh dims of size 1, the ends included, so each step changes
  // only its own mesh dims; the caller's layouts hold the same blocks on every rank.
  for (int k = 0; k < p.steps.size(); ++k)
    out.value.steps[k] = {p.steps[k].kind, p.steps[k].mesh_dims, p.steps[k].op, plan_detail::unpack(p.steps[k].from, src),
                          plan_detail::unpack(p.steps[k].to, src)};
  return out;
}

}  // namespace spmd
