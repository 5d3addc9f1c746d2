// spmd/backends/cuda/tile_body.hpp — what one block of the tile kernel does for a transposing
// copy step (step_table.hpp: tile): read whole rows of one source into shared memory, then
// write each op's piece of those rows, contiguous in its destination.
//
// A block's work is one tile of one group: `rows` rows from `row0`. tile_load and tile_store
// are its two phases, with a barrier between them on the device (kernels/step.cuh); the CPU
// tests run every thread's load, then every thread's store, over an emulated grid
// (tests/cuda/run_table.hpp). Host and device, no exceptions, no allocation.
#pragma once

#include <cstdint>

#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/core/config.hpp"

namespace spmd::cuda {

/// The tile a block runs: its group and its rows (with their magic number).
struct tile_place {
  const tile_group* g;
  index_t row0, rows;
  divisor by_rows;
};

/// Block `block`'s tile: the last group whose first tile is at or before it.
SPMD_HD inline tile_place tile_of(const step_view& t, index_t block) {
  index_t lo = 0, hi = t.n_tile_groups - 1;
  if (t.tile_uniform > 0) {  // every group has tile_uniform tiles: no search
    index_t unused = 0;
    t.by_tile_uniform.divmod(block, lo, unused);
    hi = lo;
  }
  while (lo < hi) {
    const index_t mid = (lo + hi + 1) / 2;
    if (t.tiles[mid].tile_begin <= block) lo = mid;
    else hi = mid - 1;
  }
  const tile_group* g = &t.tiles[lo];
  const index_t row0 = (block - g->tile_begin) * g->tile_rows;
  const index_t left = g->rows > row0 ? g->rows - row0 : 0;  // (0 only for a wrong table: the tests' mutations)
  return left < g->tile_rows ? tile_place{g, row0, left, g->by_last_rows} : tile_place{g, row0, g->tile_rows, g->by_tile_rows};
}

/// Units a thread loads before it stores the first into shared memory (a tile is at most
/// tile_units: 4 a thread of the kernel's 256): one load at a time left too few bytes in
/// flight, as the spread copies found (step_table.hpp).
inline constexpr int tile_loads = 4;

// A tile holds at most tile_units units, so the unit arithmetic inside one is 32-bit: the
// magic numbers' quotient needs no 64-bit fallback, which held the kernel at 64 registers
// (4 blocks an SM) where it had needed 32.
static_assert(tile_units <= 0x7fffffff, "a tile's units are counted in 32 bits");

/// Phase 1, thread `thread` of `threads`: the tile's rows, contiguous in the source, into
/// shared memory at `pitch` units a row.
SPMD_HD inline void tile_load(const tile_place& p, index_t thread, index_t threads, const wide16* const* in,
                              wide16* smem) {
  const auto width = static_cast<std::uint32_t>(p.g->width), pitch = static_cast<std::uint32_t>(p.g->pitch);
  const auto n = static_cast<std::uint32_t>(p.rows) * width, step = static_cast<std::uint32_t>(threads);
  const wide16* s = in[p.g->src] + p.g->lo + p.row0 * p.g->width;
  for (auto u0 = static_cast<std::uint32_t>(thread); u0 < n; u0 += step * tile_loads) {
    wide16 v[tile_loads];
    SPMD_UNROLL
    for (int k = 0; k < tile_loads; ++k)
      if (u0 + k * step < n) v[k] = s[u0 + k * step];
    SPMD_UNROLL
    for (int k = 0; k < tile_loads; ++k) {
      const std::uint32_t u = u0 + k * step;
      if (u < n) {
        const std::uint32_t i = p.g->by_width.quotient(u), c = u - i * width;
        smem[i * pitch + c] = v[k];
      }
    }
  }
}

/// Phase 2: each op's piece of the tile's rows (its run at its column), written contiguous:
/// its destination holds its rows `run` apart. The tile's units are one range over every op
/// (op q's piece is units [rows * col_q, rows * (col_q + run_q)), the ops sorted by column),
/// so every thread has a unit to store whatever the runs: a loop over the ops in turn left
/// most threads idle where a piece is short, and chained each op's table read behind the last.
SPMD_HD inline void tile_store(const step_view& t, const tile_place& p, index_t thread, index_t threads,
                               const wide16* smem, wide16* const* out) {
  const tile_group& g = *p.g;
  const auto rows = static_cast<std::uint32_t>(p.rows), pitch = static_cast<std::uint32_t>(g.pitch);
  const std::uint32_t n = rows * static_cast<std::uint32_t>(g.width);
  for (auto u = static_cast<std::uint32_t>(thread); u < n; u += static_cast<std::uint32_t>(threads)) {
    const std::uint32_t c = p.by_rows.quotient(u);  // the column whose band of `rows` units holds u
    index_t lo = g.op_begin, hi = g.op_end - 1;
    if (g.run > 0) {
      lo = g.op_begin + g.by_run.quotient(c);
    } else {
      while (lo < hi) {  // the last op starting at or before column c
        const index_t mid = (lo + hi + 1) / 2;
        if (t.ops[mid].geo.soff - g.lo <= c) lo = mid;
        else hi = mid - 1;
      }
    }
    const dev_op& o = t.ops[lo];
    const auto run = static_cast<std::uint32_t>(o.geo.run), col = static_cast<std::uint32_t>(o.geo.soff - g.lo);
    const std::uint32_t v = u - rows * col;
    const std::uint32_t i = g.run > 0 ? g.by_run.quotient(v) : v / run, k = v - i * run;
    out[o.dst][o.geo.doff + p.row0 * o.geo.run + v] = smem[i * pitch + col + k];
  }
}

}  // namespace spmd::cuda
