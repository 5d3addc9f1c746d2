// spmd/autoshard/search.hpp — the exact search: every operator's strategy and every
// parameter's layout at rest, minimising one training step's modelled time (cost.hpp) under a
// per-rank memory budget. docs/auto.md states the model and proves the search exact.
//
//   const autoshard::solution s = autoshard::search(g, cm);     // g: graph.hpp, cm: cost.hpp
//   s.step_s, s.compute_s, s.comm_s, s.memory_bytes, s.layouts[t]   // t: a tensor of g
//
// The step, as modelled:
//   - each operator runs one strategy of its rule (ops::make_candidate: per mesh dim, which
//     factor it shards, or a Partial it passes, or none); forward and backward compute its
//     FLOPs (3× the forward's) over the ranks that split them: replicated work counts whole;
//   - an input arriving in another layout than the strategy's is redistributed (forward), and
//     its gradient, made in the strategy's gradient layout, is redistributed back to what the
//     producer's backward needs (backward), each at the cost of the plan that runs;
//   - a parameter is held at rest in a layout the search chooses (Replicate, or Shard on any
//     dim, per mesh dim): FSDP, DDP and Megatron's splits are such choices; moving it to the
//     strategy's layout and its gradient back to the rest layout costs their plans; it holds
//     (2 + optimizer_states) × its block (the value, the gradient, the optimizer's state);
//   - every operator keeps its inputs for the backward, in the strategy's layouts;
//   - data (a batch) is read in whatever layout its reader wants, for nothing;
//   - times add up: nothing overlaps (a serial upper bound, as Meta's autoparallel models).
//
// The search is a dynamic program over the operators in order whose state is the layout of
// each live activation (made, and still to be read) and whose value at a state is the set of
// (time, memory) pairs no other pair beats in both (a Pareto set): what is left to decide
// costs the same from two paths to one state, so a dominated pair can never be part of the
// best step under any budget. `brute_force` enumerates every assignment, for checking.
// Without a budget the faster program of fastest.hpp runs instead; the pieces both read are
// in tables.hpp and deferral.hpp.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "spmd/autoshard/cost.hpp"
#include "spmd/autoshard/deferral.hpp"
#include "spmd/autoshard/fastest.hpp"
#include "spmd/autoshard/graph.hpp"
#include "spmd/autoshard/layout_ids.hpp"
#include "spmd/autoshard/solution.hpp"
#include "spmd/autoshard/tables.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/ops/propagate.hpp"

