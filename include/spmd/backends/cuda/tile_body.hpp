// spmd/backends/cuda/tile_body.hpp — what one block of the tile kernel does for a transposing
// copy step (step_table.hpp: tile): read whole rows of one source into shared memory, then
// write each op's piece of those rows, contiguous in its destination.
//
// A block's work is one tile of one group: `rows` rows from `row0`. tile_load and tile_store
// are its two phases, with a barrier between them on the device (kernels/step.cuh); the CPU
// tests run every thread's load, then every thread's store, over an emulated grid
// (tests/cuda/run_table.hpp). Host and device, no exceptions, no allocation.
#pragma once

#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/core/config.hpp"

namespace spmd::cuda {

/// The tile a block runs: its group and its rows.
struct tile_place {
  const tile_group* g;
  index_t row0, rows;
};

/// Block `block`'s tile: the last group whose first tile is at or before it.
SPMD_HD inline tile_place tile_of(const step_view& t, index_t block) {
  index_t lo = 0, hi = t.n_tile_groups - 1;
  if (t.tile_uniform > 0) {  // every group has tile_uniform tiles: no search
    index_t unused = 0;
    divmod(block, t.tile_uniform, lo, unused);
    hi = lo;
  }
  while (lo < hi) {
    const index_t mid = (lo + hi + 1) / 2;
    if (t.tiles[mid].tile_begin <= block) lo = mid;
    else hi = mid - 1;
  }
  const tile_group* g = &t.tiles[lo];
  const index_t row0 = (block - g->tile_begin) * g->tile_rows;
  const index_t left = g->rows - row0;
  return {g, row0, left < g->tile_rows ? left : g->tile_rows};
}

/// Phase 1, thread `thread` of `threads`: the tile's rows, contiguous in the source, into
/// shared memory at `pitch` units a row.
SPMD_HD inline void tile_load(const tile_place& p, index_t thread, index_t threads, const wide16* const* in,
                              wide16* smem) {
  const index_t width = p.g->width, n = p.rows * width;
  const wide16* s = in[p.g->src] + p.g->lo + p.row0 * width;
  for (index_t u = thread; u < n; u += threads) {
    index_t i = 0, c = 0;
    divmod(u, width, i, c);
    smem[i * p.g->pitch + c] = s[u];
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
  const index_t rows = p.rows, n = rows * g.width;
  for (index_t u = thread; u < n; u += threads) {
    index_t c = 0, unused = 0;
    divmod(u, rows, c, unused);  // the column whose band of `rows` units holds u
    index_t lo = g.op_begin, hi = g.op_end - 1;
    if (g.run > 0) {
      lo = g.op_begin + c / g.run;
    } else {
      while (lo < hi) {  // the last op starting at or before column c
        const index_t mid = (lo + hi + 1) / 2;
        if (t.ops[mid].geo.soff - g.lo <= c) lo = mid;
        else hi = mid - 1;
      }
    }
    const dev_op& o = t.ops[lo];
    const index_t run = o.geo.run, col = o.geo.soff - g.lo, v = u - rows * col;
    index_t i = 0, k = 0;
    divmod(v, run, i, k);
    out[o.dst][o.geo.doff + p.row0 * run + v] = smem[i * g.pitch + col + k];
  }
}

}  // namespace spmd::cuda
