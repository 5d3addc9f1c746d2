// spmd/autoshard/layout_ids.hpp — the search's layouts as small integers, and the cost of a
// move between two of them, planned once.
//
// Why: the search compares, hashes and copies layouts millions of times on a 2-d mesh, and in
// the compiler's constant evaluator a layout_spec (two small vectors of structs) costs a
// thousand times what an int does. So each distinct layout gets an id once (layout_ids), the
// search's tables and states hold ids, and the moves' costs are remembered by id
// (move_costs). Two layouts get one id exactly when they hold the same blocks (same_blocks):
// the key is the planner's own packed state with the one-rank mesh dims as Replicate.
#pragma once

#include <cstdint>
#include <vector>

#include "spmd/autoshard/cost.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/state.hpp"

namespace spmd::autoshard::search_detail {

/// What identifies a layout's blocks: equal keys ⇔ same_blocks (tests/autoshard/ids.cpp).
struct layout_key {
  std::uint64_t packed = 0;
  int rank = 0;
  friend constexpr bool operator==(const layout_key&, const layout_key&) = default;
};

constexpr layout_key key_of(const layout_spec& s) {
  return {plan_detail::without_unit_dims(plan_detail::pack(s), s), s.tensor_rank};
}

constexpr std::uint64_t mix(std::uint64_t h, std::uint64_t v) {
  return h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2));
}

/// Open addressing over a table of at most half-full slots: `find(h, same)` returns the slot
/// of the entry `same` accepts, or the empty one where it belongs.
struct slot_table {
  std::vector<int> slots = std::vector<int>(64, -1);
  std::size_t count = 0;

  template <class Same>
  constexpr std::size_t find(std::uint64_t h, Same&& same) const {
    std::size_t i = static_cast<std::size_t>(h ^ (h >> 29)) & (slots.size() - 1);
    while (slots[i] >= 0 && !same(slots[i])) i = (i + 1) & (slots.size() - 1);
    return i;
  }
  /// Room for one more: doubles (rehashing every entry by `hash_of(entry)`) when half full.
  template <class HashOf>
  constexpr void reserve_one(HashOf&& hash_of) {
    if (2 * (count + 1) <= slots.size()) return;
    const std::vector<int> old = slots;
    slots.assign(old.size() * 2, -1);
    for (const int e : old)
      if (e >= 0) slots[find(hash_of(e), [](int) { return false; })] = e;
  }
};

/// Every layout the search meets, by id.
class layout_ids {
  std::vector<layout_spec> spec_;
  std::vector<layout_key> key_;
  std::vector<int> as_replicate_;  // the id of partial_as_replicate(spec), or -1 not yet known
  slot_table index_;

  static constexpr std::uint64_t hash(const layout_key& k) {
    return mix(k.packed * 0x9E3779B97F4A7C15ull, static_cast<std::uint64_t>(k.rank));
  }

 public:
  /// The id of `s`'s blocks (a new one the first time they are seen).
  constexpr int id(const layout_spec& s) {
    const layout_key k = key_of(s);
    const auto same = [&](int e) { return key_[static_cast<std::size_t>(e)] == k; };
    std::size_t i = index_.find(hash(k), same);
    if (index_.slots[i] >= 0) return index_.slots[i];
    index_.reserve_one([&](int e) { return hash(key_[static_cast<std::size_t>(e)]); });
    i = index_.find(hash(k), same);
    const int n = static_cast<int>(spec_.size());
    spec_.push_back(s);
    key_.push_back(k);
    as_replicate_.push_back(-1);
    index_.slots[i] = n;
    ++index_.count;
    return n;
  }
  constexpr const layout_spec& operator[](int id) const { return spec_[static_cast<std::size_t>(id)]; }
  constexpr int size() const { return static_cast<int>(spec_.size()); }

  /// The id of `id`'s layout with every Partial replaced by Replicate (a gradient's layout
  /// where the value was a sum of pieces).
  constexpr int as_replicate(int id) {
    if (as_replicate_[static_cast<std::size_t>(id)] < 0) {
      placement_vec p = spec_[static_cast<std::size_t>(id)].placements;
      for (int m = 0; m < p.size(); ++m)
        if (p[m].is_partial()) p[m] = make_replicate();
      const layout_spec& s = spec_[static_cast<std::size_t>(id)];
      const int r = this->id(make_spec(s.mesh, p, s.tensor_rank).spec);
      as_replicate_[static_cast<std::size_t>(id)] = r;
    }
    return as_replicate_[static_cast<std::size_t>(id)];
  }
};

/// The moves' costs by (from, to, bytes), each planned once: the search asks for the same
/// moves many times, and identical blocks of a model ask for exactly the same ones.
class move_costs {
  struct entry {
    int from, to;
    double bytes;
    transfer t;
  };
  std::vector<entry> entries_;
  slot_table index_;

  static constexpr std::uint64_t hash(int from, int to, double bytes) {
    return mix(mix(static_cast<std::uint64_t>(from) * 0x9E3779B97F4A7C15ull, static_cast<std::uint64_t>(to)),
               static_cast<std::uint64_t>(bytes));
  }

 public:
  constexpr transfer get(const layout_ids& ids, int from, int to, double bytes, const cost_model& cm) {
    if (from == to) return {};
    const auto same = [&](int e) {
      const entry& x = entries_[static_cast<std::size_t>(e)];
      return x.from == from && x.to == to && x.bytes == bytes;
    };
    std::size_t i = index_.find(hash(from, to, bytes), same);
    if (index_.slots[i] >= 0) return entries_[static_cast<std::size_t>(index_.slots[i])].t;
    index_.reserve_one([&](int e) {
      const entry& x = entries_[static_cast<std::size_t>(e)];
      return hash(x.from, x.to, x.bytes);
    });
    i = index_.find(hash(from, to, bytes), same);
    entries_.push_back({from, to, bytes, transfer_cost(ids[from], ids[to], bytes, cm)});
    index_.slots[i] = static_cast<int>(entries_.size()) - 1;
    ++index_.count;
    return entries_.back().t;
  }
  /// Moves planned (one plan each).
  constexpr long planned() const { return static_cast<long>(entries_.size()); }
};

}  // namespace spmd::autoshard::search_detail
