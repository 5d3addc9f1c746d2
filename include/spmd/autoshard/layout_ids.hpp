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

/// What identifies a layout's blocks: equal keys ⇔ same_blocks (tests/autoshard/search.cpp).
struct layout_key {
  std::uint64_t packed = 0;
  int rank = 0;
  friend constexpr bool operator==(const layout_key&, const layout_key&) = default;
};

constexpr layout_key key_of(const layout_spec& s) {
  return {plan_detail::without_unit_dims(plan_detail::pack(s), s), s.tensor_rank};
}

// The hashes stay small numbers on purpose: in the compiler every distinct integer a constant
// evaluation makes is a node it keeps until the evaluation ends, and a multiplicative hash makes
// a new one per call.

/// Open addressing over a table of at most half-full slots: `find(h, same)` returns the slot
/// of the entry `same` accepts, or the empty one where it belongs.
struct slot_table {
  std::vector<int> slots = std::vector<int>(64, -1);
  std::size_t count = 0;

  /// The slot where an entry of hash `h` is first looked for.
  constexpr std::size_t home(std::uint64_t h) const { return static_cast<std::size_t>(h ^ (h >> 15) ^ (h >> 30)) & (slots.size() - 1); }

  template <class Same>
  constexpr std::size_t find(std::uint64_t h, Same&& same) const {
    const int* const s = slots.data();  // operator[] is a call in the compiler's evaluator
    const std::size_t mask = slots.size() - 1;
    std::size_t i = home(h);
    while (s[i] >= 0 && !same(s[i])) i = (i + 1) & mask;
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
  std::vector<double> fraction_;   // block_fraction(spec)
  slot_table index_;

  static constexpr std::uint64_t hash(const layout_key& k) {
    return (k.packed ^ (k.packed >> 24) ^ (k.packed >> 48)) * 40503u + static_cast<std::uint64_t>(k.rank);
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
    fraction_.push_back(block_fraction(s));
    index_.slots[i] = n;
    ++index_.count;
    return n;
  }
  constexpr const layout_spec& operator[](int id) const { return spec_[static_cast<std::size_t>(id)]; }
  constexpr const layout_key& key(int id) const { return key_[static_cast<std::size_t>(id)]; }
  /// block_fraction of the id's layout (the same for every layout of the id: one rank's block).
  constexpr double fraction(int id) const { return fraction_[static_cast<std::size_t>(id)]; }
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
/// moves many times, and identical blocks of a model ask for exactly the same ones. A move
/// the table has not seen is looked up again with its tensor dims renamed canonically (the
/// planner plans that pair: plan_detail::canonical_renaming), so S(0)→S(1) and S(1)→S(0)
/// of one tensor, which differ only in the dims' names, are planned once.
class move_costs {
  struct entry {
    int from, to;
    double bytes;
    transfer t;
  };
  struct canonical_entry {
    std::uint64_t from, to;  // packed, dims renamed
    int rank;
    double bytes;
    transfer t;
  };
  std::vector<entry> entries_;
  slot_table index_;
  std::vector<canonical_entry> canonical_;
  slot_table canonical_index_;

  static constexpr std::uint64_t hash(int from, int to, double bytes) {
    return static_cast<std::uint64_t>(from) * 92821u + static_cast<std::uint64_t>(to) * 48611u +
           static_cast<std::uint64_t>(bytes) % 65521u * 7919u;
  }
  static constexpr std::uint64_t hash(std::uint64_t from, std::uint64_t to, int rank, double bytes) {
    const auto fold = [](std::uint64_t x) { return (x ^ (x >> 24) ^ (x >> 48)) & 0xFFFFFFu; };
    return fold(from) * 92821u + fold(to) * 48611u + static_cast<std::uint64_t>(rank) * 131u +
           static_cast<std::uint64_t>(bytes) % 65521u * 7919u;
  }

  constexpr transfer plan(const layout_ids& ids, int from, int to, double bytes, const cost_model& cm) {
    const layout_spec& f = ids[from];
    const layout_spec& t = ids[to];
    if (!(f.mesh == t.mesh) || f.tensor_rank != t.tensor_rank) return transfer_cost(f, t, bytes, cm);
    const int dims = f.mesh.size();
    const layout_key& kf = ids.key(from);
    const layout_key& kt = ids.key(to);
    const plan_detail::dim_renaming names = plan_detail::canonical_renaming(kf.packed, kt.packed, dims, kf.rank);
    const std::uint64_t cf = plan_detail::rename_dims(kf.packed, dims, names.to);
    const std::uint64_t ct = plan_detail::rename_dims(kt.packed, dims, names.to);
    const auto same = [&](int e) {
      const canonical_entry& x = canonical_[static_cast<std::size_t>(e)];
      return x.from == cf && x.to == ct && x.rank == kf.rank && x.bytes == bytes;
    };
    const std::uint64_t h = hash(cf, ct, kf.rank, bytes);
    std::size_t i = canonical_index_.find(h, same);
    if (canonical_index_.slots[i] >= 0) return canonical_[static_cast<std::size_t>(canonical_index_.slots[i])].t;
    canonical_index_.reserve_one([&](int e) {
      const canonical_entry& x = canonical_[static_cast<std::size_t>(e)];
      return hash(x.from, x.to, x.rank, x.bytes);
    });
    i = canonical_index_.find(h, same);
    // the planner's search on the canonical pair (make_plan's, the same steps up to the dims'
    // names, which a plan's time does not depend on); the ids differ, so the blocks do
    const transfer moved =
        f.placements.size() != dims || t.placements.size() != dims
            ? transfer_cost(f, t, bytes, cm)
            : time_plan(plan_detail::search_canonical(cf, ct, f.mesh, kf.rank, bytes, spmd::cost_model{}, unlimited_plan_work), f.mesh, bytes, cm);
    canonical_.push_back({cf, ct, kf.rank, bytes, moved});
    canonical_index_.slots[i] = static_cast<int>(canonical_.size()) - 1;
    ++canonical_index_.count;
    return canonical_.back().t;
  }

 public:
  constexpr transfer get(const layout_ids& ids, int from, int to, double bytes, const cost_model& cm) {
    if (from == to) return {};
    {  // the lookup written out, through pointers: it runs for every cell of every row
      const entry* const seen = entries_.data();
      const int* const slots = index_.slots.data();
      const std::size_t mask = index_.slots.size() - 1;
      for (std::size_t i = index_.home(hash(from, to, bytes)); slots[i] >= 0; i = (i + 1) & mask) {
        const entry& e = seen[slots[i]];
        if (e.from == from && e.to == to && e.bytes == bytes) return e.t;
      }
    }
    const auto same = [&](int e) {
      const entry& x = entries_[static_cast<std::size_t>(e)];
      return x.from == from && x.to == to && x.bytes == bytes;
    };
    index_.reserve_one([&](int e) {  // not found above: its slot, after any growth
      const entry& x = entries_[static_cast<std::size_t>(e)];
      return hash(x.from, x.to, x.bytes);
    });
    const std::size_t i = index_.find(hash(from, to, bytes), same);
    entries_.push_back({from, to, bytes, plan(ids, from, to, bytes, cm)});
    index_.slots[i] = static_cast<int>(entries_.size()) - 1;
    ++index_.count;
    return entries_.back().t;
  }
  /// Moves planned (one plan each: the distinct pairs after renaming).
  constexpr long planned() const { return static_cast<long>(canonical_.size()); }
};

}  // namespace spmd::autoshard::search_detail
