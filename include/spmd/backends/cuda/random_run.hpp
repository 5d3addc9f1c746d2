// spmd/backends/cuda/random_run.hpp — the random draws' body where every block of the launch
// is one run of the global tensor (a block_geom of one contiguous dim: every block of a
// Shard(0) or Replicate layout, and any tensor of one dim), with the distribution fixed at
// compile time.
//
// random_item (block_body.hpp) serves any block: it finds an item's global index through the
// geometry, checks whether the item is a whole run, and tests the distribution in every
// block it draws. Its kernel needs 60-64 registers (half the SM's warps) and about 280 SASS
// instructions an item of the uniform f32 draw, of which Philox is 80; on an H200 it drew at
// 0.60 of the write floor. Here the blocks are known to be runs that start a Philox block,
// their outputs aligned (all_runs, checked on the host), so an item's global index is the
// block's base plus the item's offset, and the kernel is made for one distribution (uniform
// over [0, 1) on its own: its range arithmetic is the identity): about 195 instructions an item
// and 28 registers for the uniform f32 draw. A warp's items lie side by side, so that its
// stores fill whole sectors. The values are random_item's: the same Philox blocks, the same
// per-lane functions (random::draw_block_as); tests/cuda/block_bodies.cpp runs both bodies
// over the emulated grid against the host. (bench/RESULTS.md: the measurements.)
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

/// Elements random_run_item stores at once: half an item.
inline constexpr int random_piece_elems = random_item_elems / 2;

/// Whether random_run_item serves every block of the batch for a draw of Per elements to a
/// Philox block: each is one run of the global tensor (a single dim of global stride 1:
/// element e of the block is global element base + e) that starts a Philox block, and its
/// output is aligned to a piece's store. (The pool's blocks are; a Shard(0) cut of rows of a
/// multiple of 4 elements starts a block.)
template <class T>
bool all_runs(const job_batch<block_job<T>, block_geom>& b, int per) {
  for (int k = 0; k < b.geoms; ++k)
    if (b.geom[k].nd != 1 || b.geom[k].gstride[0] != 1) return false;
  for (int k = 0; k < b.jobs; ++k)
    if (b.ptr[k].base % per != 0 ||
        reinterpret_cast<std::uintptr_t>(b.ptr[k].out) % whole_store_align<T, random_piece_elems> != 0)
      return false;
  return true;
}

/// The body for draw d over the batch's blocks: random_run_item's for d's distribution where
/// it serves every block, random_item's otherwise.
template <class T>
random_body random_body_for(const job_batch<block_job<T>, block_geom>& b, const random::draw& d) {
  if (d.dist == random::distribution::dropout || !all_runs(b, random::elements_per_block<T>(d.dist)))
    return random_body::any;
  switch (d.dist) {
    case random::distribution::uniform: return random::unit_range(d) ? random_body::uniform_unit : random_body::uniform;
    case random::distribution::normal: return random_body::normal;
    default: return random_body::bernoulli;
  }
}

/// The distribution random_run_item<T, B> draws.
template <random_body B>
inline constexpr random::distribution distribution_of =
    B == random_body::normal      ? random::distribution::normal
    : B == random_body::bernoulli ? random::distribution::bernoulli
                                  : random::distribution::uniform;

namespace detail {
/// N pieces of a block served by random_run_item (all_runs), elements [e + p s, e + p s + m)
/// for p < N, drawn as body B and stored; m below the piece only at the block's end. (The
/// pieces' Philox rounds run side by side, sharing their keys.)
template <class T, random_body B, int N = 1>
SPMD_HD void random_run_pieces(const block_job<T>& j, index_t e, index_t s, int m, const random::draw& d, T identity) {
  constexpr random::distribution dist = distribution_of<B>;
  constexpr int H = random_piece_elems, Per = random::elements_per_block<T>(dist);
  static_assert(H % Per == 0, "a piece holds whole Philox blocks");
  T v[N][H];
  if (j.identity) {
    SPMD_UNROLL
    for (int p = 0; p < N; ++p)
      SPMD_UNROLL
      for (int q = 0; q < H; ++q) v[p][q] = identity;
  } else {
    // e, s and the block's base start Philox blocks (all_runs): a piece is H / Per whole ones.
    const std::uint64_t b = d.offset / 4 + static_cast<std::uint64_t>(j.base + e) / Per;
    SPMD_UNROLL
    for (int k = 0; k < H / Per; ++k)
      SPMD_UNROLL
      for (int p = 0; p < N; ++p) {
        T lanes[4] = {};
        random::draw_block_as<dist, B == random_body::uniform_unit>(
            d, random::philox_stream_block(d.seed, b + static_cast<std::uint64_t>(p * s / Per) + k), lanes);
        SPMD_UNROLL
        for (int q = 0; q < Per; ++q) v[p][k * Per + q] = lanes[q];
      }
  }
  SPMD_UNROLL
  for (int p = 0; p < N; ++p) {
    if (m == H) {
      store_whole<T, H>(j.out + e + p * s, v[p]);  // aligned (all_runs)
    } else {
      SPMD_UNROLL
      for (int q = 0; q < H; ++q)
        if (q < m) j.out[e + p * s + q] = v[p][q];
    }
  }
}
}  // namespace detail

/// Items a group of random_run_item's holds side by side: a warp's.
inline constexpr int random_run_group = 32;

/// Item `item` (random_item_elems elements) of a random draw's block that random_run_item
/// serves (all_runs), B (not `any`) being random_body_for's choice for the draw:
/// random_item's values.
///
/// An item is two pieces of random_piece_elems elements, so that a warp's store writes whole
/// sectors: in a group of random_run_group items (a warp's, where the job's items start on
/// a multiple of it) item l holds pieces l and random_run_group + l of the group's elements.
/// (Holding its E consecutive elements, each thread's two 16-byte stores half-filled 32-byte
/// sectors twice: ncu counted twice the sectors the bytes need, and L2 79% busy.) The last
/// group of a block, if short, keeps consecutive items.
template <class T, random_body B>
SPMD_HD void random_run_item(const block_job<T>& j, index_t item, const random::draw& d, T identity) {
  static_assert(B != random_body::any, "spmd::cuda::random_run_item: made for one distribution (random_item serves any).");
  constexpr int E = random_item_elems, H = random_piece_elems, G = random_run_group;
  const index_t g0 = item / G * (G * E), l = item % G;
  if (g0 + G * E <= j.n) {
    detail::random_run_pieces<T, B, 2>(j, g0 + l * H, G * H, H, d, identity);
    return;
  }
  for (index_t e = item * E; e < item * E + E && e < j.n; e += H)
    detail::random_run_pieces<T, B>(j, e, 0, j.n - e < H ? static_cast<int>(j.n - e) : H, d, identity);
}

/// f.template operator()<b>() for a body b that is not `any` (what a launch of
/// random_run_item made for b runs); nothing for `any`.
template <class F>
void with_run_body(random_body b, F&& f) {
  switch (b) {
    case random_body::uniform_unit: return f.template operator()<random_body::uniform_unit>();
    case random_body::uniform: return f.template operator()<random_body::uniform>();
    case random_body::normal: return f.template operator()<random_body::normal>();
    case random_body::bernoulli: return f.template operator()<random_body::bernoulli>();
    case random_body::any: return;
  }
}

}  // namespace spmd::cuda
