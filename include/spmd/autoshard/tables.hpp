// spmd/autoshard/tables.hpp — what the search looks up, made once: each operator's strategies
// (what its forward and backward cost and read), each activation's held layouts, every move
// from a held layout to a read as a row, each parameter read's Pareto set of rest layouts
// (docs/auto.md). Operators and tensors equal to earlier ones take theirs.
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "spmd/autoshard/cost.hpp"
#include "spmd/autoshard/graph.hpp"
#include "spmd/autoshard/layout_ids.hpp"
#include "spmd/autoshard/solution.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/ops/propagate.hpp"

namespace spmd::autoshard::search_detail {

/// A move that cannot happen (a Partial read from a layout without it): infinite seconds.
/// A variable, not numeric_limits' function: the hot loops compare with it per pair, and in
/// the compiler's evaluator each call costs.
inline constexpr double unreachable = std::numeric_limits<double>::infinity();

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

/// What the search needs of a graph, precomputed: strategies per operator, readers per tensor,
/// every layout as an id.
struct prepared {
  std::vector<std::vector<strategy>> lists;  // the distinct operators' strategies
  std::vector<int> list_of;                  // per operator: into lists (equal operators share one)
  std::vector<int> last_reader;                   // per tensor
  std::vector<std::vector<int>> rests;            // per tensor (parameters): layout ids
  layout_ids ids;
  search_error error = search_error::none;
  int bad_op = -1;

  /// Operator j's strategies.
  constexpr const std::vector<strategy>& strategies(std::size_t j) const {
    return lists[static_cast<std::size_t>(list_of[j])];
  }
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
      out.list_of.push_back(out.list_of[twin]);
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
    out.list_of.push_back(static_cast<int>(out.lists.size()));
    out.lists.push_back(list);
  }
  return out;
}

constexpr int index_of(std::vector<int>& list, int id) {
  const int* const at = list.data();
  const std::size_t n = list.size();
  for (std::size_t i = 0; i < n; ++i)
    if (at[i] == id) return static_cast<int>(i);
  list.push_back(id);
  return static_cast<int>(n);
}

/// A parameter's choice for one strategy's input: a rest layout, with the moves there and
/// back and what it holds.
struct rest_choice {
  double comm = 0, memory = 0;
  int rest = -1;
};

/// Everything the dynamic program looks up, computed once: each activation's layouts (those
/// its producer's strategies make), the cost of every (held layout, reader's layout) move,
/// and each parameter input's Pareto set of rest layouts.
///
/// A row is one way an activation is read: per held layout h, the seconds of the move there
/// and of its gradient's move back, infinite where the read's Partial does not fit. Tensors
/// read alike (a model's identical blocks) share one row. The rows hold times only: the
/// collectives are counted once, along the chosen step (count_collectives).
struct tables {
  std::vector<std::vector<int>> held;                                  // [t][h]: layout ids
  std::vector<std::vector<int>> out_index;                             // [j][x]: the h of op j's output
  std::vector<std::vector<svec<int, ops::max_op_inputs>>> row_of;      // [j][x][i]: into rows[t], or -1
  std::vector<std::vector<int>> rows;                                  // [t][c]: into seconds
  std::vector<std::vector<double>> seconds;                            // [row][h]
  std::vector<std::vector<svec<int, ops::max_op_inputs>>> choices_of;  // [j][x][i]: into choices, or -1
  std::vector<std::vector<rest_choice>> choices;

  /// Read c of tensor t: the seconds from each held layout.
  constexpr const std::vector<double>& row(int t, int c) const {
    return seconds[static_cast<std::size_t>(rows[static_cast<std::size_t>(t)][static_cast<std::size_t>(c)])];
  }
};