namespace spmd::autoshard {
namespace search_detail {

/// A (time, memory) pair and how it was reached.
struct label {
  double compute = 0, comm = 0, memory = 0;
  int prev_state = -1, prev_label = -1;
  int strategy = -1;                          // of this layer's operator
  svec<int, ops::max_op_inputs> rest{};       // per input: a parameter's rest layout (index), else -1
  svec<int, ops::max_op_inputs> folded{};     // per input a deferred operator makes: its strategy, else -1
  svec<std::uint32_t, ops::max_op_inputs> folded_rest{};  // and its parameters' rest choices (deferred_option::rest)
  constexpr double time() const { return compute + comm; }
};

/// A state of the dynamic program: the layout of each live activation (an index into its
/// held layouts), as the digits of one number, and its pairs.
struct state {
  std::uint64_t code = 0;
  std::vector<label> labels;
};

/// Adds `l` to `set` unless a pair there is at least as good in both; drops the pairs it beats.
/// Without a budget (`time_only`) only time matters: one pair a state, the fastest (the least
/// memory among equals). With one, the set is a staircase: time rising, memory falling, so
/// the pair that could beat `l` is the last one no slower than it, and the pairs `l` beats
/// are the run after it whose memory is no less (a search, an erase and an insert, where a
/// scan and a rebuild per pair made the gpt's budgeted search quadratic in its pairs).
/// Whether a pair of the staircase `set` is at least as good as (t, m) in both.
constexpr bool beaten_in(const std::vector<label>& set, double t, double m) {
  std::size_t lo = 0, hi = set.size();  // the first pair slower than t
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (set[mid].time() <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo > 0 && set[lo - 1].memory <= m;
}

constexpr void insert_pareto(std::vector<label>& set, const label& l, bool time_only) {
  if (time_only) {
    if (set.empty()) set.push_back(l);
    else if (l.time() < set[0].time() || (l.time() == set[0].time() && l.memory < set[0].memory)) set[0] = l;
    return;
  }
  const double t = l.time(), m = l.memory;
  std::size_t lo = 0, hi = set.size();  // the first pair slower than l
  while (lo < hi) {
    const std::size_t mid = (lo + hi) / 2;
    if (set[mid].time() <= t) lo = mid + 1;
    else hi = mid;
  }
  if (lo > 0 && set[lo - 1].memory <= m) return;  // as fast or faster, and no more memory
  std::size_t first = lo;  // the pairs as fast as l, before lo, hold more memory: beaten
  while (first > 0 && set[first - 1].time() == t) --first;
  std::size_t last = lo;
  while (last < set.size() && set[last].memory >= m) ++last;  // slower and no less memory: beaten
  const auto at = set.begin() + static_cast<std::ptrdiff_t>(first);
  if (first < last) {
    set[first] = l;
    set.erase(at + 1, set.begin() + static_cast<std::ptrdiff_t>(last));
  } else {
    set.insert(at, l);
  }
}

/// A layer's states, found by code.
struct layer {
  std::vector<state> states;
  slot_table index;

  static constexpr std::uint64_t hash(std::uint64_t code) { return code * 40503u; }
  /// The index of the state of `code`, made (with no pairs) the first time.
  constexpr std::size_t at(std::uint64_t code) {
    const auto same = [&](int e) { return states[static_cast<std::size_t>(e)].code == code; };
    std::size_t i = index.find(hash(code), same);
    if (index.slots[i] >= 0) return static_cast<std::size_t>(index.slots[i]);
    index.reserve_one([&](int e) { return hash(states[static_cast<std::size_t>(e)].code); });
    i = index.find(hash(code), same);
    states.push_back({code, {}});
    index.slots[i] = static_cast<int>(states.size()) - 1;
    ++index.count;
    return states.size() - 1;
  }
};

/// The dynamic program: the fastest pair at the end (least_memory: the smallest). Without a
/// budget the arrays of fastest.hpp run, unless `hashed` (the program a layer too wide to
/// index takes; the tests compare the two). `defer`: operators are chosen with their only
/// reader (deferral.hpp); the tests turn it off to check that it changes no answer.
constexpr solution run(const graph& g, const cost_model& cm, const pins& p, bool least_memory, bool hashed = false,
                       bool defer = true) {
  solution sol{};
  prepared pr = prepare(g, cm, p);
  if (pr.error != search_error::none) return sol.error = pr.error, sol.bad_op = pr.bad_op, sol;
  move_costs cache;
  const tables tb = make_tables(g, pr, cm, cache);
  sol.plans = cache.planned();
  // Without a budget a state needs only its fastest pair (least_memory asks for the smallest)
  const bool time_only = !least_memory && !(cm.memory_budget < std::numeric_limits<double>::infinity());
  if (time_only && !hashed && defer && fastest(sol, g, pr, tb)) {
    if (sol.ok()) sol.collectives = count_collectives(sol, g, pr, cache, cm);
    return sol;
  }
  const std::size_t nt = g.tensors.size(), no = g.ops.size();
  std::vector<layer> layers(no + 1);
  layers[0].states.push_back({0, {label{}}});
  digits before = digits_of({}, tb);
  bool pruned = false;
  const deferral d = plan_deferral(g, pr, defer);
  const std::vector<std::vector<int>> live = states_after(g, d);
  for (std::size_t j = 0; j < no; ++j) {
    const op_node& op = g.ops[j];
    const digits after = digits_of(live[j], tb);
    if (!after.fits) return sol.error = search_error::too_many_states, sol.bad_op = static_cast<int>(j), sol;
    std::vector<state>& from = layers[j].states;
    layer& next = layers[j + 1];
    if (d.reader[j] >= 0) {  // chosen with its reader: the states pass through (the same tensors)
      for (std::size_t si = 0; si < from.size(); ++si) {
        std::uint64_t code = 0;
        for (std::size_t q = 0; q < after.live.size(); ++q)
          code += after.stride[q] * static_cast<std::uint64_t>(before.at(from[si].code, before.slot_of(after.live[q])));
        const std::size_t ns = next.at(code);
        for (std::size_t li = 0; li < from[si].labels.size(); ++li) {
          label l = from[si].labels[li];
          l.prev_state = static_cast<int>(si), l.prev_label = static_cast<int>(li), l.strategy = -1, l.rest = {};
          l.folded = {}, l.folded_rest = {};
          insert_pareto(next.states[ns].labels, l, time_only);
        }
      }
      sol.states += static_cast<long>(next.states.size());
      before = after;
      continue;
    }
    // where each input and each live tensor sits in the state's code; inputs a deferred
    // operator makes: that operator
    svec<int, ops::max_op_inputs> slot{}, folded_op{};
    deferred_memo memo[ops::max_op_inputs]{};
    for (int i = 0; i < op.in.size(); ++i) {
      const tensor_node& tn = g.tensors[static_cast<std::size_t>(op.in[i])];
      const bool deferred = tn.kind == tensor_kind::activation && d.reader[static_cast<std::size_t>(tn.producer)] >= 0;
      slot.push_back(deferred ? -1 : before.slot_of(op.in[i]));
      folded_op.push_back(deferred ? tn.producer : -1);
      if (deferred) memo[i] = deferred_memo::of(g, static_cast<std::size_t>(tn.producer), before), memo[i].pareto = !time_only;
    }
    std::uint64_t out_stride = 0;  // the place value of this op's output in the next code
    std::vector<std::uint64_t> carried_stride;  // per slot before: its place value after, or 0
    carried_stride.assign(before.live.size(), 0);
    for (std::size_t q = 0; q < after.live.size(); ++q) {
      if (after.live[q] == op.out) out_stride = after.stride[q];
      else carried_stride[static_cast<std::size_t>(before.slot_of(after.live[q]))] = after.stride[q];
    }
    // each strategy's fixed part: the rows its activation inputs read, the rest layouts its
    // parameters take (time only: the fastest; else every combination of their Pareto sets)
    struct recipe {
      svec<const std::vector<double>*, ops::max_op_inputs> row{};  // per input: made by a state's tensor, else null
      svec<int, ops::max_op_inputs> param{};            // parameter inputs
      svec<const std::vector<rest_choice>*, ops::max_op_inputs> rests{};  // per parameter input
      std::size_t combos = 1;
      bool fits = true;
    };
    std::vector<recipe> recipes(pr.strategies(j).size());
    for (std::size_t x = 0; x < recipes.size(); ++x) {
      recipe& r = recipes[x];
      for (int i = 0; i < op.in.size(); ++i) {
        const int row = tb.row_of[j][x][i];
        r.row.push_back(row >= 0 && folded_op[i] < 0 ? &tb.row(op.in[i], row) : nullptr);
        const int choice = tb.choices_of[j][x][i];
        if (choice < 0) continue;
        const std::vector<rest_choice>& list = tb.choices[static_cast<std::size_t>(choice)];
        if (list.empty()) r.fits = false;
        r.param.push_back(i);
        r.rests.push_back(&list);
        if (!time_only) r.combos *= list.size();
      }
    }
    for (std::size_t si = 0; si < from.size(); ++si) {
      const state& st = from[si];
      if (st.labels.empty()) continue;
      svec<const deferred_best*, ops::max_op_inputs> best{};  // per input a deferred operator makes
      svec<std::size_t, ops::max_op_inputs> h{};              // per input a state's tensor holds: its layout
      for (int i = 0; i < op.in.size(); ++i) {
        best.push_back(folded_op[i] < 0 ? nullptr
                                        : &memo[i].get(g, pr, tb, static_cast<std::size_t>(folded_op[i]), before, st.code));
        h.push_back(slot[i] >= 0 ? static_cast<std::size_t>(before.at(st.code, slot[i])) : 0);
      }
      std::uint64_t kept = 0;  // the next code's digits of the tensors carried on
      for (std::size_t q = 0; q < before.live.size(); ++q)
        if (carried_stride[q] != 0) kept += carried_stride[q] * static_cast<std::uint64_t>(before.at(st.code, static_cast<int>(q)));
      for (std::size_t x = 0; x < pr.strategies(j).size(); ++x) {
        const strategy& s = pr.strategies(j)[x];
        const recipe& r = recipes[x];
        if (!r.fits) continue;
        // the step's time and memory up to this operator, summed as the pairs are; with a
        // budget, a deferred input's options are combined below, like the rest layouts
        double compute = s.compute_s, comm = 0, memory = s.saved_bytes;
        bool fits = true;
        svec<const std::vector<deferred_option>*, ops::max_op_inputs> options{};  // per input (budget)
        std::size_t combos = r.combos;
        for (int i = 0; i < op.in.size() && fits; ++i) {
          options.push_back(nullptr);
          if (best[i] != nullptr && !time_only) {
            const std::vector<deferred_option>& o = best[i]->front[static_cast<std::size_t>(tb.row_of[j][x][i])];
            if (o.empty()) fits = false;
            options[i] = &o;
            combos *= o.size();
          } else if (best[i] != nullptr) {
            const std::size_t c = static_cast<std::size_t>(tb.row_of[j][x][i]);
            if (best[i]->strategy[c] < 0) fits = false;
            const deferred_cost& b = best[i]->cost[c];
            compute += b.compute, comm += b.comm, memory += b.memory;
          } else if (r.row[i] != nullptr) {
            const double e = (*r.row[i])[h[i]];
            if (!(e < unreachable)) fits = false;
            comm += e;
          }
        }
        if (!fits) continue;
        std::vector<label>& pairs = next.states[next.at(kept + out_stride * static_cast<std::uint64_t>(tb.out_index[j][x]))].labels;
        for (std::size_t li = 0; li < st.labels.size(); ++li)
          for (std::size_t combo = 0; combo < combos; ++combo) {
            const label& prev = st.labels[li];
            double l_compute = compute + prev.compute, l_comm = comm + prev.comm, l_memory = memory + prev.memory;
            svec<int, ops::max_op_inputs> rest{};
            std::size_t left = combo;
            for (int q = 0; q < r.param.size(); ++q) {
              const std::vector<rest_choice>& list = *r.rests[q];
              const rest_choice& rc = time_only ? fastest_rest(list) : list[left % list.size()];
              left /= list.size();
              l_comm += rc.comm;
              l_memory += rc.memory;
              rest.push_back(rc.rest);
            }
            svec<const deferred_option*, ops::max_op_inputs> chosen{};
            for (int i = 0; i < options.size(); ++i) {
              chosen.push_back(nullptr);
              if (options[i] == nullptr) continue;
              const deferred_option& o = (*options[i])[left % options[i]->size()];
              left /= options[i]->size();
              l_compute += o.compute, l_comm += o.comm, l_memory += o.memory;
              chosen[i] = &o;
            }
            if (!(l_memory <= cm.memory_budget)) {
              pruned = true;
              continue;
            }
            const double l_time = l_compute + l_comm;
            if (time_only && !pairs.empty() &&
                !(l_time < pairs[0].time() || (l_time == pairs[0].time() && l_memory < pairs[0].memory)))
              continue;  // not better than the state's pair: never made
            if (!time_only && beaten_in(pairs, l_time, l_memory)) continue;  // beaten: never made
            label l{};
            l.compute = l_compute, l.comm = l_comm, l.memory = l_memory;
            l.prev_state = static_cast<int>(si);
            l.prev_label = static_cast<int>(li);
            l.strategy = static_cast<int>(x);
            for (int i = 0; i < op.in.size(); ++i) {
              l.rest.push_back(-1);
              l.folded.push_back(chosen[i] != nullptr  ? chosen[i]->strategy
                                 : best[i] != nullptr ? best[i]->strategy[static_cast<std::size_t>(tb.row_of[j][x][i])]
                                                      : -1);
              l.folded_rest.push_back(chosen[i] != nullptr ? chosen[i]->rest : 0);
            }
            for (int q = 0; q < r.param.size(); ++q) l.rest[r.param[q]] = rest[q];
            insert_pareto(pairs, l, time_only);
          }
      }
    }
    sol.states += static_cast<long>(next.states.size());
    before = after;
  }
  const std::vector<state>& last = layers[no].states;
  int best_state = -1, best_label = -1;
  for (std::size_t q = 0; q < last.size(); ++q)
    for (std::size_t li = 0; li < last[q].labels.size(); ++li) {
      const label& l = last[q].labels[li];
      if (best_state < 0) {
        best_state = static_cast<int>(q), best_label = static_cast<int>(li);
        continue;
      }
      const label& b = last[static_cast<std::size_t>(best_state)].labels[static_cast<std::size_t>(best_label)];
      if (least_memory ? l.memory < b.memory : l.time() < b.time())
        best_state = static_cast<int>(q), best_label = static_cast<int>(li);
    }
  if (best_state < 0) return sol.error = pruned ? search_error::over_budget : search_error::no_strategy, sol;
  const label& end = last[static_cast<std::size_t>(best_state)].labels[static_cast<std::size_t>(best_label)];
  sol.compute_s = end.compute;
  sol.comm_s = end.comm;
  sol.memory_bytes = end.memory;
  sol.layouts.resize(nt);
  sol.strategy.assign(no, -1);
  sol.reads.resize(no);
  sol.grads.resize(no);
  int si = best_state, li = best_label;
  for (std::size_t j = no; j-- > 0;) {
    const label& l = layers[j + 1].states[static_cast<std::size_t>(si)].labels[static_cast<std::size_t>(li)];
    if (l.strategy >= 0) {
      record(sol, g, pr, tb, j, static_cast<std::size_t>(l.strategy), l.rest);
      for (int i = 0; i < l.folded.size(); ++i)
        if (l.folded[i] >= 0) {
          const std::size_t fj = static_cast<std::size_t>(g.tensors[static_cast<std::size_t>(g.ops[j].in[i])].producer);
          svec<int, ops::max_op_inputs> rest{};  // the option's rest choices; none: the fastest (time only)
          for (int fi = 0; fi < g.ops[fj].in.size(); ++fi) rest.push_back(static_cast<int>((l.folded_rest[i] >> (8 * fi)) & 0xFFu) - 1);
          record(sol, g, pr, tb, fj, static_cast<std::size_t>(l.folded[i]), rest);
        }
    }
    si = l.prev_state;
    li = l.prev_label;
  }
  sol.collectives = count_collectives(sol, g, pr, cache, cm);
  return sol;
}

}  // namespace search_detail

/// The best assignment of g's strategies and rest layouts under cm (and the pins), exact.
/// over_budget: min_memory is the smallest budget some assignment meets.
constexpr solution search(const graph& g, const cost_model& cm = {}, const pins& p = {}) {
  // Under a budget, the fastest step without one first: when it fits, no step within the
  // budget is faster, so it is the answer; found in milliseconds where the Pareto sets of a 2-d
  // mesh take seconds. (Among steps as fast, the Pareto form might hold less memory.)
  if (cm.memory_budget != std::numeric_limits<double>::infinity()) {
    cost_model open = cm;
    open.memory_budget = std::numeric_limits<double>::infinity();
    solution fastest = search_detail::run(g, open, p, false);
    if (!fastest.ok() || fastest.memory_bytes <= cm.memory_budget) return fastest;
  }
  solution s = search_detail::run(g, cm, p, false);
  if (s.error == search_error::over_budget) {
    cost_model open = cm;
    open.memory_budget = std::numeric_limits<double>::infinity();
    s.min_memory = search_detail::run(g, open, p, true).memory_bytes;
  }
  return s;
}

namespace search_detail {

struct enumeration {
  const graph& g;
  const cost_model& cm;
  prepared& pr;
  move_costs cache{};
  std::vector<int> held{};  // per activation: the id of the layout its operator made
  double best = std::numeric_limits<double>::infinity();
  long assignments = 0;

