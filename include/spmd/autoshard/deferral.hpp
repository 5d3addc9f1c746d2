// spmd/autoshard/deferral.hpp — operators chosen with their only reader, and the states'
// numbering: which activations a layer's state holds, as the digits of one code, and each
// deferred operator's best strategy per read, remembered by its inputs' layouts
// (docs/auto.md, "Deferred operators").
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "spmd/autoshard/graph.hpp"
#include "spmd/autoshard/solution.hpp"
#include "spmd/autoshard/tables.hpp"

namespace spmd::autoshard::search_detail {

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

/// The tensors in the state after each operator j: activations made at or before j by an
/// operator that is not deferred, held for an operator after j; in tensor order. One sweep
/// over the operators (a state holds a few tensors; a scan of every tensor per operator
/// would make a 48-block model cost the square of its blocks).
constexpr std::vector<std::vector<int>> states_after(const graph& g, const deferral& d) {
  const std::size_t no = g.ops.size();
  std::vector<std::vector<int>> out(no);
  std::vector<int> live;
  for (std::size_t j = 0; j < no; ++j) {
    const int t = g.ops[j].out;
    const tensor_node& tn = g.tensors[static_cast<std::size_t>(t)];
    if (tn.kind == tensor_kind::activation && tn.producer == static_cast<int>(j) && d.reader[j] < 0) {
      std::size_t at = live.size();  // in tensor order
      while (at > 0 && live[at - 1] > t) --at;
      live.insert(live.begin() + static_cast<std::ptrdiff_t>(at), t);
    }
    std::vector<int> kept;
    for (const int u : live)
      if (d.last_live[static_cast<std::size_t>(u)] > static_cast<int>(j)) kept.push_back(u);
    live = kept;
    out[j] = live;
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

/// A deferred operator's best strategy for each way its reader reads its output (rows[t][c]),
/// given the layouts its own activation inputs were made in.
/// One way a deferred operator can run for one read of its output when memory counts (a
/// budget): its strategy and its parameters' rest layouts, and what they cost, its output's
/// move to the read included.
struct deferred_option {
  double compute = 0, comm = 0, memory = 0;
  int strategy = -1;
  std::uint32_t rest = 0;  // per input fi, bits 8·fi..: a parameter's rest choice + 1 (0: none)
  constexpr double time() const { return compute + comm; }
};

struct deferred_best {
  std::vector<deferred_cost> cost;  // [c]
  std::vector<int> strategy;        // [c]: -1 where none fits
  std::vector<std::vector<deferred_option>> front{};  // [c], with a budget: the options no other beats in time and memory
};

/// With a budget, a deferred operator is chosen with its reader as without one, but what the
/// reader carries per read is the Pareto set of the deferred operator's options (every
/// strategy, with every combination of its parameters' rest fronts) rather than the fastest:
/// exact for the same reason (nothing but the reader sees the deferred operator's choice), and
/// a dominated option can never be part of the best step under any budget.
constexpr std::vector<std::vector<deferred_option>> deferred_fronts(const graph& g, const prepared& pr, const tables& tb,
                                                                    std::size_t fj, const digits& dg, std::uint64_t code) {
  const op_node& fop = g.ops[fj];
  const std::vector<strategy>& list = pr.strategies(fj);
  std::vector<deferred_option> all;  // per (strategy, rest combination): without the output's move
  for (std::size_t fx = 0; fx < list.size(); ++fx) {
    deferred_option base{list[fx].compute_s, 0, list[fx].saved_bytes, static_cast<int>(fx), 0};
    bool ok = true;
    svec<const std::vector<rest_choice>*, ops::max_op_inputs> rests{};
    svec<int, ops::max_op_inputs> rest_input{};
    std::size_t combos = 1;
    for (int fi = 0; fi < fop.in.size() && ok; ++fi) {
      const int row = tb.row_of[fj][fx][fi];
      if (row >= 0) {
        const double e = tb.row(fop.in[fi], row)[static_cast<std::size_t>(dg.at(code, dg.slot_of(fop.in[fi])))];
        if (!(e < unreachable)) ok = false;
        base.comm += e;
      } else if (tb.choices_of[fj][fx][fi] >= 0) {
        const std::vector<rest_choice>& r = tb.choices[static_cast<std::size_t>(tb.choices_of[fj][fx][fi])];
        if (r.empty()) ok = false;
        rests.push_back(&r);
        rest_input.push_back(fi);
        combos *= r.size();
      }
    }
    if (!ok) continue;
    for (std::size_t combo = 0; combo < combos; ++combo) {
      deferred_option o = base;
      std::size_t left = combo;
      for (int q = 0; q < rests.size(); ++q) {
        const rest_choice& rc = (*rests[q])[left % rests[q]->size()];
        left /= rests[q]->size();
        o.comm += rc.comm, o.memory += rc.memory;
        o.rest |= static_cast<std::uint32_t>(rc.rest + 1) << (8 * rest_input[q]);
      }
      all.push_back(o);
    }
  }
  const std::size_t t = static_cast<std::size_t>(fop.out);
  std::vector<std::vector<deferred_option>> fronts(tb.rows[t].size());
  for (std::size_t c = 0; c < fronts.size(); ++c) {
    const std::vector<double>& edge = tb.row(fop.out, static_cast<int>(c));
    std::vector<deferred_option> read;
    for (const deferred_option& o : all) {
      const double e = edge[static_cast<std::size_t>(tb.out_index[fj][static_cast<std::size_t>(o.strategy)])];
      if (!(e < unreachable)) continue;
      deferred_option m = o;
      m.comm += e;
      read.push_back(m);
    }
    for (std::size_t a = 0; a < read.size(); ++a) {
      bool beaten = false;
      for (std::size_t b = 0; b < read.size() && !beaten; ++b)
        beaten = (read[b].time() < read[a].time() && read[b].memory <= read[a].memory) ||
                 (read[b].time() <= read[a].time() && read[b].memory < read[a].memory) ||
                 (read[b].time() == read[a].time() && read[b].memory == read[a].memory && b < a);
      if (!beaten) fronts[c].push_back(read[a]);
    }
  }
  return fronts;
}

/// A deferred operator's strategy as best_deferred reads it: its inputs' terms in input
/// order (the sums keep that order), flat, through pointers.
struct deferred_pick {
  struct term {
    const double* row = nullptr;  // an activation input: its row's seconds
    int slot = -1;                // and its place in the state's digits
    double rest_comm = 0, rest_memory = 0;  // a parameter input: its fastest rest layout
  };
  double compute = 0, saved = 0;
  int out = 0;          // its output's held layout
  bool usable = true;   // false: a parameter with no rest layout
  int terms = 0;
  term t[ops::max_op_inputs]{};
};

constexpr std::vector<deferred_pick> deferred_picks(const graph& g, const prepared& pr, const tables& tb, std::size_t fj,
                                                    const digits& dg) {
  const op_node& fop = g.ops[fj];
  std::vector<deferred_pick> picks(pr.strategies(fj).size());
  for (std::size_t fx = 0; fx < picks.size(); ++fx) {
    deferred_pick& k = picks[fx];
    const strategy& fs = pr.strategies(fj)[fx];
    k.compute = fs.compute_s, k.saved = fs.saved_bytes, k.out = tb.out_index[fj][fx];
    for (int fi = 0; fi < fop.in.size(); ++fi) {
      const int row = tb.row_of[fj][fx][fi];
      if (row >= 0) {
        k.t[k.terms++] = {tb.row(fop.in[fi], row).data(), dg.slot_of(fop.in[fi]), 0, 0};
      } else if (tb.choices_of[fj][fx][fi] >= 0) {
        const std::vector<rest_choice>& list = tb.choices[static_cast<std::size_t>(tb.choices_of[fj][fx][fi])];
        if (list.empty()) {
          k.usable = false;
          continue;
        }
        const rest_choice& r = fastest_rest(list);
        k.t[k.terms++] = {nullptr, -1, r.comm, r.memory};
      }
    }
  }
  return picks;
}

/// `base` is scratch of picks.size() (kept by the caller: each call would otherwise make it).
constexpr deferred_best best_deferred(const std::vector<deferred_pick>& picks, const tables& tb, int out_tensor,
                                      const digits& dg, std::uint64_t code, std::vector<deferred_cost>& base) {
  const std::size_t n = picks.size();
  const deferred_pick* const p0 = picks.data();
  const std::uint64_t* const stride = dg.stride.data();
  const std::uint64_t* const radix = dg.radix.data();
  deferred_cost* const b0 = base.data();
  for (std::size_t fx = 0; fx < n; ++fx) {
    const deferred_pick& k = p0[fx];
    deferred_cost c{k.compute, 0, k.saved, k.usable};
    for (int q = 0; q < k.terms && c.ok; ++q) {
      const deferred_pick::term& t = k.t[q];
      if (t.row != nullptr) {
        const double e = t.row[code / stride[t.slot] % radix[t.slot]];
        if (!(e < unreachable)) c.ok = false;
        c.comm += e;
      } else {
        c.comm += t.rest_comm, c.memory += t.rest_memory;
      }
    }
    b0[fx] = c;
  }
  // the reader's each read c: the strategy with the least time (then memory), its output
  // moved to c; summed and compared exactly as a pair is (compute + (comm + edge)). The
  // loop reads through pointers: it runs reads × strategies per distinct input layouts.
  std::vector<double> base_time(n, 0);
  double* const time0 = base_time.data();
  for (std::size_t fx = 0; fx < n; ++fx) time0[fx] = b0[fx].compute + b0[fx].comm;
  deferred_best out{};
  const std::size_t reads = tb.rows[static_cast<std::size_t>(out_tensor)].size();
  out.cost.reserve(reads);  // push_back, not resize: clang 14 cannot default-fill ints in a constant expression
  out.strategy.reserve(reads);
  for (std::size_t c = 0; c < reads; ++c) {
    const double* const edge_of = tb.row(out_tensor, static_cast<int>(c)).data();
    double best_time = 0, best_memory = 0;
    int bp = -1;
    for (std::size_t fx = 0; fx < n; ++fx) {
      if (!b0[fx].ok) continue;
      const double edge = edge_of[p0[fx].out];
      if (!(edge < unreachable)) continue;
      const double time = time0[fx] + edge;
      if (bp < 0 || time < best_time || (time == best_time && b0[fx].memory < best_memory)) {
        bp = static_cast<int>(fx);
        best_time = b0[fx].compute + (b0[fx].comm + edge);
        best_memory = b0[fx].memory;
      }
    }
    deferred_cost b{};
    if (bp >= 0) {
      b = b0[bp];
      b.comm += edge_of[p0[bp].out];
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
  std::vector<deferred_pick> picks{};  // made at the first miss
  std::vector<deferred_cost> scratch{};  // best_deferred's, picks.size()
  bool pareto = false;                   // with a budget: the fronts too (deferred_fronts)

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
      if (picks.empty()) picks = deferred_picks(g, pr, tb, fj, dg), scratch.resize(picks.size());
      found.assign(1, best_deferred(picks, tb, g.ops[fj].out, dg, code, scratch));
      if (pareto) found[0].front = deferred_fronts(g, pr, tb, fj, dg, code);
      return found[0];
    }
    std::size_t k = 0, mult = 1;
    const std::uint64_t* const stride = dg.stride.data();
    const std::uint64_t* const radix = dg.radix.data();
    for (const int q : place) {  // the inputs' layouts, mixed radix (digits::at, written out)
      k += mult * static_cast<std::size_t>(code / stride[q] % radix[q]);
      mult *= static_cast<std::size_t>(radix[q]);
    }
    if (at[k] < 0) {
      if (picks.empty()) picks = deferred_picks(g, pr, tb, fj, dg), scratch.resize(picks.size());
      found.push_back(best_deferred(picks, tb, g.ops[fj].out, dg, code, scratch));
      if (pareto) found.back().front = deferred_fronts(g, pr, tb, fj, dg, code);
      at[k] = static_cast<int>(found.size()) - 1;
    }
    return found[static_cast<std::size_t>(at[k])];
  }
};

/// Operator j run with strategy x: its output's layout, its inputs' reads and gradients, and
/// the layouts of its parameters (rest: per input, the choice; -1: the fastest) and data.
constexpr void record(solution& sol, const graph& g, const prepared& pr, const tables& tb, std::size_t j, std::size_t x,
                      const svec<int, ops::max_op_inputs>& rest) {
  const strategy& s = pr.strategies(j)[x];
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

/// The collectives of the step a solution records, by kind: each operator's reads (an
/// activation moved from the layout its operator made, a parameter from its rest layout) and
/// their gradients moved back, each as the plan that runs counts them. Both programs count
/// them here, once, along the chosen step, rather than carrying them in every pair.
constexpr collective_counts count_collectives(const solution& sol, const graph& g, prepared& pr, move_costs& cache,
                                              const cost_model& cm) {
  collective_counts n{};
  for (std::size_t j = 0; j < g.ops.size(); ++j) {
    const op_node& op = g.ops[j];
    for (int i = 0; i < op.in.size(); ++i) {
      const std::size_t t = static_cast<std::size_t>(op.in[i]);
      const tensor_node& tn = g.tensors[t];
      if (tn.kind == tensor_kind::data) continue;
      const double bytes = tn.bytes();
      const int held = pr.ids.id(sol.layouts[t]), read = pr.ids.id(sol.reads[j][i]), grad = pr.ids.id(sol.grads[j][i]);
      n += cache.get(pr.ids, held, read, bytes, cm).collectives;
      n += cache.get(pr.ids, grad, tn.kind == tensor_kind::param ? held : pr.ids.as_replicate(held), bytes, cm).collectives;
    }
  }
  return n;
}

}  // namespace spmd::autoshard::search_detail