/// A parameter read as `want` whose gradient comes as `grad`: its rest layouts that no other
/// beats in both the moves' time and the memory held.
constexpr std::vector<rest_choice> rest_front(prepared& pr, std::size_t t, int want, int grad, double bytes,
                                              const cost_model& cm, move_costs& cache) {
  const std::vector<int>& rests = pr.rests[t];
  std::vector<rest_choice> all(rests.size());
  rest_choice* const at = all.data();  // through pointers: the front below compares every pair
  std::size_t n = 0;
  for (std::size_t r = 0; r < rests.size(); ++r) {
    const int rest = rests[r];
    const transfer there = cache.get(pr.ids, rest, want, bytes, cm);
    const transfer back = cache.get(pr.ids, grad, rest, bytes, cm);
    if (!there.ok || !back.ok) continue;
    at[n++] = {there.seconds + back.seconds, (2 + cm.optimizer_states) * bytes * pr.ids.fraction(rest), static_cast<int>(r)};
  }
  std::vector<rest_choice> front;
  for (std::size_t a = 0; a < n; ++a) {
    bool beaten = false;
    const double comm = at[a].comm, memory = at[a].memory;
    for (std::size_t b = 0; b < n && !beaten; ++b)
      beaten = (at[b].comm < comm && at[b].memory <= memory) || (at[b].comm <= comm && at[b].memory < memory) ||
               (at[b].comm == comm && at[b].memory == memory && b < a);
    if (!beaten) front.push_back(at[a]);
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
    for (const strategy& s : pr.strategies(j))
      tb.out_index[j].push_back(index_of(tb.held[static_cast<std::size_t>(g.ops[j].out)], s.out_id));
  // the readers' distinct (layout, gradient layout) per activation, each packed in one
  // integer (found by a scan through a pointer: a vector's operator[] is a call in the
  // compiler's evaluator); per parameter, the distinct ones its readers read it in, with
  // their rest choices
  const auto read_key = [](int want, int grad) { return static_cast<std::uint64_t>(want) << 32 | static_cast<std::uint32_t>(grad); };
  const auto find_key = [](const std::vector<std::uint64_t>& keys, std::uint64_t k) {
    const std::uint64_t* const p = keys.data();
    const std::size_t n = keys.size();
    for (std::size_t c = 0; c < n; ++c)
      if (p[c] == k) return static_cast<int>(c);
    return -1;
  };
  std::vector<std::vector<std::uint64_t>> reads(nt);  // [t][c]: (want, grad)
  std::vector<std::vector<std::uint64_t>> param_reads(nt);  // [t][k]: (want, grad)
  std::vector<std::vector<int>> param_choice(nt);          // [t][k]: into choices
  // a rest front depends on the tensor only through its rest layouts and bytes: parameters
  // read alike (a model's identical blocks) share one, found by (want, grad) and compared
  struct front_of {
    std::uint64_t read;
    double bytes;
    std::size_t like;  // a tensor with these rest layouts
    int choice;
  };
  std::vector<front_of> fronts;
  slot_table front_index;
  const auto front_hash = [](std::uint64_t read, double bytes) {
    return (read ^ (read >> 29)) * 7919u + static_cast<std::uint64_t>(bytes) % 65521u;
  };
  for (std::size_t j = 0; j < no; ++j) {
    const op_node& op = g.ops[j];
    tb.row_of[j].reserve(pr.strategies(j).size());
    tb.choices_of[j].reserve(pr.strategies(j).size());
    for (std::size_t x = 0; x < pr.strategies(j).size(); ++x) {
      const strategy& s = pr.strategies(j)[x];
      svec<int, ops::max_op_inputs> rows{}, choices{};
      for (int i = 0; i < op.in.size(); ++i) {
        const std::size_t t = static_cast<std::size_t>(op.in[i]);
        const tensor_node& tn = g.tensors[t];
        int row = -1, choice = -1;
        if (tn.kind == tensor_kind::activation) {
          const std::uint64_t k = read_key(s.in_id[i], s.grad_id[i]);
          row = find_key(reads[t], k);
          if (row < 0) {
            reads[t].push_back(k);
            row = static_cast<int>(reads[t].size()) - 1;
          }
        } else if (tn.kind == tensor_kind::param) {
          const std::uint64_t k = read_key(s.in_id[i], s.grad_id[i]);
          const int seen = find_key(param_reads[t], k);
          if (seen >= 0) {
            choice = param_choice[t][static_cast<std::size_t>(seen)];
          } else {
            const double bytes = tn.bytes();
            const auto same = [&](int e) {
              const front_of& f = fronts[static_cast<std::size_t>(e)];
              return f.read == k && f.bytes == bytes && pr.rests[f.like] == pr.rests[t];
            };
            std::size_t at = front_index.find(front_hash(k, bytes), same);
            if (front_index.slots[at] >= 0) {
              choice = fronts[static_cast<std::size_t>(front_index.slots[at])].choice;
            } else {
              tb.choices.push_back(rest_front(pr, t, s.in_id[i], s.grad_id[i], bytes, cm, cache));
              choice = static_cast<int>(tb.choices.size()) - 1;
              front_index.reserve_one([&](int e) {
                const front_of& f = fronts[static_cast<std::size_t>(e)];
                return front_hash(f.read, f.bytes);
              });
              at = front_index.find(front_hash(k, bytes), same);
              front_index.slots[at] = static_cast<int>(fronts.size());
              ++front_index.count;
              fronts.push_back({k, bytes, t, choice});
            }
            param_reads[t].push_back(k);
            param_choice[t].push_back(choice);
          }
        }
        rows.push_back(row);
        choices.push_back(choice);
      }
      tb.row_of[j].push_back(rows);
      tb.choices_of[j].push_back(choices);
    }
  }
  // a row is the same for every tensor with the same held layouts and bytes, read the same
  // way (a model's identical blocks, and like tensors within one): made once per (class of
  // held layouts, bytes, read), found by hash
  std::vector<int> held_class(nt, -1);  // tensors with equal held layouts share a class
  std::vector<std::size_t> class_of;    // a class's first tensor
  slot_table class_index;
  const auto held_hash = [&](std::size_t t) {
    std::uint64_t h = tb.held[t].size();
    for (const int id : tb.held[t]) h = (h * 31u + static_cast<std::uint64_t>(id)) & 0xFFFFFFu;
    return h;
  };
  for (std::size_t t = 0; t < nt; ++t) {
    if (reads[t].empty()) continue;
    const auto same = [&](int e) { return tb.held[class_of[static_cast<std::size_t>(e)]] == tb.held[t]; };
    std::size_t at = class_index.find(held_hash(t), same);
    if (class_index.slots[at] < 0) {
      class_index.reserve_one([&](int e) { return held_hash(class_of[static_cast<std::size_t>(e)]); });
      at = class_index.find(held_hash(t), same);
      class_index.slots[at] = static_cast<int>(class_of.size());
      ++class_index.count;
      class_of.push_back(t);
    }
    held_class[t] = class_index.slots[at];
  }
  struct row_key {
    int cls;
    double bytes;
    std::uint64_t read;
  };
  std::vector<row_key> made;  // per row (tb.seconds)
  slot_table row_index;
  const auto row_hash = [](const row_key& k) {
    return (k.read ^ (k.read >> 29)) * 7919u + static_cast<std::uint64_t>(k.cls) * 131u + static_cast<std::uint64_t>(k.bytes) % 65521u;
  };
  for (std::size_t t = 0; t < nt; ++t) {
    if (reads[t].empty()) continue;
    const double bytes = g.tensors[t].bytes();
    const std::size_t n_held = tb.held[t].size();
    std::vector<int> back_to;  // per held layout: where its gradient goes (Partial as Replicate), made at a new row
    for (std::size_t c = 0; c < reads[t].size(); ++c) {
      const row_key key{held_class[t], bytes, reads[t][c]};
      const auto same = [&](int e) {
        const row_key& m = made[static_cast<std::size_t>(e)];
        return m.cls == key.cls && m.bytes == key.bytes && m.read == key.read;
      };
      std::size_t at = row_index.find(row_hash(key), same);
      if (row_index.slots[at] >= 0) {
        tb.rows[t].push_back(row_index.slots[at]);
        continue;
      }
      if (back_to.empty())
        for (std::size_t h = 0; h < n_held; ++h) back_to.push_back(pr.ids.as_replicate(tb.held[t][h]));
      const int want = static_cast<int>(reads[t][c] >> 32), grad = static_cast<int>(reads[t][c] & 0xFFFFFFFFu);
      const bool wants_partial = !partial_fits(pr.ids[want], nullptr);  // else every held layout fits
      std::vector<double> row(n_held, unreachable);
      for (std::size_t h = 0; h < n_held; ++h) {
        const int from = tb.held[t][h];
        if (wants_partial && !partial_fits(pr.ids[want], &pr.ids[from])) continue;
        const transfer there = cache.get(pr.ids, from, want, bytes, cm);
        const transfer back = cache.get(pr.ids, grad, back_to[h], bytes, cm);
        if (there.ok && back.ok) row[h] = there.seconds + back.seconds;
      }
      row_index.reserve_one([&](int e) { return row_hash(made[static_cast<std::size_t>(e)]); });
      at = row_index.find(row_hash(key), same);
      row_index.slots[at] = static_cast<int>(tb.seconds.size());
      ++row_index.count;
      tb.rows[t].push_back(static_cast<int>(tb.seconds.size()));
      tb.seconds.push_back(row);
      made.push_back(key);
    }
  }
  return tb;
}

}  // namespace spmd::autoshard::search_detail
