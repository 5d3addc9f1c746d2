// spmd/backends/cuda/random_run.hpp — the random draws' body where every block of the launch
// is one run of the global tensor (a block_geom of one contiguous dim: every block of a
// Shard(0) or Replicate layout, and any tensor of one dim), with the distribution fixed at
// compile time.
//
// random_item (block_body.hpp) serves any block: it finds an item's global index through the
// geometry, checks whether the item is a whole run, and tests the distribution in every
// block it draws; the kernel holding all of it needs 64 registers and more than 270
// instructions an item for the uniform draw, of which Philox is 80. Here an item's global
// index is the block's base plus the item's offset, and the kernel is made for one
// distribution (uniform over [0, 1) on its own: its range arithmetic is the identity), so the
// item is the draw and little else. The values are random_item's: the same Philox blocks,
// the same per-lane functions (random::draw_block_as); tests/cuda/block_bodies.cpp runs
// both over the emulated grid against the host.
#pragma once

#include <cstdint>

#include "spmd/backends/cuda/block_body.hpp"
#include "spmd/backends/cuda/job_batch.hpp"
#include "spmd/core/config.hpp"
#include "spmd/random/draw.hpp"

namespace spmd::cuda {

/// The body a random draw's launch runs: random_item, or random_run_item made for one
/// distribution.
enum class random_body : unsigned char { any, uniform_unit, uniform, normal, bernoulli };

/// Whether every block of the batch is one run of the global tensor (a single dim of global
/// stride 1: element e of the block is global element base + e).
template <class T>
bool all_runs(const job_batch<block_job<T>, block_geom>& b) {
  for (int k = 0; k < b.geoms; ++k)
    if (b.geom[k].nd != 1 || b.geom[k].gstride[0] != 1) return false;
  return true;
}

/// The body for draw d over the batch's blocks: random_run_item's for d's distribution where
/// every block is a run, random_item's otherwise.
template <class T>
random_body random_body_for(const job_batch<block_job<T>, block_geom>& b, const random::draw& d) {
  if (!all_runs(b)) return random_body::any;
  switch (d.dist) {
    case random::distribution::uniform: return random::unit_range(d) ? random_body::uniform_unit : random_body::uniform;
    case random::distribution::normal: return random_body::normal;
    case random::distribution::bernoulli: return random_body::bernoulli;
    default: return random_body::any;
  }
}

/// The distribution random_run_item<T, B> draws.
template <random_body B>
inline constexpr random::distribution distribution_of =
    B == random_body::normal      ? random::distribution::normal
    : B == random_body::bernoulli ? random::distribution::bernoulli
                                  : random::distribution::uniform;

/// Item `item` (random_item_elems elements) of a random draw's block that is one run of the
/// global tensor from j.base, B (not `any`) being random_body_for's choice for the draw:
/// random_item's values. A whole item that starts a Philox block draws its blocks with no
/// look-up; the last item of a block, or every item of a block that starts inside a Philox
/// block, takes each element's block (by_block).
template <class T, random_body B>
SPMD_HD void random_run_item(const block_job<T>& j, index_t item, const random::draw& d, T identity) {
  static_assert(B != random_body::any, "spmd::cuda::random_run_item: made for one distribution (random_item serves any).");
  constexpr random::distribution dist = distribution_of<B>;
  constexpr bool unit = B == random_body::uniform_unit;
  constexpr int E = random_item_elems;
  constexpr int Per = random::elements_per_block<T>(dist);
  static_assert(E % Per == 0, "an item holds whole Philox blocks");
  index_t e0 = 0;
  const int m = item_span<E>(item, j.n, e0);
  const index_t a0 = j.base + e0;
  T v[E];
  if (j.identity) {  // its own store: nvcc otherwise set v to the identity before every draw
    SPMD_UNROLL
    for (int q = 0; q < E; ++q) v[q] = identity;
    store_item<T, E>(j.out + e0, m, v);
    return;
  }
  if (m == E && (a0 & (Per - 1)) == 0) {
    const std::uint64_t b = d.offset / 4 + static_cast<std::uint64_t>(a0) / Per;
    SPMD_UNROLL
    for (int k = 0; k < E / Per; ++k) {
      T lanes[4] = {};
      random::draw_block_as<dist, unit>(d, random::philox_stream_block(d.seed, b + k), lanes);
      SPMD_UNROLL
      for (int q = 0; q < Per; ++q) v[k * Per + q] = lanes[q];
    }
  } else {
    index_t at[E];
    SPMD_UNROLL
    for (int q = 0; q < E; ++q) at[q] = a0 + q;
    T lanes[4] = {};
    detail::by_block<Per, E>(d, at, m, [&](int q, const random::philox_block& w, int lane, bool fresh) {
      if (fresh) random::draw_block_as<dist, unit>(d, w, lanes);
      // Constant indices only: an array indexed at run time would live in local memory.
      v[q] = lane == 0 ? lanes[0] : lane == 1 ? lanes[1] : lane == 2 ? lanes[2] : lanes[3];
    });
  }
  store_item<T, E>(j.out + e0, m, v);
}

}  // namespace spmd::cuda
