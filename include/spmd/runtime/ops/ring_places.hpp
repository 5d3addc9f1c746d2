// spmd/runtime/ops/ring_places.hpp — where each rank sits on context parallelism's ring
// (runtime/ops/ring_attention.hpp): its queries' runs of consecutive positions, and those of
// every key block that will pass it. Geometry only, on the host: the host ring and the device
// backends' (backends/cuda/ring.hpp) read the same places.
#pragma once

#include <algorithm>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/core/head_tail.hpp"
#include "spmd/core/layout_spec.hpp"

namespace spmd::runtime::ring_detail {

/// Rows of a rank's block that hold consecutive global positions: `len` rows from local row
/// `row`, the first at global position `first`. A block is one run, or two in head-tail order.
struct run {
  index_t row = 0, len = 0, first = 0;
};
struct runs {
  run at[2]{};
  int count = 0;
};
/// The runs of the block of group position j (its box on the sequence dim: offset, length).
inline runs runs_of(index_t offset, index_t len, index_t length, index_t n, index_t j, bool head_tail) {
  runs r;
  if (!head_tail) {
    r.at[r.count++] = {0, len, offset};
  } else {
    const index_t m = length / (2 * n);
    const head_tail::chunk_pair c = head_tail::chunks(n, j);
    r.at[r.count++] = {0, m, c.head * m};
    r.at[r.count++] = {m, m, c.tail * m};
  }
  return r;
}

/// Where a rank sits on the ring: the group's size, its position, its queries' runs, and every
/// position's key block (its runs and length), padded to k_max.
struct place {
  index_t n = 1, pos = 0, k_max = 0;
  runs q;
  std::vector<runs> k;
  std::vector<index_t> k_len;
};
template <class LQ, class LK>
place place_of(const LQ& lq, const LK& lk, int dim, index_t i, bool head_tail) {
  const layout_spec qs = LQ::spec(), ks = LK::spec();
  const shape_vec qg = lq.extents().to_vec(), kg = lk.extents().to_vec();
  coord_vec c = unravel(qs.mesh, i);
  place r;
  if (dim >= 0) {
    r.n = qs.mesh[dim];
    r.pos = c[dim];
  }
  if (head_tail && (!head_tail::splits(qg[1], r.n) || !head_tail::splits(kg[1], r.n)))
    throw std::invalid_argument("spmd::ring_attention: head-tail balancing cuts the sequence into 2·cp = " +
                                std::to_string(2 * r.n) + " equal chunks; " + std::to_string(qg[1]) +
                                " positions are not a multiple of " + std::to_string(2 * r.n));
  const local_box qb = box_at(qs, qg, c);
  r.q = runs_of(qb.offset[1], qb.shape[1], qg[1], r.n, r.pos, head_tail);
  for (index_t j = 0; j < r.n; ++j) {
    if (dim >= 0) c[dim] = j;
    const local_box b = box_at(ks, kg, c);
    r.k.push_back(runs_of(b.offset[1], b.shape[1], kg[1], r.n, j, head_tail));
    r.k_len.push_back(b.shape[1]);
    r.k_max = std::max(r.k_max, b.shape[1]);
  }
  return r;
}

/// A block's shape from its extents (a padded K/V block, a log-sum-exp's (heads, rows)).
inline shape_vec shape_of(std::initializer_list<index_t> e) {
  shape_vec s{};
  for (const index_t x : e) s.push_back(x);
  return s;
}

}  // namespace spmd::runtime::ring_detail
