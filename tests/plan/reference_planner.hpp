// tests/plan/reference_planner.hpp — an independent, slow model of redistribute planning,
// written from the move table in docs/redistribute.md and the cost formula in
// spmd/plan/cost_model.hpp, without the planner's code: states are plain vectors, moves
// are generated one mesh dim at a time, and the cheapest path is found by Bellman-Ford
// relaxation over every reachable state (no priority queue, no packing, no merged groups).
//
// The planner may beat this reference (it also merges collectives over several mesh
// dims); it must never lose to it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <spmd/plan.hpp>
#include <spmd/spmd.hpp>

namespace refplan {

// ---------------------------------------------------------------------------
// States as plain data
// ---------------------------------------------------------------------------
struct pl {
  char kind = 'R';  // 'R', 'S', 'P'
  int what = 0;     // 'S': tensor dim; 'P': reduce op (as int)
  int order = 0;    // 'S': position in the tensor dim's shard order
  friend bool operator==(const pl& a, const pl& b) {
    return a.kind == b.kind && (a.kind == 'R' || (a.what == b.what && (a.kind == 'P' || a.order == b.order)));
  }
  friend bool operator<(const pl& a, const pl& b) {
    if (a.kind != b.kind) return a.kind < b.kind;
    if (a.kind == 'R') return false;
    if (a.what != b.what) return a.what < b.what;
    return a.kind == 'S' && a.order < b.order;
  }
};
using state = std::vector<pl>;

inline state from_spec(const spmd::layout_spec& s) {
  state out;
  for (const spmd::placement& p : s.placements) {
    if (p.is_shard())
      out.push_back({'S', p.dim, p.order});
    else if (p.is_partial())
      out.push_back({'P', static_cast<int>(p.op), 0});
    else
      out.push_back({'R', 0, 0});
  }
  return out;
}

inline std::string op_name(int op) {
  static const char* names[] = {"sum", "avg", "max", "min", "product"};
  return names[op];
}

inline std::string to_string(const state& s) {
  std::string t;
  for (const pl& p : s) {
    if (p.kind == 'R') t += 'R';
    if (p.kind == 'P') t += "P(" + op_name(p.what) + ")";
    if (p.kind == 'S') t += "S(" + std::to_string(p.what) + ")[" + std::to_string(p.order) + "]";
  }
  return t;
}

/// Placements on mesh dims of size 1 mean nothing: make them R and renumber the shard
/// orders of the remaining dims 0..k-1 (keeping their relative order).
inline state without_unit_dims(state s, const std::vector<long>& mesh) {
  for (std::size_t m = 0; m < s.size(); ++m)
    if (mesh[m] == 1) s[m] = {'R', 0, 0};
  for (int d = 0; d < 8; ++d) {
    std::vector<std::pair<int, std::size_t>> by_order;
    for (std::size_t m = 0; m < s.size(); ++m)
      if (s[m].kind == 'S' && s[m].what == d) by_order.push_back({s[m].order, m});
    std::sort(by_order.begin(), by_order.end());
    for (std::size_t k = 0; k < by_order.size(); ++k) s[by_order[k].second].order = static_cast<int>(k);
  }
  return s;
}

// ---------------------------------------------------------------------------
// Cost model (docs/redistribute.md, "Cost model")
// ---------------------------------------------------------------------------
enum class kind { all_gather, all_reduce, reduce_scatter, all_to_all, chunk, partition, fill };

inline bool communicates(kind k) {
  return k == kind::all_gather || k == kind::all_reduce || k == kind::reduce_scatter ||
         k == kind::all_to_all;
}

/// Fraction of the global tensor one rank holds in a state, under even splits.
inline double held_fraction(const state& from, const std::vector<long>& mesh) {
  double f = 1;
  for (std::size_t m = 0; m < from.size(); ++m)
    if (from[m].kind == 'S') f /= static_cast<double>(mesh[m]);
  return f;
}

/// Microseconds of one step over a group of n ranks: a collective's fixed, hop and link
/// costs; a local step's bytes written (the whole new block) at 2 TB/s.
inline double step_cost(kind k, const state& from, const state& to, const std::vector<long>& mesh,
                        double n, double bytes) {
  if (!communicates(k)) return held_fraction(to, mesh) * bytes / 2e6;
  const double f = held_fraction(from, mesh);
  double traffic = 0, hops = n - 1;
  if (k == kind::all_gather) traffic = f * (n - 1);
  if (k == kind::all_to_all || k == kind::reduce_scatter) traffic = f * (n - 1) / n;
  if (k == kind::all_reduce) {
    traffic = 2 * f * (n - 1) / n;
    hops = 2 * (n - 1);
  }
  return 6.6 + 0.6 * hops + traffic * bytes / 88e3;
}

inline kind from_spmd(spmd::step_kind k) {
  switch (k) {
    case spmd::step_kind::all_gather: return kind::all_gather;
    case spmd::step_kind::all_reduce: return kind::all_reduce;
    case spmd::step_kind::reduce_scatter: return kind::reduce_scatter;
    case spmd::step_kind::all_to_all: return kind::all_to_all;
    case spmd::step_kind::chunk: return kind::chunk;
    case spmd::step_kind::partition: return kind::partition;
    case spmd::step_kind::fill: return kind::fill;
  }
  return kind::chunk;
}

// ---------------------------------------------------------------------------
// Single-mesh-dim moves (docs/redistribute.md, "States and moves")
// ---------------------------------------------------------------------------
struct vocabulary {
  std::vector<int> shard_dims;  // tensor dims a move may start sharding
  std::vector<int> ops;         // reduce ops a move may create
};

/// The planner's documented vocabulary: what the two ends shard and hold.
inline vocabulary ends_vocabulary(const state& a, const state& b) {
  vocabulary v;
  for (const state* s : {&a, &b})
    for (const pl& p : *s) {
      if (p.kind == 'S' && std::find(v.shard_dims.begin(), v.shard_dims.end(), p.what) == v.shard_dims.end())
        v.shard_dims.push_back(p.what);
      if (p.kind == 'P' && std::find(v.ops.begin(), v.ops.end(), p.what) == v.ops.end())
        v.ops.push_back(p.what);
    }
  return v;
}

/// Every tensor dim and every reduce op.
inline vocabulary full_vocabulary(int tensor_rank) {
  vocabulary v;
  for (int d = 0; d < tensor_rank; ++d) v.shard_dims.push_back(d);
  v.ops = {0, 1, 2, 3, 4};
  return v;
}

inline int shards_of(const state& s, int d) {
  int n = 0;
  for (const pl& p : s) n += p.kind == 'S' && p.what == d;
  return n;
}

struct move {
  kind k;
  int mesh_dim;
  state to;
};

inline std::vector<move> moves_from(const state& a, const std::vector<long>& mesh, const vocabulary& v) {
  std::vector<move> out;
  auto partial_ok = [&](int m, int op) {
    for (std::size_t k = 0; k < a.size(); ++k)
      if (static_cast<int>(k) != m && a[k].kind == 'P' && a[k].what != op) return false;
    return true;
  };
  for (std::size_t mi = 0; mi < a.size(); ++mi) {
    const int m = static_cast<int>(mi);
    if (mesh[mi] == 1) continue;
    const pl c = a[mi];
    if (c.kind == 'S') {
      if (c.order != shards_of(a, c.what) - 1) continue;  // only the last split may go
      state r = a;
      r[mi] = {'R', 0, 0};
      out.push_back({kind::all_gather, m, r});
      for (int b : v.shard_dims)
        if (b != c.what) {
          state t = r;
          t[mi] = {'S', b, shards_of(r, b)};
          out.push_back({kind::all_to_all, m, t});
        }
      for (int op : v.ops)
        if (partial_ok(m, op)) {
          state t = r;
          t[mi] = {'P', op, 0};
          out.push_back({kind::fill, m, t});
        }
    } else if (c.kind == 'R') {
      for (int b : v.shard_dims) {
        state t = a;
        t[mi] = {'S', b, shards_of(a, b)};
        out.push_back({kind::chunk, m, t});
      }
      for (int op : v.ops)
        if (partial_ok(m, op)) {
          state t = a;
          t[mi] = {'P', op, 0};
          out.push_back({kind::partition, m, t});
        }
    } else {
      state r = a;
      r[mi] = {'R', 0, 0};
      out.push_back({kind::all_reduce, m, r});
      for (int b : v.shard_dims) {
        state t = r;
        t[mi] = {'S', b, shards_of(r, b)};
        out.push_back({kind::reduce_scatter, m, t});
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Cheapest path: Bellman-Ford over every reachable state
// ---------------------------------------------------------------------------
struct best {
  double cost = 0;
  int collectives = 0;
  int steps = 0;
  bool found = false;
};

/// (cost, collectives) lexicographic, costs within a relative 1e-9 counting as equal.
inline bool better(double c1, int n1, double c2, int n2) {
  const double eps = 1e-9 * (1 + std::max(c1, c2));
  if (c1 < c2 - eps) return true;
  if (c2 < c1 - eps) return false;
  return n1 < n2;
}

inline best cheapest(const state& src, const state& dst, const std::vector<long>& mesh, double bytes,
                     const vocabulary& v) {
  const state start = without_unit_dims(src, mesh), goal = without_unit_dims(dst, mesh);
  std::map<state, int> id;
  std::vector<state> states{start};
  id[start] = 0;
  struct edge {
    int from, to;
    double cost;
    int collective;
  };
  std::vector<edge> edges;
  for (std::size_t i = 0; i < states.size(); ++i) {
    const state here = states[i];  // copy: states grows below
    for (const move& mv : moves_from(here, mesh, v)) {
      auto [it, fresh] = id.try_emplace(mv.to, static_cast<int>(states.size()));
      if (fresh) states.push_back(mv.to);
      edges.push_back({static_cast<int>(i), it->second,
                       step_cost(mv.k, here, mv.to, mesh, static_cast<double>(mesh[static_cast<std::size_t>(mv.mesh_dim)]), bytes),
                       communicates(mv.k) ? 1 : 0});
    }
  }
  std::vector<best> d(states.size());
  d[0] = {0, 0, 0, true};
  for (std::size_t round = 0; round < states.size(); ++round) {
    bool changed = false;
    for (const edge& e : edges) {
      const best& a = d[static_cast<std::size_t>(e.from)];
      if (!a.found) continue;
      best& b = d[static_cast<std::size_t>(e.to)];
      const double c = a.cost + e.cost;
      const int n = a.collectives + e.collective;
      if (!b.found || better(c, n, b.cost, b.collectives)) {
        b = {c, n, a.steps + 1, true};
        changed = true;
      }
    }
    if (!changed) break;
  }
  const auto it = id.find(goal);
  return it == id.end() ? best{} : d[static_cast<std::size_t>(it->second)];
}

}  // namespace refplan
