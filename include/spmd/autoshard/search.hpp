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
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "spmd/autoshard/cost.hpp"
#include "spmd/autoshard/graph.hpp"
#include "spmd/autoshard/layout_ids.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/ops/propagate.hpp"

namespace spmd::autoshard {

/// Layouts the caller fixes (a hand-written plan, `spmd-plan auto --fix`): per tensor, or
/// none. A parameter's is its layout at rest; an activation's the one its operator makes;
/// data's the one every reader reads.
struct pins {
  std::vector<layout_spec> layout{};
  std::vector<std::uint8_t> pinned{};  // not vector<bool>: clang cannot evaluate that one in constexpr
  constexpr void pin(int t, const layout_spec& l, std::size_t tensors) {
    if (layout.size() < tensors) layout.resize(tensors), pinned.resize(tensors, 0);
    layout[static_cast<std::size_t>(t)] = l;
    pinned[static_cast<std::size_t>(t)] = 1;
  }
  constexpr bool has(int t) const { return static_cast<std::size_t>(t) < pinned.size() && pinned[static_cast<std::size_t>(t)] != 0; }

  /// A parameter's layout as its readers read it (FSDP's gathered one: a program that gathers
  /// a parameter whole on dp before every use never reads it sharded there).
  std::vector<layout_spec> read_layout{};
  std::vector<std::uint8_t> read_pinned{};
  constexpr void pin_read(int t, const layout_spec& l, std::size_t tensors) {
    if (read_layout.size() < tensors) read_layout.resize(tensors), read_pinned.resize(tensors, 0);
    read_layout[static_cast<std::size_t>(t)] = l;
    read_pinned[static_cast<std::size_t>(t)] = 1;
  }
  constexpr bool has_read(int t) const {
    return static_cast<std::size_t>(t) < read_pinned.size() && read_pinned[static_cast<std::size_t>(t)] != 0;
  }
  constexpr bool read_ok(int t, const layout_spec& l) const {
    return static_cast<std::size_t>(t) >= read_pinned.size() || read_pinned[static_cast<std::size_t>(t)] == 0 ||
           same_blocks(read_layout[static_cast<std::size_t>(t)], l);
  }
};

enum class search_error : std::uint8_t {
  none,
  not_in_order,         // an operator reads a tensor made later
  shared_parameter,     // a parameter read by two operators (tied weights: not yet)
  no_strategy,          // an operator has no strategy that fits (or the pins allow none)
  over_budget,          // no assignment fits the memory budget (min_memory says what does)
  too_many_states,      // the live activations' layouts do not fit a state's 64-bit code
};

constexpr const char* describe(search_error e) {
  switch (e) {
    case search_error::none: return "found";
    case search_error::not_in_order: return "an operator reads a tensor made after it: give the operators in the order they run";
    case search_error::shared_parameter: return "a parameter is read by two operators (tied weights are not searched yet)";
    case search_error::no_strategy: return "an operator has no strategy that fits its shapes and the pinned layouts";
    case search_error::over_budget: return "no assignment fits the memory budget";
    case search_error::too_many_states: return "the activations live at once have more layouts together than a state can number (2^62)";
  }
  return "?";
}

struct solution {
  search_error error = search_error::none;
  int bad_op = -1;  // the operator an error names
  double compute_s = 0, comm_s = 0, memory_bytes = 0;
  double min_memory = 0;  // over_budget: the smallest budget an assignment meets
  collective_counts collectives{};  // forward and backward, by kind, as the plans count them
  std::vector<layout_spec> layouts{};  // per tensor (see pins)
  std::vector<int> strategy{};         // per operator: its candidate index (ops::make_candidate)
  std::vector<svec<layout_spec, ops::max_op_inputs>> reads{};  // per operator: its inputs as it reads them
  std::vector<svec<layout_spec, ops::max_op_inputs>> grads{};  // per operator: its inputs' gradients as its backward makes them
  long states = 0;                     // states the dynamic program made
  long plans = 0;                      // distinct moves it planned
  constexpr double step_s() const { return compute_s + comm_s; }
  constexpr bool ok() const { return error == search_error::none; }
};

namespace search_detail {

/// One valid strategy of an operator, with what its backward makes and needs.
struct strategy {
  ops::candidate k{};
  index_t index = 0;
  double compute_s = 0;
  svec<layout_spec, ops::max_op_inputs> grad_in{};  // each input's gradient as the backward makes it
  double saved_bytes = 0;                          // its inputs, kept for the backward (per rank)
  // the same layouts as ids (layout_ids.hpp)
  svec<int, ops::max_op_inputs> in_id{}, grad_id{};
  int out_id = -1;
};

constexpr layout_spec with_placements(const layout_spec& like, const placement_vec& p) {
  return make_spec(like.mesh, p, like.tensor_rank).spec;
}

constexpr strategy make_strategy(const graph& g, const op_node& op, const ops::candidate& k, index_t index,
                                 const cost_model& cm) {
  strategy s{};
  s.k = k;
  s.index = index;
  const int nf = op.rule.factors.size();
  double split = 1;
  for (int m = 0; m < g.mesh.size(); ++m)
    if (k.choice[m] >= 0 && k.choice[m] < nf) split *= static_cast<double>(g.mesh[m]);
  s.compute_s = 3 * op.flops / split / cm.flops_per_s;
  for (int i = 0; i < op.in.size(); ++i) {
    placement_vec p = k.in[i].placements;
    for (int m = 0; m < p.size(); ++m) {
      if (p[m].is_shard()) continue;
      if (p[m].is_partial()) {
        p[m] = make_replicate();
      } else if (k.choice[m] >= 0 && k.choice[m] < nf) {
        p[m] = make_partial(reduce_op::sum);  // the factor split here is not this input's
      } else if (k.choice[m] >= nf) {
        bool other_partial = false;
        for (int j = 0; j < op.in.size(); ++j) other_partial = other_partial || (j != i && k.in[j].placements[m].is_partial());
        if (other_partial) p[m] = make_partial(reduce_op::sum);
      }
    }
    s.grad_in.push_back(with_placements(k.in[i], p));
    s.saved_bytes += g.tensors[static_cast<std::size_t>(op.in[i])].bytes() * block_fraction(k.in[i]);
  }
  return s;
}

/// Whether a reader that wants `want` may be fed from a tensor held in `held` (a Partial the
/// reader wants must be the one held: the search never makes a Partial to feed an operator).
constexpr bool partial_fits(const layout_spec& want, const layout_spec* held) {
  for (int m = 0; m < want.placements.size(); ++m) {
    const placement& w = want.placements[m];
    if (w.is_partial() && want.mesh[m] > 1 && (held == nullptr || !(held->placements[m] == w))) return false;
  }
  return true;
}

/// A parameter's layouts at rest: per mesh dim Replicate or Shard(d), d any dim (one split
/// order); a mesh dim of one rank only Replicate.
constexpr std::vector<layout_spec> rest_layouts(const mesh_shape_vec& mesh, int rank) {
  std::vector<layout_spec> out;
  int per = rank + 1, total = 1;
  for (int m = 0; m < mesh.size(); ++m) total *= mesh[m] > 1 ? per : 1;
  for (int code = 0; code < total; ++code) {
    placement_vec p{};
    int c = code;
    for (int m = 0; m < mesh.size(); ++m) {
      if (mesh[m] == 1) {
        p.push_back(make_replicate());
        continue;
      }
      const int ch = c % per;
      c /= per;
      p.push_back(ch == 0 ? make_replicate() : make_shard(ch - 1));
    }
    const spec_result r = make_spec(mesh, p, rank);
    if (r.ok()) out.push_back(r.spec);
  }
  return out;
}

/// A (time, memory) pair and how it was reached.
struct label {
  double compute = 0, comm = 0, memory = 0;
  collective_counts collectives{};
  int prev_state = -1, prev_label = -1;
  int strategy = -1;                          // of this layer's operator
  svec<int, ops::max_op_inputs> rest{};       // per input: a parameter's rest layout (index), else -1
  svec<int, ops::max_op_inputs> folded{};     // per input a deferred operator makes: its strategy, else -1
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
/// memory among equals).
constexpr void insert_pareto(std::vector<label>& set, const label& l, bool time_only) {
  if (time_only) {
    if (set.empty()) set.push_back(l);
    else if (l.time() < set[0].time() || (l.time() == set[0].time() && l.memory < set[0].memory)) set[0] = l;
    return;
  }
  for (const label& o : set)
    if (o.time() <= l.time() && o.memory <= l.memory) return;
  std::vector<label> kept;
  for (const label& o : set)
    if (!(l.time() <= o.time() && l.memory <= o.memory)) kept.push_back(o);
  kept.push_back(l);
  set = kept;
}

/// What the search needs of a graph, precomputed: strategies per operator, readers per tensor,
/// every layout as an id.
struct prepared {
  std::vector<std::vector<strategy>> strategies;  // per operator
  std::vector<int> last_reader;                   // per tensor
  std::vector<std::vector<int>> rests;            // per tensor (parameters): layout ids
  layout_ids ids;
  search_error error = search_error::none;
  int bad_op = -1;
};

constexpr bool pinned_ok(const pins& p, int t, const layout_spec& l) { return !p.has(t) || same_blocks(p.layout[static_cast<std::size_t>(t)], l); }

/// Whether two rules are the same (every factor, dim and Partial rule).
constexpr bool same_rule(const ops::op_rule& a, const ops::op_rule& b) {
  if (a.ok != b.ok || !(a.in == b.in) || !(a.out == b.out) || a.factors.size() != b.factors.size() ||
      a.partials.size() != b.partials.size())
    return false;
  for (int f = 0; f < a.factors.size(); ++f) {
    const ops::factor_info& x = a.factors[f];
    const ops::factor_info& y = b.factors[f];
    if (x.name != y.name || x.reducible != y.reducible || x.reduce != y.reduce || x.fixed != y.fixed ||
        x.even_only != y.even_only || x.granule != y.granule)
      return false;
  }
  for (int r = 0; r < a.partials.size(); ++r)
    if (!(a.partials[r].in == b.partials[r].in) || !(a.partials[r].out == b.partials[r].out)) return false;
  return true;
}

/// Whether operators j and k get the same strategies: the same rule over tensors of the same
/// kinds, shapes and sizes, the same work, and nothing of either pinned (a model's identical
/// blocks, q, k and v): the strategies are made once.
constexpr bool same_strategies(const graph& g, const pins& p, std::size_t j, std::size_t k) {
  const op_node& a = g.ops[j];
  const op_node& b = g.ops[k];
  if (a.in.size() != b.in.size() || a.flops != b.flops) return false;
  const auto same_tensor = [&](int x, int y) {
    const tensor_node& tx = g.tensors[static_cast<std::size_t>(x)];
    const tensor_node& ty = g.tensors[static_cast<std::size_t>(y)];
    return tx.kind == ty.kind && tx.shape == ty.shape && tx.element_bytes == ty.element_bytes && !p.has(x) && !p.has(y) &&
           !p.has_read(x) && !p.has_read(y);
  };
  if (!same_tensor(a.out, b.out)) return false;
  for (int i = 0; i < a.in.size(); ++i)
    if (!same_tensor(a.in[i], b.in[i])) return false;
  return same_rule(a.rule, b.rule);
}

constexpr prepared prepare(const graph& g, const cost_model& cm, const pins& p) {
  prepared out{};
  const std::size_t nt = g.tensors.size();
  out.last_reader.assign(nt, -1);
  out.rests.resize(nt);
  std::vector<int> readers(nt, 0);
  for (std::size_t j = 0; j < g.ops.size(); ++j)
    for (int i = 0; i < g.ops[j].in.size(); ++i) {
      const int t = g.ops[j].in[i];
      const tensor_node& tn = g.tensors[static_cast<std::size_t>(t)];
      if (tn.kind == tensor_kind::activation && tn.producer >= static_cast<int>(j)) {
        out.error = search_error::not_in_order, out.bad_op = static_cast<int>(j);
        return out;
      }
      out.last_reader[static_cast<std::size_t>(t)] = static_cast<int>(j);
      ++readers[static_cast<std::size_t>(t)];
    }
  std::vector<std::vector<int>> rests_of_rank;  // rest_layouts' ids by tensor rank, made once
  for (std::size_t t = 0; t < nt; ++t)
    if (g.tensors[t].kind == tensor_kind::param) {
      if (readers[t] > 1) {
        out.error = search_error::shared_parameter, out.bad_op = out.last_reader[t];
        return out;
      }
      // a pinned parameter rests as pinned (any split order: FSDP's shard after tp's), the
      // others in any of rest_layouts
      const std::size_t rank = static_cast<std::size_t>(g.tensors[t].shape.size());
      if (p.has(static_cast<int>(t))) {
        out.rests[t].push_back(out.ids.id(p.layout[t]));
        continue;
      }
      if (rests_of_rank.size() <= rank) rests_of_rank.resize(rank + 1);
      if (rests_of_rank[rank].empty())
        for (const layout_spec& l : rest_layouts(g.mesh, static_cast<int>(rank))) rests_of_rank[rank].push_back(out.ids.id(l));
      out.rests[t] = rests_of_rank[rank];
    }
  for (std::size_t j = 0; j < g.ops.size(); ++j) {
    const op_node& op = g.ops[j];
    std::size_t twin = j;
    for (std::size_t k = 0; k < j && twin == j; ++k)
      if (same_strategies(g, p, j, k)) twin = k;
    if (twin < j) {
      out.strategies.push_back(out.strategies[twin]);
      continue;
    }
    const ops::op_context c = g.context_of(op);
    std::vector<strategy> list;
    const index_t n = ops::candidate_count(op.rule, c);
    for (index_t x = 0; x < n; ++x) {
      const ops::candidate k = ops::make_candidate(op.rule, c, x);
      // new_partial: the context's inputs are Replicate; whether a Partial fits is a property
      // of the state (partial_fits), asked there.
      if (!k.valid() && k.error != ops::candidate_error::new_partial) continue;
      bool unit_choice = false;  // a choice on a one-rank mesh dim repeats the replicate one
      for (int m = 0; m < g.mesh.size(); ++m) unit_choice = unit_choice || (g.mesh[m] == 1 && k.choice[m] != -1);
      if (unit_choice) continue;
      // (make_candidate checks new_partial last: a candidate that fails only it is otherwise valid)
      bool fits = pinned_ok(p, op.out, k.out);
      for (int i = 0; i < op.in.size() && fits; ++i) {
        const int t = op.in[i];
        const tensor_node& tn = g.tensors[static_cast<std::size_t>(t)];
        if (tn.kind != tensor_kind::activation && !partial_fits(k.in[i], nullptr)) fits = false;
        if (tn.kind == tensor_kind::data && !pinned_ok(p, t, k.in[i])) fits = false;
        if (tn.kind == tensor_kind::param && !p.read_ok(t, k.in[i])) fits = false;
      }
      if (!fits) continue;
      strategy s = make_strategy(g, op, k, x, cm);
      for (int i = 0; i < op.in.size(); ++i) {
        s.in_id.push_back(out.ids.id(s.k.in[i]));
        s.grad_id.push_back(out.ids.id(s.grad_in[i]));
      }
      s.out_id = out.ids.id(s.k.out);
      list.push_back(s);
    }
    if (list.empty()) {
      out.error = search_error::no_strategy, out.bad_op = static_cast<int>(j);
      return out;
    }
    out.strategies.push_back(list);
  }
  return out;
}

constexpr int index_of(std::vector<int>& list, int id) {
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i] == id) return static_cast<int>(i);
  list.push_back(id);
  return static_cast<int>(list.size()) - 1;
}

/// A parameter's choice for one strategy's input: a rest layout, with the moves there and
/// back and what it holds.
struct rest_choice {
  double comm = 0, memory = 0;
  collective_counts collectives{};
  int rest = -1;
};

/// An input's moves from each layout its producer may make: (forward, backward) cost per
/// held layout, infinite where the strategy's Partial does not fit.
struct edge_row {
  std::vector<double> seconds;
  std::vector<collective_counts> collectives;
};

/// Everything the dynamic program looks up, computed once: each activation's layouts (those
/// its producer's strategies make), the cost of every (held layout, reader's layout) move,
/// and each parameter input's Pareto set of rest layouts.
struct tables {
  std::vector<std::vector<int>> held;                                  // [t][h]: layout ids
  std::vector<std::vector<int>> out_index;                             // [j][x]: the h of op j's output
  std::vector<std::vector<svec<int, ops::max_op_inputs>>> row_of;      // [j][x][i]: into rows[t], or -1
  std::vector<std::vector<edge_row>> rows;                             // [t][c]
  std::vector<std::vector<svec<int, ops::max_op_inputs>>> choices_of;  // [j][x][i]: into choices, or -1
  std::vector<std::vector<rest_choice>> choices;
};

/// A parameter read as `want` whose gradient comes as `grad`: its rest layouts that no other
/// beats in both the moves' time and the memory held.
constexpr std::vector<rest_choice> rest_front(prepared& pr, std::size_t t, int want, int grad, double bytes,
                                              const cost_model& cm, move_costs& cache) {
  std::vector<rest_choice> all;
  for (std::size_t r = 0; r < pr.rests[t].size(); ++r) {
    const int rest = pr.rests[t][r];
    const transfer there = cache.get(pr.ids, rest, want, bytes, cm);
    const transfer back = cache.get(pr.ids, grad, rest, bytes, cm);
    if (!there.ok || !back.ok) continue;
    all.push_back({there.seconds + back.seconds, (2 + cm.optimizer_states) * bytes * block_fraction(pr.ids[rest]),
                   there.collectives + back.collectives, static_cast<int>(r)});
  }
  std::vector<rest_choice> front;
  for (std::size_t a = 0; a < all.size(); ++a) {
    bool beaten = false;
    for (std::size_t b = 0; b < all.size() && !beaten; ++b)
      beaten = (all[b].comm < all[a].comm && all[b].memory <= all[a].memory) ||
               (all[b].comm <= all[a].comm && all[b].memory < all[a].memory) ||
               (all[b].comm == all[a].comm && all[b].memory == all[a].memory && b < a);
    if (!beaten) front.push_back(all[a]);
  }
  return front;
}

constexpr tables make_tables(const graph& g, prepared& pr, const cost_model& cm, move_costs& cache) {
  tables tb{};
  const std::size_t nt = g.tensors.size(), no = g.ops.size();
  tb.held.resize(nt);
  tb.rows.resize(nt);
  tb.out_index.resize(no);
  tb.row_of.resize(no);
  tb.choices_of.resize(no);
  for (std::size_t j = 0; j < no; ++j)
    for (const strategy& s : pr.strategies[j])
      tb.out_index[j].push_back(index_of(tb.held[static_cast<std::size_t>(g.ops[j].out)], s.out_id));
  // the readers' distinct (layout, gradient layout) per activation; per parameter, the
  // distinct (layout, gradient layout) its readers read it in, with their rest choices
  std::vector<std::vector<int>> want(nt), grad(nt);
  std::vector<std::vector<svec<int, 3>>> param_reads(nt);  // (want, grad, into choices)
  for (std::size_t j = 0; j < no; ++j) {
    const op_node& op = g.ops[j];
    for (std::size_t x = 0; x < pr.strategies[j].size(); ++x) {
      const strategy& s = pr.strategies[j][x];
      svec<int, ops::max_op_inputs> rows{}, choices{};
      for (int i = 0; i < op.in.size(); ++i) {
        const std::size_t t = static_cast<std::size_t>(op.in[i]);
        const tensor_node& tn = g.tensors[t];
        int row = -1, choice = -1;
        if (tn.kind == tensor_kind::activation) {
          for (std::size_t c = 0; c < want[t].size() && row < 0; ++c)
            if (want[t][c] == s.in_id[i] && grad[t][c] == s.grad_id[i]) row = static_cast<int>(c);
          if (row < 0) {
            want[t].push_back(s.in_id[i]);
            grad[t].push_back(s.grad_id[i]);
            row = static_cast<int>(want[t].size()) - 1;
          }
        } else if (tn.kind == tensor_kind::param) {
          for (const svec<int, 3>& r : param_reads[t])
            if (r[0] == s.in_id[i] && r[1] == s.grad_id[i]) choice = r[2];
          if (choice < 0) {
            tb.choices.push_back(rest_front(pr, t, s.in_id[i], s.grad_id[i], tn.bytes(), cm, cache));
            choice = static_cast<int>(tb.choices.size()) - 1;
            param_reads[t].push_back(svec<int, 3>{{s.in_id[i], s.grad_id[i], choice}, 3});
          }
        }
        rows.push_back(row);
        choices.push_back(choice);
      }
      tb.row_of[j].push_back(rows);
      tb.choices_of[j].push_back(choices);
    }
  }
  // a row is the same for every tensor with the same held layouts and bytes (a model's
  // identical blocks): made once, copied after
  std::vector<std::size_t> like(nt, nt);  // an earlier tensor with the same held layouts and bytes
  for (std::size_t t = 0; t < nt; ++t)
    for (std::size_t u = 0; u < t && like[t] == nt; ++u)
      if (g.tensors[u].bytes() == g.tensors[t].bytes() && tb.held[u] == tb.held[t] && !tb.held[t].empty()) like[t] = u;
  for (std::size_t t = 0; t < nt; ++t) {
    const double bytes = g.tensors[t].bytes();
    for (std::size_t c = 0; c < want[t].size(); ++c) {
      if (like[t] < nt) {
        const std::size_t u = like[t];
        std::size_t found = want[u].size();
        for (std::size_t k = 0; k < want[u].size() && found == want[u].size(); ++k)
          if (want[u][k] == want[t][c] && grad[u][k] == grad[t][c]) found = k;
        if (found < want[u].size()) {
          tb.rows[t].push_back(tb.rows[u][found]);
          continue;
        }
      }
      edge_row row{};
      for (const int h : tb.held[t]) {
        if (!partial_fits(pr.ids[want[t][c]], &pr.ids[h])) {
          row.seconds.push_back(std::numeric_limits<double>::infinity());
          row.collectives.push_back({});
          continue;
        }
        const transfer there = cache.get(pr.ids, h, want[t][c], bytes, cm);
        const transfer back = cache.get(pr.ids, grad[t][c], pr.ids.as_replicate(h), bytes, cm);
        row.seconds.push_back(there.ok && back.ok ? there.seconds + back.seconds : std::numeric_limits<double>::infinity());
        row.collectives.push_back(there.collectives + back.collectives);
      }
      tb.rows[t].push_back(row);
    }
  }
  return tb;
}

/// Operators whose output one later operator reads, once, and whose activation inputs no
/// deferred operator makes: without a budget the search chooses such an operator's strategy
/// with its reader's (for each strategy of the reader, the best of the deferred operator's,
/// given the layouts its own inputs were made in, kept in the state until the reader), so its
/// output's layout never enters a state. Exact: the deferred operator's costs depend only on
/// its inputs' layouts, its strategy and its reader's strategy, all known at the reader, and
/// nothing else reads its output. What it saves: attention's q, k and v, three activations
/// live at once, cost one state each instead of their product.
struct deferral {
  std::vector<int> reader;     // [j]: the operator op j is chosen with, or -1
  std::vector<int> last_live;  // [t]: the last operator whose state holds t
};

constexpr deferral plan_deferral(const graph& g, const prepared& pr, bool enabled) {
  deferral d{};
  const std::size_t nt = g.tensors.size(), no = g.ops.size();
  d.reader.assign(no, -1);
  d.last_live = pr.last_reader;
  if (!enabled) return d;
  std::vector<int> reads(nt, 0);
  for (const op_node& op : g.ops)
    for (int i = 0; i < op.in.size(); ++i) ++reads[static_cast<std::size_t>(op.in[i])];
  for (std::size_t j = 0; j < no; ++j) {
    const op_node& op = g.ops[j];
    if (reads[static_cast<std::size_t>(op.out)] != 1) continue;
    bool inputs_made = true;  // no activation input of a deferred operator
    for (int i = 0; i < op.in.size(); ++i) {
      const tensor_node& tn = g.tensors[static_cast<std::size_t>(op.in[i])];
      if (tn.kind == tensor_kind::activation && d.reader[static_cast<std::size_t>(tn.producer)] >= 0) inputs_made = false;
    }
    if (!inputs_made) continue;
    const int r = pr.last_reader[static_cast<std::size_t>(op.out)];
    d.reader[j] = r;
    for (int i = 0; i < op.in.size(); ++i) {
      const std::size_t t = static_cast<std::size_t>(op.in[i]);
      if (g.tensors[t].kind == tensor_kind::activation && d.last_live[t] < r) d.last_live[t] = r;
    }
  }
  return d;
}

/// The tensors in the state after operator j: activations made at or before j by an operator
/// that is not deferred, held for an operator after j; in tensor order.
constexpr std::vector<int> state_after(const graph& g, const deferral& d, int j) {
  std::vector<int> out;
  for (std::size_t t = 0; t < g.tensors.size(); ++t) {
    const tensor_node& tn = g.tensors[t];
    if (tn.kind == tensor_kind::activation && tn.producer <= j && d.last_live[t] > j &&
        d.reader[static_cast<std::size_t>(tn.producer)] < 0)
      out.push_back(static_cast<int>(t));
  }
  return out;
}

/// A parameter input's rest layout when only time counts: the fastest moves, the least memory
/// among equals (deterministic: backtracking recomputes it).
constexpr const rest_choice& fastest_rest(const std::vector<rest_choice>& list) {
  std::size_t b = 0;
  for (std::size_t c = 1; c < list.size(); ++c)
    if (list[c].comm < list[b].comm || (list[c].comm == list[b].comm && list[c].memory < list[b].memory)) b = c;
  return list[b];
}

/// A deferred operator's strategy p at a state: what it costs apart from its output's moves.
struct deferred_cost {
  double compute = 0, comm = 0, memory = 0;
  collective_counts collectives{};
  bool ok = false;
};


/// The live activations of a layer of the dynamic program, as the digits of a state's code:
/// digit q is live[q]'s layout (an index into its held layouts), of place value stride[q].
struct digits {
  std::vector<int> live;              // tensors, in tensor order
  std::vector<std::uint64_t> stride;  // per live tensor
  std::vector<std::uint64_t> radix;   // per live tensor: its held layouts
  bool fits = true;                   // the codes fit 64 bits

