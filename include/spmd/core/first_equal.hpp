// spmd/core/first_equal.hpp — for each of n items, the first earlier item equal to it, in
// n log n: how the simulation finds ranks whose blocks are replicas (distribute, the
// factories, a step's twins in backends/sim/replicas.hpp) without comparing every pair,
// which took 87 s for a 65,536-rank distribute.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "spmd/core/config.hpp"

namespace spmd {

/// Mixes v into the hash h; equal sequences of values give equal hashes.
constexpr std::uint64_t hash_mix(std::uint64_t h, index_t v) {
  h ^= static_cast<std::uint64_t>(v) + 0x9e3779b97f4a7c15u + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdu;
}

/// out[r] for each r in [0, n) with in(r): the first q < r with in(q) and same(q, r); -1
/// where there is none, and for every r without in(r). `same` must be an equivalence on the
/// items in, and key(q) == key(r) wherever same(q, r) (a hash of what same compares): the
/// items are sorted by key, so each is compared only with earlier items of its key, and of
/// those only with the first of each class (an item that has a twin is never the first).
template <class In, class Key, class Same>
constexpr std::vector<index_t> first_equal(index_t n, In&& in, Key&& key, Same&& same) {
  std::vector<index_t> out(static_cast<std::size_t>(n), -1);
  std::vector<std::pair<std::uint64_t, index_t>> order;
  for (index_t r = 0; r < n; ++r)
    if (in(r)) order.emplace_back(key(r), r);
  std::sort(order.begin(), order.end());
  for (std::size_t b = 0; b < order.size();) {
    std::size_t e = b + 1;
    while (e < order.size() && order[e].first == order[b].first) ++e;
    for (std::size_t i = b + 1; i < e; ++i) {  // [b, e): one key, in item order
      const index_t r = order[i].second;
      for (std::size_t j = b; j < i; ++j) {
        const index_t q = order[j].second;
        if (out[static_cast<std::size_t>(q)] < 0 && same(q, r)) {
          out[static_cast<std::size_t>(r)] = q;
          break;
        }
      }
    }
    b = e;
  }
  return out;
}

}  // namespace spmd
