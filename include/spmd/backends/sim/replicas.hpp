// spmd/backends/sim/replicas.hpp — which ranks of a step end with equal locals, so that the
// simulation writes each distinct block once and lets the others share it.
//
// Two kinds of replica, both found from the lowered step (plan/lower.hpp):
//   - by definition: a `replicate` op (all_gather to R: the rank copies its group's first
//     member) and the members of an `reduce_bcast` group (all_reduce: every member gets the
//     one reduction) end equal to one rank, whatever the data;
//   - by identity of the inputs ("twins"): a rank whose ops are, one by one, those of an
//     earlier rank (same codes, same geometry) computes the same block when those ops read
//     the same buffers. Which buffers they read is known only at run time: ranks that share
//     a buffer after an earlier step (2x4 S(0),S(0) -> R,R: after the first all_gather, the
//     four groups of the second read one buffer pair) make the second step's groups twins.
// `build_replica_plan` finds the candidates (constexpr: the compile-time path keeps them as
// constants); `resolve_replicas` checks the twins' inputs and names, per rank, the rank whose
// block it shares (-1: it computes its own). Each block is computed once: by the lowest mesh
// index that holds it.
#pragma once

#include <cstdint>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/first_equal.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::sim {

struct replica_plan {
  std::vector<index_t> from;   // by mesh index: equal to this rank by definition, or -1
  std::vector<index_t> twin;   // an earlier rank with the same ops, or -1
  std::vector<index_t> begin;  // ops writing rank r: order[begin[r] .. begin[r + 1])
  std::vector<index_t> order;
  bool any = false;            // some rank has a `from` or a `twin`
};

namespace detail {

/// The rank an op writes (reduce_bcast: its group's first member; replicate: none).
constexpr index_t op_target(const sched_op& o) {
  return o.code == op_code::replicate ? -1 : o.dst;
}

}  // namespace detail

/// The replica candidates of a lowered step.
constexpr replica_plan build_replica_plan(const step_schedule& s) {
  const index_t n = static_cast<index_t>(s.ranks.size());
  const std::size_t nr = static_cast<std::size_t>(n);
  replica_plan p{};
  p.from.reserve(nr);
  p.begin.reserve(nr + 1);
  p.order.reserve(s.ops.size());
  for (index_t r = 0; r < n; ++r) p.from.push_back(-1);
  for (const sched_op& o : s.ops) {
    if (o.code == op_code::replicate) {
      p.from[static_cast<std::size_t>(o.dst)] = o.src;
    } else if (o.code == op_code::reduce_bcast) {
      for (index_t j = 1; j < s.group_size; ++j)
        p.from[static_cast<std::size_t>(
            s.members[static_cast<std::size_t>(o.src * s.group_size + j)])] = o.dst;
    }
  }
  // Ops by the rank they write, in schedule order (counting sort).
  std::vector<index_t> count;
  count.reserve(nr + 1);
  for (std::size_t r = 0; r <= nr; ++r) count.push_back(0);
  for (const sched_op& o : s.ops)
    if (const index_t t = detail::op_target(o); t >= 0) ++count[static_cast<std::size_t>(t) + 1];
  for (std::size_t r = 0; r < nr; ++r) count[r + 1] += count[r];
  for (std::size_t r = 0; r <= nr; ++r) p.begin.push_back(count[r]);
  for (std::size_t k = 0; k < s.ops.size(); ++k) p.order.push_back(0);
  for (std::size_t k = 0; k < s.ops.size(); ++k)
    if (const index_t t = detail::op_target(s.ops[k]); t >= 0)
      p.order[static_cast<std::size_t>(count[static_cast<std::size_t>(t)]++)] =
          static_cast<index_t>(k);

  auto same_ops = [&](index_t a, index_t b) {
    const std::size_t ia = static_cast<std::size_t>(a), ib = static_cast<std::size_t>(b);
    const index_t na = p.begin[ia + 1] - p.begin[ia];
    if (na == 0 || na != p.begin[ib + 1] - p.begin[ib]) return false;
    for (index_t k = 0; k < na; ++k) {
      const sched_op& x = s.ops[static_cast<std::size_t>(p.order[static_cast<std::size_t>(p.begin[ia] + k)])];
      const sched_op& y = s.ops[static_cast<std::size_t>(p.order[static_cast<std::size_t>(p.begin[ib] + k)])];
      if (x.code != y.code || !(x.geo == y.geo)) return false;
    }
    return true;
  };
  // Twins: the first earlier rank with the same shape and the same ops, found by a key of
  // both (core/first_equal.hpp; comparing every earlier rank took 3.2 s for R -> S(0) on
  // 16,384 ranks). Only ranks that compute a block of their own take part.
  auto computes = [&](index_t r) {
    const std::size_t i = static_cast<std::size_t>(r);
    return p.from[i] < 0 && s.ranks[i].how != disposition::keep && s.ranks[i].elems > 0 &&
           p.begin[i + 1] > p.begin[i];
  };
  auto key = [&](index_t r) {
    const std::size_t i = static_cast<std::size_t>(r);
    std::uint64_t h = hash_mix(0, p.begin[i + 1] - p.begin[i]);
    for (const index_t e : s.ranks[i].shape) h = hash_mix(h, e);
    for (index_t k = p.begin[i]; k < p.begin[i + 1]; ++k) {
      const run_geom& g = s.ops[static_cast<std::size_t>(p.order[static_cast<std::size_t>(k)])].geo;
      h = hash_mix(hash_mix(hash_mix(h, g.run), g.soff), g.doff);
    }
    return h;
  };
  auto same = [&](index_t q, index_t r) {
    return s.ranks[static_cast<std::size_t>(q)].shape == s.ranks[static_cast<std::size_t>(r)].shape &&
           same_ops(q, r);
  };
  p.twin = first_equal(n, computes, key, same);
  for (index_t r = 0; r < n; ++r)
    p.any = p.any || p.from[static_cast<std::size_t>(r)] >= 0 || p.twin[static_cast<std::size_t>(r)] >= 0;
  return p;
}