  constexpr void from(std::size_t j, double time, double memory) {
    if (j == g.ops.size()) {
      ++assignments;
      if (memory <= cm.memory_budget && time < best) best = time;
      return;
    }
    const op_node& op = g.ops[j];
    for (const strategy& s : pr.strategies(j)) {
      double t = time + s.compute_s, mem = memory + s.saved_bytes;
      bool fits = true;
      svec<int, ops::max_op_inputs> params{};
      for (int i = 0; i < op.in.size(); ++i) {
        const int x = op.in[i];
        const tensor_node& tn = g.tensors[static_cast<std::size_t>(x)];
        if (tn.kind == tensor_kind::activation) {
          const int h = held[static_cast<std::size_t>(x)];
          if (!partial_fits(s.k.in[i], &pr.ids[h])) fits = false;
          else t += cache.get(pr.ids, h, s.in_id[i], tn.bytes(), cm).seconds +
                    cache.get(pr.ids, s.grad_id[i], pr.ids.as_replicate(h), tn.bytes(), cm).seconds;
        } else if (tn.kind == tensor_kind::param) {
          params.push_back(i);
        }
      }
      if (!fits) continue;
      held[static_cast<std::size_t>(op.out)] = s.out_id;
      with_params(j, s, params, 0, t, mem);
    }
  }
  /// Every rest layout of the strategy's parameter inputs (all of them, not a Pareto set).
  constexpr void with_params(std::size_t j, const strategy& s, const svec<int, ops::max_op_inputs>& params, int q,
                             double time, double memory) {
    if (q == params.size()) return from(j + 1, time, memory);
    const int i = params[q], x = g.ops[j].in[i];
    const double bytes = g.tensors[static_cast<std::size_t>(x)].bytes();
    for (const int r : pr.rests[static_cast<std::size_t>(x)])
      with_params(j, s, params, q + 1,
                  time + cache.get(pr.ids, r, s.in_id[i], bytes, cm).seconds + cache.get(pr.ids, s.grad_id[i], r, bytes, cm).seconds,
                  memory + (2 + cm.optimizer_states) * bytes * block_fraction(pr.ids[r]));
  }
};

}  // namespace search_detail

/// The least step time of every assignment, enumerated one by one (for checking search on
/// small graphs: the count grows as the product of the strategies and rest layouts).
struct enumerated {
  double step_s = 0;
  long assignments = 0;
};
constexpr enumerated brute_force(const graph& g, const cost_model& cm = {}, const pins& p = {}) {
  search_detail::prepared pr = search_detail::prepare(g, cm, p);
  search_detail::enumeration e{g, cm, pr};
  e.held.assign(g.tensors.size(), -1);
  if (pr.error == search_error::none) e.from(0, 0, 0);
  return {e.best, e.assignments};
}

}  // namespace spmd::autoshard
