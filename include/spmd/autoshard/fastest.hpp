// spmd/autoshard/fastest.hpp — the search without a memory budget: one pair a state, layers as
// arrays indexed by the states' codes, and runs of operators that are the same program (a
// model's identical blocks) walked once and composed through a table (docs/auto.md,
// "Identical blocks are walked once").
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "spmd/autoshard/deferral.hpp"
#include "spmd/autoshard/graph.hpp"
#include "spmd/autoshard/solution.hpp"
#include "spmd/autoshard/tables.hpp"

namespace spmd::autoshard::search_detail {

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

/// A strategy of the operator a transition runs, as its inner loop reads it.
struct pick {
  double compute = 0, saved = 0;
  std::uint64_t out = 0;  // its output's held layout
  bool usable = true;     // false: a parameter with no rest layout
  int read[ops::max_op_inputs]{};            // per input: its row (or -1)
  const double* row[ops::max_op_inputs]{};   // per input a state holds: the row's seconds
  int rests = 0;                             // parameter inputs, in order
  double rest_comm[ops::max_op_inputs]{}, rest_memory[ops::max_op_inputs]{};
};

/// Whether two tensors' rows (their readers' moves from each held layout) are equal.
constexpr bool same_rows(const tables& tb, int ts, int tu) {
  const std::vector<int>& rs = tb.rows[static_cast<std::size_t>(ts)];
  const std::vector<int>& ru = tb.rows[static_cast<std::size_t>(tu)];
  if (rs.size() != ru.size() || tb.held[static_cast<std::size_t>(ts)] != tb.held[static_cast<std::size_t>(tu)]) return false;
  for (std::size_t c = 0; c < rs.size(); ++c)
    if (rs[c] != ru[c] && tb.seconds[static_cast<std::size_t>(rs[c])] != tb.seconds[static_cast<std::size_t>(ru[c])]) return false;
  return true;
}

/// Whether two operators look the same to the dynamic program: equal strategies (compute,
/// saved bytes, layouts), reads, outputs and parameters' rest choices.
constexpr bool same_op(const graph& g, const prepared& pr, const tables& tb, std::size_t js, std::size_t ju) {
  const op_node& os = g.ops[js];
  const op_node& ou = g.ops[ju];
  if (os.in.size() != ou.in.size()) return false;
  const std::vector<strategy>& ss = pr.strategies(js);
  const std::vector<strategy>& su = pr.strategies(ju);
  if (ss.size() != su.size() || tb.out_index[js] != tb.out_index[ju] || !(tb.row_of[js] == tb.row_of[ju])) return false;
  const bool one_list = pr.list_of[js] == pr.list_of[ju];  // the same strategies, made once
  for (std::size_t x = 0; x < ss.size(); ++x) {
    if (!one_list && (ss[x].compute_s != su[x].compute_s || ss[x].saved_bytes != su[x].saved_bytes ||
                      ss[x].out_id != su[x].out_id || !(ss[x].in_id == su[x].in_id) || !(ss[x].grad_id == su[x].grad_id)))
      return false;
    for (int i = 0; i < os.in.size(); ++i) {
      const int cs = tb.choices_of[js][x][i], cu = tb.choices_of[ju][x][i];
      if ((cs < 0) != (cu < 0)) return false;
      if (cs == cu) continue;  // one front (parameters read alike share it), or none
      const std::vector<rest_choice>& ls = tb.choices[static_cast<std::size_t>(cs)];
      const std::vector<rest_choice>& lu = tb.choices[static_cast<std::size_t>(cu)];
      if (ls.size() != lu.size()) return false;
      for (std::size_t r = 0; r < ls.size(); ++r)
        if (ls[r].comm != lu[r].comm || ls[r].memory != lu[r].memory || ls[r].rest != lu[r].rest) return false;
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
  const std::vector<std::vector<int>> live = states_after(g, d);
  for (std::size_t j = 0; j < no; ++j) {
    dg.push_back(digits_of(live[j], tb));
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
    // each strategy as the loop below reads it: flat, through pointers (in the compiler's
    // evaluator a vector's operator[] is a call, and this loop runs states × strategies)
    const int n_in = op.in.size();
    std::vector<pick> picks(pr.strategies(j).size());
    for (std::size_t x = 0; x < picks.size(); ++x) {
      pick& k = picks[x];
      const strategy& s = pr.strategies(j)[x];
      k.compute = s.compute_s, k.saved = s.saved_bytes;
      k.out = static_cast<std::uint64_t>(tb.out_index[j][x]);
      for (int i = 0; i < n_in; ++i) {
        const int row = tb.row_of[j][x][i];
        k.read[i] = row;
        if (row >= 0 && folded_op[i] < 0) k.row[i] = tb.row(op.in[i], row).data();
        const int choice = tb.choices_of[j][x][i];
        if (choice < 0) continue;
        const std::vector<rest_choice>& list = tb.choices[static_cast<std::size_t>(choice)];
        if (list.empty()) {
          k.usable = false;
          continue;
        }
        const rest_choice& r = fastest_rest(list);  // summed as the general program does
        k.rest_comm[k.rests] = r.comm, k.rest_memory[k.rests] = r.memory;
        ++k.rests;
      }
    }
    const pick* const first_pick = picks.data();
    const std::size_t n_picks = picks.size();
    const std::uint64_t* const stride = before.stride.data();
    const std::uint64_t* const radix = before.radix.data();
    const cell* const in = from.data();
    cell* const out = to.data();
    for (std::size_t code = 0; code < from.size(); ++code) {
      const cell& st = in[code];
      if (st.strategy == -2) continue;
      const int* best_strategy[ops::max_op_inputs]{};  // per deferred input: its best_deferred's
      const deferred_cost* best_cost[ops::max_op_inputs]{};
      std::size_t h[ops::max_op_inputs]{};
      for (int i = 0; i < n_in; ++i) {
        if (folded_op[i] >= 0) {
          const deferred_best& b = memos[j][static_cast<std::size_t>(i)].get(g, pr, tb, static_cast<std::size_t>(folded_op[i]), before, code);
          best_strategy[i] = b.strategy.data(), best_cost[i] = b.cost.data();
        }
        if (slot[i] >= 0) h[i] = static_cast<std::size_t>(code / stride[slot[i]] % radix[slot[i]]);
      }
      std::uint64_t kept = 0;
      if (entry >= 0) kept = code / stride[entry_slot] % radix[entry_slot] * exits;
      else
        for (std::size_t q = 0; q < before.live.size(); ++q)
          if (carried_stride[q] != 0) kept += carried_stride[q] * (code / stride[q] % radix[q]);
      const std::uint64_t out_place = entry >= 0 ? 1 : out_stride;
      for (std::size_t x = 0; x < n_picks; ++x) {
        const pick& k = first_pick[x];
        if (!k.usable) continue;
        double compute = k.compute, comm = 0, memory = k.saved;
        bool fits = true;
        for (int i = 0; i < n_in && fits; ++i) {
          if (best_cost[i] != nullptr) {
            const int c = k.read[i];
            if (best_strategy[i][c] < 0) fits = false;
            const deferred_cost& b = best_cost[i][c];
            compute += b.compute, comm += b.comm, memory += b.memory;
          } else if (k.row[i] != nullptr) {
            const double e = k.row[i][h[i]];
            if (!(e < unreachable)) fits = false;
            comm += e;
          }
        }
        if (!fits) continue;
        double l_compute = compute + st.compute, l_comm = comm + st.comm, l_memory = memory + st.memory;
        for (int q = 0; q < k.rests; ++q) l_comm += k.rest_comm[q], l_memory += k.rest_memory[q];
        cell& into = out[kept + out_place * k.out];
        const double l_time = l_compute + l_comm;  // cell::beats, written out (it runs per pair)
        if (into.strategy == -2 || l_time < into.compute + into.comm || (l_time == into.compute + into.comm && l_memory < into.memory))
          into = cell{l_compute, l_comm, l_memory, code, static_cast<int>(x)};
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
  const auto count_states = [&](const std::vector<cell>& cells) {  // through a pointer, as the loops above
    const cell* const c = cells.data();
    for (std::size_t i = 0, n = cells.size(); i < n; ++i) sol.states += c[i].strategy != -2;
  };
  for (std::size_t k = 1; k <= no; ++k) count_states(layers[k]);
  for (const segment& s : runs) count_states(s.table);
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
  // back along the chosen states: each operator's strategy and its deferred inputs' (the
  // best at that state); a run's operators are read from its first run's walk (the same
  // program: `shift` operators earlier)
  const auto account = [&](std::size_t j, std::size_t shift, std::size_t x, std::uint64_t prev) {
    const std::size_t jw = j - shift;  // the walked operator
    const op_node& op = g.ops[jw];
    record(sol, g, pr, tb, j, x, {});
    for (int i = 0; i < op.in.size(); ++i) {
      const tensor_node& tn = g.tensors[static_cast<std::size_t>(op.in[i])];
      if (tn.kind != tensor_kind::activation || d.reader[static_cast<std::size_t>(tn.producer)] < 0) continue;
      const std::size_t fj = static_cast<std::size_t>(tn.producer), row = static_cast<std::size_t>(tb.row_of[jw][x][i]);
      const deferred_best& b = memos[jw][static_cast<std::size_t>(i)].get(g, pr, tb, fj, dg[jw], prev);
      record(sol, g, pr, tb, fj + shift, static_cast<std::size_t>(b.strategy[row]), {});
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

}  // namespace spmd::autoshard::search_detail