  constexpr int slot_of(int t) const {
    for (std::size_t q = 0; q < live.size(); ++q)
      if (live[q] == t) return static_cast<int>(q);
    return -1;
  }
  constexpr int at(std::uint64_t code, int q) const {
    return static_cast<int>(code / stride[static_cast<std::size_t>(q)] % radix[static_cast<std::size_t>(q)]);
  }
};

constexpr digits digits_of(std::vector<int> live, const tables& tb) {
  digits d{};
  d.live = std::move(live);
  std::uint64_t place = 1;
  for (const int t : d.live) {
    const std::uint64_t r = tb.held[static_cast<std::size_t>(t)].size() > 0 ? tb.held[static_cast<std::size_t>(t)].size() : 1;
    d.stride.push_back(place);
    d.radix.push_back(r);
    if (place > (std::uint64_t{1} << 62) / r) d.fits = false;
    else place *= r;
  }
  return d;
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

/// A deferred operator's best strategy for each way its reader reads its output (rows[t][c]),
/// given the layouts its own activation inputs were made in.
struct deferred_best {
  std::vector<deferred_cost> cost;  // [c]
  std::vector<int> strategy;        // [c]: -1 where none fits
};

constexpr deferred_best best_deferred(const graph& g, const prepared& pr, const tables& tb, std::size_t fj,
                                      const digits& dg, std::uint64_t code) {
  const op_node& fop = g.ops[fj];
  std::vector<deferred_cost> base(pr.strategies[fj].size());
  for (std::size_t fx = 0; fx < pr.strategies[fj].size(); ++fx) {
    const strategy& fs = pr.strategies[fj][fx];
    deferred_cost c{fs.compute_s, 0, fs.saved_bytes, {}, true};
    for (int fi = 0; fi < fop.in.size() && c.ok; ++fi) {
      const int row = tb.row_of[fj][fx][fi];
      if (row >= 0) {
        const std::size_t t = static_cast<std::size_t>(fop.in[fi]);
        const std::size_t h = static_cast<std::size_t>(dg.at(code, dg.slot_of(fop.in[fi])));
        const edge_row& e = tb.rows[t][static_cast<std::size_t>(row)];
        if (!(e.seconds[h] < std::numeric_limits<double>::infinity())) c.ok = false;
        c.comm += e.seconds[h];
        c.collectives += e.collectives[h];
      } else if (tb.choices_of[fj][fx][fi] >= 0) {
        const std::vector<rest_choice>& list = tb.choices[static_cast<std::size_t>(tb.choices_of[fj][fx][fi])];
        if (list.empty()) {
          c.ok = false;
          continue;
        }
        const rest_choice& r = fastest_rest(list);
        c.comm += r.comm, c.memory += r.memory, c.collectives += r.collectives;
      }
    }
    base[fx] = c;
  }
  // the reader's each read c: the strategy with the least time (then memory), its output
  // moved to c; summed and compared exactly as a pair is (compute + (comm + edge))
  std::vector<double> base_time(base.size(), 0);
  for (std::size_t fx = 0; fx < base.size(); ++fx) base_time[fx] = base[fx].compute + base[fx].comm;
  const std::vector<int>& out_index = tb.out_index[fj];
  deferred_best out{};
  const std::size_t t = static_cast<std::size_t>(fop.out);
  for (std::size_t c = 0; c < tb.rows[t].size(); ++c) {
    const std::vector<double>& edge_of = tb.rows[t][c].seconds;
    double best_time = 0, best_memory = 0;
    int bp = -1;
    for (std::size_t fx = 0; fx < base.size(); ++fx) {
      if (!base[fx].ok) continue;
      const double edge = edge_of[static_cast<std::size_t>(out_index[fx])];
      if (!(edge < std::numeric_limits<double>::infinity())) continue;
      const double time = base_time[fx] + edge;
      if (bp < 0 || time < best_time || (time == best_time && base[fx].memory < best_memory)) {
        bp = static_cast<int>(fx);
        best_time = base[fx].compute + (base[fx].comm + edge);
        best_memory = base[fx].memory;
      }
    }
    deferred_cost b{};
    if (bp >= 0) {
      const std::size_t h = static_cast<std::size_t>(out_index[static_cast<std::size_t>(bp)]);
      b = base[static_cast<std::size_t>(bp)];
      b.comm += edge_of[h];
      b.collectives += tb.rows[t][c].collectives[h];
    }
    out.cost.push_back(b);
    out.strategy.push_back(bp);
  }
  return out;
}

/// best_deferred for each state of a layer, remembered by the layouts the deferred
/// operator's inputs were made in (few: every state with the same ones shares it).
struct deferred_memo {
  std::vector<int> place;   // per activation input of the deferred operator: its slot in the state
  std::vector<int> at;      // by the inputs' layouts (mixed radix): into found, or -1
  std::vector<deferred_best> found;

  static constexpr deferred_memo of(const graph& g, std::size_t fj, const digits& dg) {
    deferred_memo m{};
    std::uint64_t n = 1;
    for (int fi = 0; fi < g.ops[fj].in.size(); ++fi)
      if (g.tensors[static_cast<std::size_t>(g.ops[fj].in[fi])].kind == tensor_kind::activation) {
        const int q = dg.slot_of(g.ops[fj].in[fi]);
        m.place.push_back(q);
        n *= dg.radix[static_cast<std::size_t>(q)];
        if (n > (1u << 16)) return m.place.clear(), m;  // too many to keep: computed each time
      }
    m.at.assign(static_cast<std::size_t>(n), -1);
    return m;
  }
  constexpr const deferred_best& get(const graph& g, const prepared& pr, const tables& tb, std::size_t fj,
                                     const digits& dg, std::uint64_t code) {
    if (at.empty()) {
      found.assign(1, best_deferred(g, pr, tb, fj, dg, code));
      return found[0];
    }
    std::size_t k = 0, mult = 1;
    for (const int q : place) {
      k += mult * static_cast<std::size_t>(dg.at(code, q));
      mult *= static_cast<std::size_t>(dg.radix[static_cast<std::size_t>(q)]);
    }
    if (at[k] < 0) {
      found.push_back(best_deferred(g, pr, tb, fj, dg, code));
      at[k] = static_cast<int>(found.size()) - 1;
    }
    return found[static_cast<std::size_t>(at[k])];
  }
};

/// Operator j run with strategy x: its output's layout, its inputs' reads and gradients, and
/// the layouts of its parameters (rest: per input, the choice; -1: the fastest) and data.
constexpr void record(solution& sol, const graph& g, const prepared& pr, const tables& tb, std::size_t j, std::size_t x,
                      const svec<int, ops::max_op_inputs>& rest) {
  const strategy& s = pr.strategies[j][x];
  const op_node& op = g.ops[j];
  sol.strategy[j] = static_cast<int>(s.index);
  sol.reads[j] = s.k.in;
  sol.grads[j] = s.grad_in;
  sol.layouts[static_cast<std::size_t>(op.out)] = s.k.out;
  for (int i = 0; i < op.in.size(); ++i) {
    const std::size_t t = static_cast<std::size_t>(op.in[i]);
    const tensor_node& tn = g.tensors[t];
    if (tn.kind == tensor_kind::param) {
      const int r = i < rest.size() && rest[i] >= 0
                        ? rest[i]
                        : fastest_rest(tb.choices[static_cast<std::size_t>(tb.choices_of[j][x][i])]).rest;
      sol.layouts[t] = pr.ids[pr.rests[t][static_cast<std::size_t>(r)]];
    } else if (tn.kind == tensor_kind::data) {
      sol.layouts[t] = s.k.in[i];
    }
  }
}

/// Layers of the time-only program indexed by their codes directly, while the codes of a
/// layer number at most this many (else the hashed layers of the general program).
inline constexpr std::uint64_t max_dense_layer = std::uint64_t{1} << 18;

/// A state of the time-only program: its fastest pair, and how it was reached.
struct cell {
  double compute = 0, comm = 0, memory = 0;
  std::uint64_t prev = 0;  // the state's code in the layer before (a table's: the entry's layout)
  int strategy = -2;       // of this layer's operator; -1 passed through (deferred); -2 no state; -3 a segment's table
  constexpr double time() const { return compute + comm; }
  constexpr bool beats(double t, double m) const { return strategy == -2 || t < time() || (t == time() && m < memory); }
};

/// A run of operators between two layers that each hold one activation (the entry x and the
/// exit y), where x is read until the run's last operator and nothing deferred crosses its
/// ends: a transformer block's half, a residual block. Its cost from each layout of x to
/// each of y is a table, computed once for all runs that are the same program (`twin`).
struct segment {
  std::size_t a = 0, b = 0;  // operators [a, b)
  int twin = -1;             // the first run of the same program (itself for the first)
  std::vector<cell> table{};  // twin == itself: [h_in · exits + h_out], prev = the code before op b−1
  std::size_t exits = 0;
};

/// Whether two tensors' rows (their readers' moves from each held layout) are equal.
constexpr bool same_rows(const tables& tb, int ts, int tu) {
  const std::vector<edge_row>& rs = tb.rows[static_cast<std::size_t>(ts)];
  const std::vector<edge_row>& ru = tb.rows[static_cast<std::size_t>(tu)];
  if (rs.size() != ru.size() || tb.held[static_cast<std::size_t>(ts)] != tb.held[static_cast<std::size_t>(tu)]) return false;
  for (std::size_t c = 0; c < rs.size(); ++c)
    if (rs[c].seconds != ru[c].seconds || !(rs[c].collectives == ru[c].collectives)) return false;
  return true;
}

/// Whether two operators look the same to the dynamic program: equal strategies (compute,
/// saved bytes, layouts), reads, outputs and parameters' rest choices.
constexpr bool same_op(const graph& g, const prepared& pr, const tables& tb, std::size_t js, std::size_t ju) {
  const op_node& os = g.ops[js];
  const op_node& ou = g.ops[ju];
  if (os.in.size() != ou.in.size()) return false;
  const std::vector<strategy>& ss = pr.strategies[js];
  const std::vector<strategy>& su = pr.strategies[ju];
  if (ss.size() != su.size() || tb.out_index[js] != tb.out_index[ju] || !(tb.row_of[js] == tb.row_of[ju])) return false;
  for (std::size_t x = 0; x < ss.size(); ++x) {
    if (ss[x].compute_s != su[x].compute_s || ss[x].saved_bytes != su[x].saved_bytes || ss[x].out_id != su[x].out_id ||
        !(ss[x].in_id == su[x].in_id) || !(ss[x].grad_id == su[x].grad_id))
      return false;
    for (int i = 0; i < os.in.size(); ++i) {
      const int cs = tb.choices_of[js][x][i], cu = tb.choices_of[ju][x][i];
      if ((cs < 0) != (cu < 0)) return false;
      if (cs < 0) continue;
      const std::vector<rest_choice>& ls = tb.choices[static_cast<std::size_t>(cs)];
      const std::vector<rest_choice>& lu = tb.choices[static_cast<std::size_t>(cu)];
      if (ls.size() != lu.size()) return false;
      for (std::size_t r = 0; r < ls.size(); ++r)
        if (ls[r].comm != lu[r].comm || ls[r].memory != lu[r].memory || ls[r].rest != lu[r].rest ||
            !(ls[r].collectives == lu[r].collectives))
          return false;
    }
  }
  return true;
}

/// Whether two deferred operators' best strategies are the same for every layout of their
/// inputs and every read of their output: the same operator, reading and read alike.
constexpr bool same_deferred(const graph& g, const prepared& pr, const tables& tb, std::size_t js, std::size_t ju) {
  const op_node& os = g.ops[js];
  const op_node& ou = g.ops[ju];
  if (!same_op(g, pr, tb, js, ju) || !same_rows(tb, os.out, ou.out)) return false;
  for (int i = 0; i < os.in.size(); ++i) {
    const tensor_kind ks = g.tensors[static_cast<std::size_t>(os.in[i])].kind;
    if (ks != g.tensors[static_cast<std::size_t>(ou.in[i])].kind) return false;
    if (ks == tensor_kind::activation && !same_rows(tb, os.in[i], ou.in[i])) return false;
  }
  return true;
}

/// Whether two runs of operators are the same program for the dynamic program: equal
/// strategies, tables, rows, rest choices, live tensors and deferrals, operator by operator.
constexpr bool same_run(const graph& g, const prepared& pr, const tables& tb, const deferral& d,
                        const std::vector<digits>& dg, const segment& s, const segment& u) {
  if (s.b - s.a != u.b - u.a) return false;
  const int xs = dg[s.a].live[0], xu = dg[u.a].live[0];
  // activations correspond when both are the entries or both are made at the same offset
  const auto corresponds = [&](int ts, int tu) {
    const tensor_node& ns = g.tensors[static_cast<std::size_t>(ts)];
    const tensor_node& nu = g.tensors[static_cast<std::size_t>(tu)];
    if (ns.kind != nu.kind) return false;
    if (ns.kind == tensor_kind::data) return ts == tu;
    if (ns.kind == tensor_kind::param) return pr.rests[static_cast<std::size_t>(ts)] == pr.rests[static_cast<std::size_t>(tu)];
    if (ts == xs || tu == xu) return ts == xs && tu == xu;
    return ns.producer >= static_cast<int>(s.a) && nu.producer >= static_cast<int>(u.a) &&
           static_cast<std::size_t>(ns.producer) - s.a == static_cast<std::size_t>(nu.producer) - u.a;
  };
  if (!same_rows(tb, xs, xu)) return false;
  for (std::size_t k = 0; k < s.b - s.a; ++k) {
    const std::size_t js = s.a + k, ju = u.a + k;
    const op_node& os = g.ops[js];
    const op_node& ou = g.ops[ju];
    if (!same_op(g, pr, tb, js, ju)) return false;
    for (int i = 0; i < os.in.size(); ++i)
      if (!corresponds(os.in[i], ou.in[i])) return false;
    const int rs = d.reader[js], ru = d.reader[ju];
    if ((rs < 0) != (ru < 0) || (rs >= 0 && static_cast<std::size_t>(rs) - s.a != static_cast<std::size_t>(ru) - u.a)) return false;
    const digits& ds = dg[js + 1];
    const digits& du = dg[ju + 1];
    if (ds.live.size() != du.live.size()) return false;
    for (std::size_t q = 0; q < ds.live.size(); ++q)
      if (!corresponds(ds.live[q], du.live[q])) return false;
    if (k + 1 < s.b - s.a && !same_rows(tb, os.out, ou.out)) return false;  // read inside the run
  }
  return true;
}

/// The fastest step without a memory budget: the dynamic program with one pair a state, a
/// layer an array indexed by the states' codes (no hashing, no pairs built but the winners'),
/// the collectives and rest layouts recounted along the chosen path at the end. Runs that
/// are the same program (a model's identical blocks) are walked once: their table carries
/// every later one from its entry's layouts to its exit's. False: a layer too wide to index
/// (the general program takes the graph).
constexpr bool fastest(solution& sol, const graph& g, const prepared& pr, const tables& tb) {
  const std::size_t nt = g.tensors.size(), no = g.ops.size();
  const deferral d = plan_deferral(g, pr, true);
  std::vector<digits> dg;  // per layer (the state before operator k): its live tensors' digits
  dg.push_back(digits_of({}, tb));
  for (std::size_t j = 0; j < no; ++j) {
    dg.push_back(digits_of(state_after(g, d, static_cast<int>(j)), tb));
    std::uint64_t n = 1;
    for (const std::uint64_t r : dg.back().radix) n *= r;
    if (!dg.back().fits || n > max_dense_layer) return false;
  }
  const auto size_of = [&](std::size_t k) {
    std::uint64_t n = 1;
    for (const std::uint64_t r : dg[k].radix) n *= r;
    return static_cast<std::size_t>(n);
  };
  // the runs between one-activation layers, and which are the same program
  std::vector<segment> runs;
  std::vector<int> run_at(no + 1, -1);  // the run that starts at operator a
  for (std::size_t a = 1; a < no; ++a) {
    if (dg[a].live.size() != 1 || (!runs.empty() && a < runs.back().b)) continue;
    const std::size_t b = static_cast<std::size_t>(d.last_live[static_cast<std::size_t>(dg[a].live[0])]) + 1;
    if (b <= a + 1 || b > no || dg[b].live.size() != 1 || dg[b].live[0] == dg[a].live[0]) continue;
    bool closed = true;  // nothing deferred across its ends
    for (std::size_t j = a; j < b; ++j)
      closed = closed && (d.reader[j] < 0 || (static_cast<std::size_t>(d.reader[j]) >= a && static_cast<std::size_t>(d.reader[j]) < b));
    if (!closed) continue;
    segment s{a, b};
    for (std::size_t r = 0; r < runs.size() && s.twin < 0; ++r)
      if (runs[r].twin == static_cast<int>(r) && same_run(g, pr, tb, d, dg, runs[r], s)) s.twin = static_cast<int>(r);
    if (s.twin < 0) s.twin = static_cast<int>(runs.size());
    run_at[a] = static_cast<int>(runs.size());
    runs.push_back(s);
  }
  // a program run once is walked as it comes (its table would cost more than it saves)
  std::vector<int> instances(runs.size(), 0);
  for (const segment& s : runs) ++instances[static_cast<std::size_t>(s.twin)];
  for (const segment& s : runs)
    if (instances[static_cast<std::size_t>(s.twin)] < 2) run_at[s.a] = -1;
  std::vector<std::vector<cell>> layers(no + 1);
  layers[0].assign(1, cell{0, 0, 0, 0, -1});
  std::vector<std::vector<deferred_memo>> memos(no);  // per op and input a deferred operator makes

  // operator j from the states of `from` (layer j): into the next layer's states, or (table:
  // the run's last operator) into [h_in · exits + h_out], h_in the layout of `entry`
  const auto transition = [&](std::size_t j, const std::vector<cell>& from, std::vector<cell>& to, int entry,
                              std::size_t exits) {
    const op_node& op = g.ops[j];
    const digits& before = dg[j];
    const digits& after = dg[j + 1];
    if (d.reader[j] >= 0) {  // chosen with its reader: the states pass through
      for (std::size_t code = 0; code < from.size(); ++code) {
        if (from[code].strategy == -2) continue;
        std::uint64_t into = 0;
        for (std::size_t q = 0; q < after.live.size(); ++q)
          into += after.stride[q] * static_cast<std::uint64_t>(before.at(code, before.slot_of(after.live[q])));
        cell c = from[code];
        c.prev = code, c.strategy = -1;
        if (to[into].beats(c.time(), c.memory)) to[into] = c;
      }
      return;
    }
    svec<int, ops::max_op_inputs> slot{}, folded_op{};
    memos[j].resize(static_cast<std::size_t>(op.in.size()));
    for (int i = 0; i < op.in.size(); ++i) {
      const tensor_node& tn = g.tensors[static_cast<std::size_t>(op.in[i])];
      const bool deferred = tn.kind == tensor_kind::activation && d.reader[static_cast<std::size_t>(tn.producer)] >= 0;
      slot.push_back(deferred ? -1 : before.slot_of(op.in[i]));
      folded_op.push_back(deferred ? tn.producer : -1);
      if (!deferred) continue;
      deferred_memo& memo = memos[j][static_cast<std::size_t>(i)];
      memo = deferred_memo::of(g, static_cast<std::size_t>(tn.producer), before);
      // a deferred operator like one met before (the same in an earlier block): its answers
      for (std::size_t k = 0; k < j; ++k)
        for (std::size_t q = 0; q < memos[k].size(); ++q) {
          const deferred_memo& seen = memos[k][q];
          const std::size_t fk = static_cast<std::size_t>(g.tensors[static_cast<std::size_t>(g.ops[k].in[static_cast<int>(q)])].producer);
          if (memo.found.empty() && !seen.found.empty() && seen.at.size() == memo.at.size() && !memo.at.empty() &&
              same_deferred(g, pr, tb, fk, static_cast<std::size_t>(tn.producer)))
            memo.at = seen.at, memo.found = seen.found;
        }
    }
    std::uint64_t out_stride = 0;
    std::vector<std::uint64_t> carried_stride(before.live.size(), 0);
    if (entry < 0)
      for (std::size_t q = 0; q < after.live.size(); ++q) {
        if (after.live[q] == op.out) out_stride = after.stride[q];
        else carried_stride[static_cast<std::size_t>(before.slot_of(after.live[q]))] = after.stride[q];
      }
    const int entry_slot = entry >= 0 ? before.slot_of(entry) : -1;
    std::vector<std::uint8_t> usable(pr.strategies[j].size(), 1);
    std::vector<svec<const edge_row*, ops::max_op_inputs>> rows(pr.strategies[j].size());
    for (std::size_t x = 0; x < pr.strategies[j].size(); ++x)
      for (int i = 0; i < op.in.size(); ++i) {
        const int row = tb.row_of[j][x][i];
        rows[x].push_back(row >= 0 && folded_op[i] < 0 ? &tb.rows[static_cast<std::size_t>(op.in[i])][static_cast<std::size_t>(row)] : nullptr);
        const int choice = tb.choices_of[j][x][i];
        if (choice >= 0 && tb.choices[static_cast<std::size_t>(choice)].empty()) usable[x] = 0;
      }
    for (std::size_t code = 0; code < from.size(); ++code) {
      const cell& st = from[code];
      if (st.strategy == -2) continue;
      svec<const deferred_best*, ops::max_op_inputs> best{};
      svec<std::size_t, ops::max_op_inputs> h{};
      for (int i = 0; i < op.in.size(); ++i) {
        best.push_back(folded_op[i] < 0 ? nullptr
                                        : &memos[j][static_cast<std::size_t>(i)].get(g, pr, tb, static_cast<std::size_t>(folded_op[i]), before, code));
        h.push_back(slot[i] >= 0 ? static_cast<std::size_t>(before.at(code, slot[i])) : 0);
      }
      std::uint64_t kept = 0;
      if (entry >= 0) kept = static_cast<std::uint64_t>(before.at(code, entry_slot)) * exits;
      else
        for (std::size_t q = 0; q < before.live.size(); ++q)
          if (carried_stride[q] != 0) kept += carried_stride[q] * static_cast<std::uint64_t>(before.at(code, static_cast<int>(q)));
      const std::uint64_t out_place = entry >= 0 ? 1 : out_stride;
      for (std::size_t x = 0; x < pr.strategies[j].size(); ++x) {
        if (!usable[x]) continue;
        const strategy& s = pr.strategies[j][x];
        const svec<int, ops::max_op_inputs>& row_of = tb.row_of[j][x];
        double compute = s.compute_s, comm = 0, memory = s.saved_bytes;
        bool fits = true;
        for (int i = 0; i < op.in.size() && fits; ++i) {
          if (best[i] != nullptr) {
            const std::size_t c = static_cast<std::size_t>(row_of[i]);
            if (best[i]->strategy[c] < 0) fits = false;
            const deferred_cost& b = best[i]->cost[c];
            compute += b.compute, comm += b.comm, memory += b.memory;
          } else if (rows[x][i] != nullptr) {
            const double e = rows[x][i]->seconds[h[i]];
            if (!(e < std::numeric_limits<double>::infinity())) fits = false;
            comm += e;
          }
        }
        if (!fits) continue;
        double l_compute = compute + st.compute, l_comm = comm + st.comm, l_memory = memory + st.memory;
        for (int i = 0; i < op.in.size(); ++i)  // the parameters' fastest rest layouts, summed as the general program does
          if (tb.choices_of[j][x][i] >= 0) {
            const rest_choice& r = fastest_rest(tb.choices[static_cast<std::size_t>(tb.choices_of[j][x][i])]);
            l_comm += r.comm;
            l_memory += r.memory;
          }
        cell& into = to[static_cast<std::size_t>(kept + out_place * static_cast<std::uint64_t>(tb.out_index[j][x]))];
        if (into.beats(l_compute + l_comm, l_memory)) into = cell{l_compute, l_comm, l_memory, code, static_cast<int>(x)};
      }
    }
  };

  for (std::size_t j = 0; j < no;) {
    const int r = run_at[j];
    if (r < 0) {
      layers[j + 1].assign(size_of(j + 1), cell{});
      transition(j, layers[j], layers[j + 1], -1, 0);
      ++j;
      continue;
    }
    segment& run = runs[static_cast<std::size_t>(r)];
    segment& first = runs[static_cast<std::size_t>(run.twin)];
    if (run.twin == r) {  // the program's first run: walked from every layout of its entry at no cost
      const std::size_t entries = size_of(run.a);
      layers[run.a + 1].assign(size_of(run.a + 1), cell{});
      std::vector<cell> free(entries, cell{0, 0, 0, 0, -1});
      for (std::size_t h = 0; h < entries; ++h) free[h].prev = h;
      std::size_t k = run.a;
      for (; k + 1 < run.b; ++k) {
        layers[k + 1].assign(size_of(k + 1), cell{});
        transition(k, k == run.a ? free : layers[k], layers[k + 1], -1, 0);
      }
      run.exits = size_of(run.b);
      run.table.assign(entries * run.exits, cell{});
      transition(k, k == run.a ? free : layers[k], run.table, dg[run.a].live[0], run.exits);
    }
    // the exit's states: the best entry layout through the table
    std::vector<cell>& out = layers[run.b];
    out.assign(size_of(run.b), cell{});
    const std::vector<cell>& in = layers[run.a];
    for (std::size_t hi = 0; hi < in.size(); ++hi) {
      if (in[hi].strategy == -2) continue;
      for (std::size_t ho = 0; ho < first.exits; ++ho) {
        const cell& t = first.table[hi * first.exits + ho];
        if (t.strategy == -2) continue;
        const double c = in[hi].compute + t.compute, m = in[hi].comm + t.comm, mem = in[hi].memory + t.memory;
        if (out[ho].beats(c + m, mem)) out[ho] = cell{c, m, mem, hi, -3};
      }
    }
    j = run.b;
  }
  for (std::size_t k = 1; k <= no; ++k)
    for (const cell& c : layers[k]) sol.states += c.strategy != -2;
  for (const segment& s : runs)
    for (const cell& c : s.table) sol.states += c.strategy != -2;
  const std::vector<cell>& last = layers[no];
  std::size_t end = last.size();
  for (std::size_t code = 0; code < last.size(); ++code)
    if (last[code].strategy != -2 && (end == last.size() || last[code].time() < last[end].time())) end = code;
  if (end == last.size()) return sol.error = search_error::no_strategy, true;
  sol.compute_s = last[end].compute;
  sol.comm_s = last[end].comm;
  sol.memory_bytes = last[end].memory;
  sol.layouts.resize(nt);
  sol.strategy.assign(no, -1);
  sol.reads.resize(no);
  sol.grads.resize(no);
  // back along the chosen states: each operator's strategy, its deferred inputs' (the best
  // at that state), and the collectives of every move on the way; a run's operators are
  // read from its first run's walk (the same program: `shift` operators earlier)
  const auto account = [&](std::size_t j, std::size_t shift, std::size_t x, std::uint64_t prev) {
    const std::size_t jw = j - shift;  // the walked operator
    const op_node& op = g.ops[jw];
    const digits& before = dg[jw];
    record(sol, g, pr, tb, j, x, {});
    for (int i = 0; i < op.in.size(); ++i) {
      const tensor_node& tn = g.tensors[static_cast<std::size_t>(op.in[i])];
      const int row = tb.row_of[jw][x][i];
      if (tn.kind == tensor_kind::activation && d.reader[static_cast<std::size_t>(tn.producer)] >= 0) {
        const std::size_t fj = static_cast<std::size_t>(tn.producer);
        const deferred_best& b = memos[jw][static_cast<std::size_t>(i)].get(g, pr, tb, fj, before, prev);
        sol.collectives += b.cost[static_cast<std::size_t>(row)].collectives;
        record(sol, g, pr, tb, fj + shift, static_cast<std::size_t>(b.strategy[static_cast<std::size_t>(row)]), {});
      } else if (row >= 0) {
        const std::size_t h = static_cast<std::size_t>(before.at(prev, before.slot_of(op.in[i])));
        sol.collectives += tb.rows[static_cast<std::size_t>(op.in[i])][static_cast<std::size_t>(row)].collectives[h];
      } else if (tb.choices_of[jw][x][i] >= 0) {
        sol.collectives += fastest_rest(tb.choices[static_cast<std::size_t>(tb.choices_of[jw][x][i])]).collectives;
      }
    }
  };
  std::uint64_t code = end;
  for (std::size_t j = no; j-- > 0;) {
    const cell& c = layers[j + 1][static_cast<std::size_t>(code)];
    if (c.strategy != -3) {
      if (c.strategy >= 0) account(j, 0, static_cast<std::size_t>(c.strategy), c.prev);
      code = c.prev;
      continue;
    }
    // a run [a, b) left through its table at (entry c.prev, exit code): its first run's walk
    std::size_t a = j;
    while (run_at[a] < 0 || runs[static_cast<std::size_t>(run_at[a])].b != j + 1) --a;
    const segment& run = runs[static_cast<std::size_t>(run_at[a])];
    const segment& first = runs[static_cast<std::size_t>(run.twin)];
    const std::size_t shift = run.a - first.a;
    const cell& t = first.table[static_cast<std::size_t>(c.prev) * first.exits + static_cast<std::size_t>(code)];
    account(first.b - 1 + shift, shift, static_cast<std::size_t>(t.strategy), t.prev);
    std::uint64_t at = t.prev;
    for (std::size_t k = first.b - 1; k > first.a; --k) {  // the walk's cells, layer k
      const cell& w = layers[k][static_cast<std::size_t>(at)];
      if (w.strategy >= 0) account(k - 1 + shift, shift, static_cast<std::size_t>(w.strategy), w.prev);
      at = w.prev;
    }
    code = c.prev;  // the entry's layout: the state before the run
    j = run.a;
  }
  return true;
}

/// The dynamic program: the fastest pair at the end (least_memory: the smallest).
constexpr solution run(const graph& g, const cost_model& cm, const pins& p, bool least_memory) {
  solution sol{};
  prepared pr = prepare(g, cm, p);
  if (pr.error != search_error::none) return sol.error = pr.error, sol.bad_op = pr.bad_op, sol;
  move_costs cache;
  const tables tb = make_tables(g, pr, cm, cache);
  sol.plans = cache.planned();
  // Without a budget a state needs only its fastest pair (least_memory asks for the smallest)
  const bool time_only = !least_memory && !(cm.memory_budget < std::numeric_limits<double>::infinity());
  if (time_only && fastest(sol, g, pr, tb)) return sol;
  const std::size_t nt = g.tensors.size(), no = g.ops.size();
  std::vector<layer> layers(no + 1);
  layers[0].states.push_back({0, {label{}}});
  digits before = digits_of({}, tb);
  bool pruned = false;
  const deferral d = plan_deferral(g, pr, time_only);
  for (std::size_t j = 0; j < no; ++j) {
    const op_node& op = g.ops[j];
    const digits after = digits_of(state_after(g, d, static_cast<int>(j)), tb);
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
          l.folded = {};
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
      if (deferred) memo[i] = deferred_memo::of(g, static_cast<std::size_t>(tn.producer), before);
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
      svec<const edge_row*, ops::max_op_inputs> row{};  // per input: made by a state's tensor, else null
      svec<int, ops::max_op_inputs> param{};            // parameter inputs
      svec<const std::vector<rest_choice>*, ops::max_op_inputs> rests{};  // per parameter input
      std::size_t combos = 1;
      bool fits = true;
    };
    std::vector<recipe> recipes(pr.strategies[j].size());
    for (std::size_t x = 0; x < recipes.size(); ++x) {
      recipe& r = recipes[x];
      for (int i = 0; i < op.in.size(); ++i) {
        const int row = tb.row_of[j][x][i];
        r.row.push_back(row >= 0 && folded_op[i] < 0 ? &tb.rows[static_cast<std::size_t>(op.in[i])][static_cast<std::size_t>(row)] : nullptr);
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
      for (std::size_t x = 0; x < pr.strategies[j].size(); ++x) {
        const strategy& s = pr.strategies[j][x];
        const recipe& r = recipes[x];
        if (!r.fits) continue;
        // the step's time and memory up to this operator, summed as the pairs are
        double compute = s.compute_s, comm = 0, memory = s.saved_bytes;
        bool fits = true;
        for (int i = 0; i < op.in.size() && fits; ++i) {
          if (best[i] != nullptr) {
            const std::size_t c = static_cast<std::size_t>(tb.row_of[j][x][i]);
            if (best[i]->strategy[c] < 0) fits = false;
            const deferred_cost& b = best[i]->cost[c];
            compute += b.compute, comm += b.comm, memory += b.memory;
          } else if (r.row[i] != nullptr) {
            const double e = r.row[i]->seconds[h[i]];
            if (!(e < std::numeric_limits<double>::infinity())) fits = false;
            comm += e;
          }
        }
        if (!fits) continue;
        std::vector<label>& pairs = next.states[next.at(kept + out_stride * static_cast<std::uint64_t>(tb.out_index[j][x]))].labels;
        for (std::size_t li = 0; li < st.labels.size(); ++li)
          for (std::size_t combo = 0; combo < r.combos; ++combo) {
            const label& prev = st.labels[li];
            double l_compute = compute + prev.compute, l_comm = comm + prev.comm, l_memory = memory + prev.memory;
            svec<int, ops::max_op_inputs> rest{};
            collective_counts rest_collectives{};
            std::size_t left = combo;
            for (int q = 0; q < r.param.size(); ++q) {
              const std::vector<rest_choice>& list = *r.rests[q];
              const rest_choice& rc = time_only ? fastest_rest(list) : list[left % list.size()];
              left /= list.size();
              l_comm += rc.comm;
              l_memory += rc.memory;
              rest_collectives += rc.collectives;
              rest.push_back(rc.rest);
            }
            if (!(l_memory <= cm.memory_budget)) {
              pruned = true;
              continue;
            }
            const double l_time = l_compute + l_comm;
            if (time_only && !pairs.empty() &&
                !(l_time < pairs[0].time() || (l_time == pairs[0].time() && l_memory < pairs[0].memory)))
              continue;  // not better than the state's pair: never made
            label l{};
            l.compute = l_compute, l.comm = l_comm, l.memory = l_memory;
            l.prev_state = static_cast<int>(si);
            l.prev_label = static_cast<int>(li);
            l.strategy = static_cast<int>(x);
            l.collectives = prev.collectives;
            for (int i = 0; i < op.in.size(); ++i) {
              l.rest.push_back(-1);
              l.folded.push_back(-1);
              if (best[i] != nullptr) {
                const std::size_t c = static_cast<std::size_t>(tb.row_of[j][x][i]);
                l.collectives += best[i]->cost[c].collectives;
                l.folded[i] = best[i]->strategy[c];
              } else if (r.row[i] != nullptr) {
                l.collectives += r.row[i]->collectives[h[i]];
              }
            }
            for (int q = 0; q < r.param.size(); ++q) l.rest[r.param[q]] = rest[q];
            l.collectives += rest_collectives;
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
  sol.collectives = end.collectives;
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
          svec<int, ops::max_op_inputs> fastest{};
          for (int fi = 0; fi < g.ops[fj].in.size(); ++fi) fastest.push_back(-1);
          record(sol, g, pr, tb, fj, static_cast<std::size_t>(l.folded[i]), fastest);
        }
    }
    si = l.prev_state;
    li = l.prev_label;
  }
  return sol;
}

}  // namespace search_detail

/// The best assignment of g's strategies and rest layouts under cm (and the pins), exact.
/// over_budget: min_memory is the smallest budget some assignment meets.
constexpr solution search(const graph& g, const cost_model& cm = {}, const pins& p = {}) {
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
    for (const strategy& s : pr.strategies[j]) {
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
