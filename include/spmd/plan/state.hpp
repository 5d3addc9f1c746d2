// spmd/plan/state.hpp — planner states packed into 64 bits.
//
// The search visits hundreds of states and thousands of moves per plan, in the compiler's
// constant evaluator, where every copied byte costs. A state is therefore one integer:
// 8 bits per mesh dim = kind (2) | shard dim or reduce op (3) | shard-order position (3).
// The mesh shape stays outside (it never changes along a plan).
//
// The functions below call no others: in the compiler's evaluator a call costs about what
// a loop's step does, and the planner makes millions of them.
#pragma once

#include <cstdint>

#include "spmd/core/layout_spec.hpp"
#include "spmd/core/placement.hpp"

namespace spmd::plan_detail {

using state = std::uint64_t;

constexpr unsigned code(state s, int m) { return static_cast<unsigned>(s >> (8 * m)) & 0xFFu; }
constexpr placement_kind kind_of(unsigned c) { return static_cast<placement_kind>(c >> 6); }
constexpr int what_of(unsigned c) { return static_cast<int>((c >> 3) & 7u); }
constexpr int order_of(unsigned c) { return static_cast<int>(c & 7u); }
inline constexpr unsigned shard_kind = static_cast<unsigned>(placement_kind::shard);
inline constexpr unsigned partial_kind = static_cast<unsigned>(placement_kind::partial);
inline constexpr unsigned replicate_kind = static_cast<unsigned>(placement_kind::replicate);
constexpr bool is_shard(unsigned c) { return (c >> 6) == shard_kind; }
constexpr bool is_partial(unsigned c) { return (c >> 6) == partial_kind; }
constexpr bool is_replicate(unsigned c) { return (c >> 6) == replicate_kind; }

constexpr unsigned replicate_code() { return 0; }
constexpr unsigned shard_code(int d, int order) {
  return (static_cast<unsigned>(placement_kind::shard) << 6) | (static_cast<unsigned>(d) << 3) |
         static_cast<unsigned>(order);
}
constexpr unsigned partial_code(reduce_op op) {
  return (static_cast<unsigned>(placement_kind::partial) << 6) | (static_cast<unsigned>(op) << 3);
}

constexpr state with_code(state s, int m, unsigned c) {
  return (s & ~(state{0xFF} << (8 * m))) | (state{c} << (8 * m));
}

/// Number of mesh dims (of `dims`) sharding tensor dim d.
constexpr int shard_count(state s, int dims, int d) {
  const unsigned want = (shard_kind << 3) | static_cast<unsigned>(d);  // kind and dim: a code's bits 3-7
  int n = 0;
  for (int m = 0; m < dims; ++m) n += ((static_cast<unsigned>(s >> (8 * m)) & 0xFFu) >> 3) == want;
  return n;
}

/// True when mesh dim m shards its tensor dim last, so it can stop sharding without
/// disturbing the blocks the earlier splits made.
constexpr bool splits_last(state s, int dims, int m) {
  const unsigned c = static_cast<unsigned>(s >> (8 * m)) & 0xFFu;
  if ((c >> 6) != shard_kind) return false;
  int n = 0;  // shard_count(s, dims, what_of(c))
  for (int k = 0; k < dims; ++k) n += ((static_cast<unsigned>(s >> (8 * k)) & 0xFFu) >> 3) == (c >> 3);
  return static_cast<int>(c & 7u) == n - 1;
}

/// Mesh dim m no longer shards: its placement becomes `to`; later positions move up.
constexpr state unshard(state s, int dims, int m, unsigned to = replicate_code()) {
  const unsigned c = static_cast<unsigned>(s >> (8 * m)) & 0xFFu;
  if ((c >> 6) == shard_kind)
    for (int k = 0; k < dims; ++k) {
      const unsigned q = static_cast<unsigned>(s >> (8 * k)) & 0xFFu;
      if ((q >> 3) == (c >> 3) && (q & 7u) > (c & 7u))  // the same kind and dim, later in its order
        s = (s & ~(state{0xFF} << (8 * k))) | (state{q - 1} << (8 * k));
    }
  return (s & ~(state{0xFF} << (8 * m))) | (state{to} << (8 * m));
}

/// Mesh dim m (not sharding) starts sharding tensor dim d, last in d's order.
constexpr state shard_last(state s, int dims, int m, int d) {
  const unsigned dim = (shard_kind << 3) | static_cast<unsigned>(d);
  unsigned n = 0;  // shard_count(s, dims, d)
  for (int k = 0; k < dims; ++k) n += ((static_cast<unsigned>(s >> (8 * k)) & 0xFFu) >> 3) == dim;
  return (s & ~(state{0xFF} << (8 * m))) | (state{(dim << 3) | n} << (8 * m));
}

/// The reduce op of the state's partial placements; false when it has none.
constexpr bool partial_op(state s, int dims, reduce_op& op) {
  for (int m = 0; m < dims; ++m)
    if (is_partial(code(s, m))) {
      op = static_cast<reduce_op>(what_of(code(s, m)));
      return true;
    }
  return false;
}

constexpr state pack(const layout_spec& spec) {
  state s = 0;
  for (int m = 0; m < spec.placements.size(); ++m) {
    const placement& p = spec.placements[m];
    s = with_code(s, m, p.is_shard() ? shard_code(p.dim, p.order)
                        : p.is_partial() ? partial_code(p.op) : replicate_code());
  }
  return s;
}

constexpr layout_spec unpack(state s, const layout_spec& like) {
  layout_spec out = like;
  for (int m = 0; m < like.placements.size(); ++m) {
    const unsigned c = code(s, m);
    out.placements[m] = is_shard(c)     ? make_shard(what_of(c), order_of(c))
                        : is_partial(c) ? make_partial(static_cast<reduce_op>(what_of(c)))
                                        : make_replicate();
  }
  return out;
}

/// Placements on mesh dims of size 1 carry no information (a split into one piece, a
/// reduction over one rank): the planner treats them as R.
constexpr state without_unit_dims(state s, const layout_spec& spec) {
  for (int m = 0; m < spec.mesh.size(); ++m)
    if (spec.mesh[m] == 1) s = unshard(s, spec.mesh.size(), m);
  return s;
}

/// The tensor dims of a pair of states renamed in the order their shards first appear (the
/// first state's mesh dims, then the second's), the dims neither shards after them in their
/// own order: `to[d]` is d's new name. Pairs that differ only in how their dims are named
/// get one name, and the planner one search (a redistribute's plan does not depend on
/// which dim is called 0).
struct dim_renaming {
  int to[max_tensor_dims]{};
  int from[max_tensor_dims]{};  // the inverse
};

constexpr dim_renaming canonical_renaming(state a, state b, int dims, int tensor_rank) {
  dim_renaming r{};
  bool named[max_tensor_dims]{};
  int next = 0;
  const state ends[2] = {a, b};
  for (const state s : ends)
    for (int m = 0; m < dims; ++m) {
      const unsigned c = code(s, m);
      if (is_shard(c) && !named[what_of(c)]) named[what_of(c)] = true, r.to[what_of(c)] = next++;
    }
  for (int d = 0; d < tensor_rank; ++d)
    if (!named[d]) r.to[d] = next++;
  for (int d = 0; d < tensor_rank; ++d) r.from[r.to[d]] = d;
  return r;
}

/// `s` with each shard's tensor dim d renamed names[d].
constexpr state rename_dims(state s, int dims, const int* names) {
  for (int m = 0; m < dims; ++m) {
    const unsigned c = code(s, m);
    if (is_shard(c)) s = with_code(s, m, shard_code(names[what_of(c)], order_of(c)));
  }
  return s;
}

}  // namespace spmd::plan_detail