namespace detail {

/// True when op x (writing one rank) and op y (writing its twin) read the same buffers.
template <class T>
inline bool same_sources(const sched_op& x, const sched_op& y, const index_t* members,
                         index_t group_size, const T* const* in) {
  switch (x.code) {
    case op_code::fill: return true;
    case op_code::reduce:
    case op_code::reduce_bcast:
      for (index_t j = 0; j < group_size; ++j)
        if (in[members[x.src * group_size + j]] != in[members[y.src * group_size + j]])
          return false;
      return true;
    default: return in[x.src] == in[y.src];
  }
}

}  // namespace detail

/// rep[r]: the rank whose new block rank r shares (the lowest mesh index computing it), or
/// -1 when r computes its own. `P` is a replica_plan or its fixed-size copy; `in` the ranks'
/// input buffers. Returns true when some rank shares.
template <class T, class P>
bool resolve_replicas(const P& p, const sched_op* ops, const index_t* members,
                      index_t group_size, const T* const* in, index_t n, index_t* rep) {
  bool any = false;
  for (index_t r = 0; r < n; ++r) {
    rep[r] = -1;
    const std::size_t i = static_cast<std::size_t>(r);
    index_t q = p.from[i];
    if (q < 0 && p.twin[i] >= 0) {
      const index_t t = p.twin[i];
      const index_t k0 = p.begin[i], k1 = p.begin[i + 1], t0 = p.begin[static_cast<std::size_t>(t)];
      bool same = true;
      for (index_t k = 0; same && k < k1 - k0; ++k)
        same = detail::same_sources<T>(ops[p.order[static_cast<std::size_t>(k0 + k)]],
                                       ops[p.order[static_cast<std::size_t>(t0 + k)]], members,
                                       group_size, in);
      if (same) q = t;
    }
    if (q >= 0) {
      rep[r] = rep[q] >= 0 ? rep[q] : q;
      any = true;
    }
  }
  return any;
}

}  // namespace spmd::sim
