// spmd/backends/cuda/step_table.hpp — a plan step as a table of box operations that one kernel
// launch runs for every rank at once (issue 11's device side; built and tested on the host).
//
// The simulation runs a step's ops one after another, and some of them depend on order: a
// fill step fills a rank's whole new block and then copies the old block into part of it, and
// a replicate op copies what the group's first member assembled in the same step. A launch
// runs every element of every op at once, so the table is built so that each output element
// is written by exactly one work item and nothing reads what the step writes:
//   - fill + copy/scale of a fill step: the fill covers only the complement of the copied box
//     (at most two slabs per dim);
//   - replicate: the member receives the same pieces as its first member (or the first's whole
//     block, when the first keeps it), read from the step's inputs;
//   - move (a chunk step in place): a copy; the backend gives the rank a fresh output buffer.
// Work items are numbered over the ops (`begin` of op k is the number of items before it): a
// reduce or reduce_bcast item computes one output element from the group's inputs in group
// order, as the simulation's kernels do, so the bits are the same.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/divisor.hpp"
#include "spmd/core/config.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::cuda {

/// One box operation of a step, on the device.
struct dev_op {
  // copy, fill, scale, reduce, reduce_bcast; replicate here means a copy to several ranks
  // (fan-out: `dst` is an offset into the step's fanout list); move never reaches a table.
  op_code code = op_code::copy;
  index_t src = 0;               // mesh index in the step's inputs, or the group (reduce*)
  index_t dst = 0;               // mesh index in the step's outputs (replicate: fanout offset)
  run_geom geo{};
  index_t begin = 0;             // the first work item of this op
};

/// The ops of a transposing copy step that read one source, as the tile kernel runs them
/// (tile()): rows of `width` units read whole into shared memory, each op's piece of the rows
/// written out whole.
struct tile_group {
  index_t src = 0;                  // mesh index read
  index_t op_begin = 0, op_end = 0;  // its ops in the table (sorted by source)
  index_t rows = 0;                 // rows every op has (its outer dims, flattened)
  index_t width = 0;                // units per source row: the ops' runs side by side
  index_t pitch = 0;                // units per row in shared memory (width, padded)
  index_t lo = 0;                   // source offset of row 0's first unit
  index_t run = 0;                  // every op's run where they are equal, else 0
  index_t tile_rows = 0;            // rows per tile (one block of the launch)
  index_t tile_begin = 0;           // its first tile
  // The magic numbers of the divisions each unit of a tile does (tile_body.hpp): by width,
  // by the rows of a whole tile and of the group's last, by run (where the runs are equal).
  divisor by_width{}, by_tile_rows{}, by_last_rows{}, by_run{};
};

/// A step as the device reads it (pointers into device or host memory, as the caller built it).
struct step_view {
  reduce_op op = reduce_op::sum;
  index_t group_size = 1;
  const index_t* members = nullptr;  // members[g * group_size + j]: mesh index, group order
  const dev_op* ops = nullptr;
  index_t n_ops = 0;
  index_t items = 0;                 // work items in all
  const index_t* fanout = nullptr;   // at a replicate op's dst: a count, then that many ranks
  index_t uniform = 0;               // items of every op, where all ops have as many (else 0)
  int per_thread = 1;                // items a thread moves, strided by its block (spread_copies)
  const tile_group* tiles = nullptr;  // a tiled step's groups (tile), by first tile
  index_t n_tile_groups = 0;
  index_t tile_blocks = 0;           // tiles in all: the tile kernel's blocks (0: not tiled)
  index_t tile_uniform = 0;          // tiles of every group, where all have as many (else 0)
  divisor by_uniform{}, by_tile_uniform{};  // their magic numbers (1 where they are 0)
};

/// The host-side table of one step (vectors; copy them to the device to launch).
struct step_table {
  reduce_op op = reduce_op::sum;
  index_t group_size = 1;
  std::vector<index_t> members;
  std::vector<dev_op> ops;
  index_t items = 0;
  std::vector<index_t> fanout;
  index_t uniform = 0;
  int per_thread = 1;
  std::vector<tile_group> tiles;
  index_t tile_blocks = 0;
  index_t tile_uniform = 0;
  /// The view of the table's host arrays; the magic numbers computed here, from the fields
  /// as they are, so no later change of uniform or tile_uniform leaves them stale.
  step_view view() const {
    return {op,    group_size,   members.data(), ops.data(), static_cast<index_t>(ops.size()),
            items, fanout.data(), uniform,       per_thread, tiles.data(),
            static_cast<index_t>(tiles.size()), tile_blocks, tile_uniform,
            divisor(uniform > 0 ? uniform : 1), divisor(tile_uniform > 0 ? tile_uniform : 1)};
  }
};

/// A small step's whole table, passed to the kernel as a parameter instead of read from device
/// memory. A small step is latency-bound: one block whose threads first read their op, then
/// its group's members or fan-out, then the data, each read waiting on the one before (ncu on
/// the 4 KiB P->R kernel, H200: 92% of cycles with no warp ready, mostly waiting on those
/// loads). From the parameter they are constant-cache reads, and a store cannot alias them, so
/// the fan-out's and the members' indices load ahead of the stores. The body is the same
/// (wide_thread over resolved()), so the bits are the same.
inline constexpr index_t inline_ops = 8, inline_members = 64, inline_fanout = 80;
/// The largest step (work items) that runs from an inline table: 128 blocks of 256 threads,
/// about one block per SM of an H100 or H200. A larger step's threads share the table's cache
/// lines and are bound by bandwidth, not by the table's reads.
inline constexpr index_t inline_items = index_t{1} << 15;
/// Members loaded at once by a small sum's or average's thread (combine_units' B): 8, or 1
/// (one at a time, as the large steps) for the benchmark's comparison. A table without
/// reductions, or with groups of more than 8, keeps 1; products, max and min load one at a
/// time in either kernel (reduce_unit).
inline constexpr int inline_batch = 8;
/// Threads in a block of the step kernels (kernels/step.cuh's step_threads, their launch bound).
inline constexpr index_t step_block_threads = 256;
/// The fewest blocks a small step's launch spreads its items over (one item a thread, blocks
/// of a warp at least): 1 keeps blocks of step_block_threads, as every lease measured. A 4 KiB
/// P->R on mesh 8 is 256 items: one block, so one SM issues its eight warps' loads of 32 KiB
/// and stores of 32 KiB (ncu, H200: 12.3 of 23.2 cycles between instructions waiting on
/// L1TEX). 8 would run it as 8 blocks of 32 threads on 8 SMs. Not measured yet:
/// bench/step_kernels --kib 4 times both ("8+ blocks", "32+ blocks"), redistribute_cuda under
/// SPMD_CUDA_SMALL_STEP_BLOCKS (small_step_blocks) the whole redistribute, and this is to
/// follow them.
inline constexpr index_t inline_spread_blocks = 1;
/// SPMD_CUDA_SMALL_STEP_BLOCKS's value `text` as a spread (1 to 1024 blocks), or
/// std::invalid_argument naming it.
inline index_t parse_small_step_blocks(const char* text) {
  char* end = nullptr;
  const long v = std::strtol(text, &end, 10);  // (which takes leading spaces and signs: digits only)
  if (text[0] < '0' || text[0] > '9' || *end != '\0' || v < 1 || v > 1024)
    throw std::invalid_argument(std::string("spmd::cuda: SPMD_CUDA_SMALL_STEP_BLOCKS=") + text +
                                " is not a count of blocks from 1 to 1024");
  return static_cast<index_t>(v);
}
/// The spread of this process's small steps: SPMD_CUDA_SMALL_STEP_BLOCKS from the environment
/// when set (read at the first small step; a bad value fails every redistribute that has one,
/// naming it), else inline_spread_blocks. A tuning knob, as the best spread may differ between
/// GPUs, and what lets one run of a benchmark time several (bench/gpu-run.sh).
inline index_t small_step_blocks() {
  static const index_t spread = [] {
    const char* e = std::getenv("SPMD_CUDA_SMALL_STEP_BLOCKS");
    return e != nullptr ? parse_small_step_blocks(e) : inline_spread_blocks;
  }();
  return spread;
}

/// Threads a block for a small step of `items` work items: the fewest, a power of two from a
/// warp (32) to step_block_threads, that cover them in `spread` blocks.
constexpr index_t inline_threads(index_t items, index_t spread = inline_spread_blocks) {
  index_t t = 32;
  while (t < step_block_threads && t * spread < items) t *= 2;
  return t;
}
/// Blocks and threads of a launch.
struct launch_shape {
  index_t blocks = 0, threads = 0;
};

struct inline_table {
  step_view view{};  // scalars; resolved() points its arrays here
  int batch = 1;     // combine_units' B for this table's reductions: 1 or inline_batch
  index_t threads = step_block_threads;  // a block of its launch (inline_threads; <= step_block_threads)
  dev_op ops[inline_ops]{};
  index_t members[inline_members]{};
  index_t fanout[inline_fanout]{};
  SPMD_HD step_view resolved() const {
    step_view v = view;
    v.ops = ops;
    v.members = members;
    v.fanout = fanout;
    return v;
  }
};

/// Whether finished table t runs from an inline table: one item a thread (neither tiled nor
/// spread), at most inline_items items, and its arrays fit.
inline bool fits_inline(const step_table& t) {
  return t.tile_blocks == 0 && t.per_thread == 1 && t.items > 0 && t.items <= inline_items &&
         static_cast<index_t>(t.ops.size()) <= inline_ops &&
         static_cast<index_t>(t.members.size()) <= inline_members &&
         static_cast<index_t>(t.fanout.size()) <= inline_fanout;
}

/// t as an inline table (throws std::logic_error unless fits_inline(t)).
inline inline_table make_inline(const step_table& t) {
  if (!fits_inline(t)) throw std::logic_error("spmd::cuda::make_inline: the step's table does not fit a kernel parameter");
  inline_table x;
  x.view = t.view();
  x.view.ops = nullptr;
  x.view.members = nullptr;
  x.view.fanout = nullptr;
  x.view.tiles = nullptr;
  std::copy(t.ops.begin(), t.ops.end(), x.ops);
  std::copy(t.members.begin(), t.members.end(), x.members);
  std::copy(t.fanout.begin(), t.fanout.end(), x.fanout);
  bool reduces = false;
  for (const dev_op& o : t.ops) reduces = reduces || o.code == op_code::reduce || o.code == op_code::reduce_bcast;
  if (reduces && t.group_size > 1 && t.group_size <= inline_batch) x.batch = inline_batch;
  x.threads = inline_threads(t.items, small_step_blocks());
  return x;
}

/// The launch of a small step's kernel: one work item a thread, x.threads a block.
inline launch_shape inline_launch(const inline_table& x) {
  return {(x.view.items + x.threads - 1) / x.threads, x.threads};
}

/// The byte offsets of a table's arrays in one block (each 256-byte aligned), for upload.
struct table_layout {
  std::size_t members = 0, ops = 0, fanout = 0, tiles = 0, bytes = 0;
};
inline table_layout layout_of(const step_table& t) {
  auto up = [](std::size_t n) { return (n + 255) / 256 * 256; };
  table_layout l;
  l.members = 0;
  l.ops = up(t.members.size() * sizeof(index_t));
  l.fanout = l.ops + up(t.ops.size() * sizeof(dev_op));
  l.tiles = l.fanout + up(t.fanout.size() * sizeof(index_t));
  l.bytes = l.tiles + up(t.tiles.size() * sizeof(tile_group));
  return l;
}
/// Copies the table's arrays into `dst` (layout_of(t).bytes bytes).
inline void pack(const step_table& t, unsigned char* dst) {
  const table_layout l = layout_of(t);
  if (!t.members.empty()) std::memcpy(dst + l.members, t.members.data(), t.members.size() * sizeof(index_t));
  if (!t.ops.empty()) std::memcpy(dst + l.ops, t.ops.data(), t.ops.size() * sizeof(dev_op));
  if (!t.fanout.empty()) std::memcpy(dst + l.fanout, t.fanout.data(), t.fanout.size() * sizeof(index_t));
  if (!t.tiles.empty()) std::memcpy(dst + l.tiles, t.tiles.data(), t.tiles.size() * sizeof(tile_group));
}
/// The table's view with its arrays at `base` (where pack put them, on the device).
inline step_view view_at(const step_table& t, const unsigned char* base) {
  const table_layout l = layout_of(t);
  step_view v = t.view();
  v.members = reinterpret_cast<const index_t*>(base + l.members);
  v.ops = reinterpret_cast<const dev_op*>(base + l.ops);
  v.fanout = reinterpret_cast<const index_t*>(base + l.fanout);
  v.tiles = reinterpret_cast<const tile_group*>(base + l.tiles);
  return v;
}

namespace detail {

/// The parts of box `outer` outside box `inner` (inner inside outer, or empty): slabs below and
/// above inner along each dim, the earlier dims restricted to inner's range.
inline std::vector<local_box> complement(const local_box& outer, const local_box& inner) {
  std::vector<local_box> out;
  if (box_volume(inner) == 0) {
    out.push_back(outer);
    return out;
  }
  local_box rest = outer;
  for (int d = 0; d < outer.shape.size(); ++d) {
    const index_t lo = inner.offset[d], hi = inner.offset[d] + inner.shape[d];
    const index_t rlo = rest.offset[d], rhi = rest.offset[d] + rest.shape[d];
    if (lo > rlo) {
      local_box below = rest;
      below.shape[d] = lo - rlo;
      out.push_back(below);
    }
    if (hi < rhi) {
      local_box above = rest;
      above.offset[d] = hi;
      above.shape[d] = rhi - hi;
      out.push_back(above);
    }
    rest.offset[d] = lo;
    rest.shape[d] = hi - lo;
  }
  return out;
}

/// Items an op takes: one per output element (reduce_bcast: one per element of the block,
/// written to every member).
inline index_t items_of(const dev_op& o) { return o.geo.count(); }

}  // namespace detail

inline void merge_fanout(step_table& t);

/// The table of step s (lowered by build_schedule for global shape `global`; @pre no error).
inline step_table build_step_table(const plan_step& step, const step_schedule& s,
                                   const shape_vec& global) {
  step_table t;
  t.op = s.op;
  t.group_size = s.group_size;
  t.members = s.members;
  auto add = [&t](op_code code, index_t src, index_t dst, const run_geom& geo) {
    if (geo.count() == 0) return;
    dev_op o{code, src, dst, geo, t.items};
    t.items += detail::items_of(o);
    t.ops.push_back(o);
  };
  const mesh_shape_vec& mesh = step.from.mesh;
  auto box_a = [&](index_t r) { return box_at(step.from, global, unravel(mesh, r)); };
  auto box_b = [&](index_t r) { return box_at(step.to, global, unravel(mesh, r)); };

  // Replicas: rank -> the first member whose block it copies.
  std::vector<index_t> first_of(s.ranks.size(), -1);
  for (const sched_op& o : s.ops)
    if (o.code == op_code::replicate) first_of[static_cast<std::size_t>(o.dst)] = o.src;

  for (const sched_op& o : s.ops) {
    switch (o.code) {
      case op_code::copy:
      case op_code::move:
        add(op_code::copy, o.src, o.dst, o.geo);
        if (o.code == op_code::copy)  // the same piece for every replica of o.dst
          for (std::size_t r = 0; r < first_of.size(); ++r)
            if (first_of[r] == o.dst) add(op_code::copy, o.src, static_cast<index_t>(r), o.geo);
        break;
      case op_code::fill: {
        // A fill step's fill is followed by this rank's copy/scale of its old block: fill only
        // around it. A partition's fill covers the whole block.
        const local_box b = box_b(o.dst), a = box_a(o.dst);
        const bool around = step.kind == step_kind::fill && !same_box(a, b);
        if (!around) {
          add(op_code::fill, o.src, o.dst, o.geo);
        } else {
          for (const local_box& part : detail::complement(b, a))
            add(op_code::fill, o.src, o.dst, make_geom(part, b, b));
        }
        break;
      }
      case op_code::scale:
      case op_code::reduce:
      case op_code::reduce_bcast: add(o.code, o.src, o.dst, o.geo); break;
      case op_code::replicate:
        // A first member that keeps its block received no pieces: copy its block whole.
        if (s.ranks[static_cast<std::size_t>(o.src)].how == disposition::keep)
          add(op_code::copy, o.src, o.dst, o.geo);
        break;
    }
  }
  merge_fanout(t);
  return t;
}

/// Merges copies that read the same piece of the same rank into the same place of several
/// ranks (an all_gather's pieces go to every member at the same offsets): one work item then
/// reads the element once and writes it to each of them, so the step reads its inputs once.
inline void merge_fanout(step_table& t) {
  std::map<std::string, std::vector<std::size_t>> same;  // (src, geometry) -> copies
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const dev_op& o = t.ops[i];
    if (o.code != op_code::copy) continue;
    std::string key(reinterpret_cast<const char*>(&o.src), sizeof(o.src));
    key.append(reinterpret_cast<const char*>(&o.geo), sizeof(o.geo));
    same[key].push_back(i);
  }
  std::vector<bool> gone(t.ops.size(), false);
  std::vector<dev_op> merged;
  for (const auto& [key, list] : same) {
    if (list.size() < 2) continue;
    dev_op m = t.ops[list[0]];
    m.code = op_code::replicate;
    m.dst = static_cast<index_t>(t.fanout.size());
    t.fanout.push_back(static_cast<index_t>(list.size()));
    for (std::size_t i : list) {
      t.fanout.push_back(t.ops[i].dst);
      gone[i] = true;
    }
    merged.push_back(m);
  }
  if (merged.empty()) return;
  std::vector<dev_op> ops;
  for (std::size_t i = 0; i < t.ops.size(); ++i)
    if (!gone[i]) ops.push_back(t.ops[i]);
  ops.insert(ops.end(), merged.begin(), merged.end());
  t.ops = std::move(ops);
  t.items = 0;
  for (dev_op& o : t.ops) {
    o.begin = t.items;
    t.items += o.geo.count();
  }
}

/// Sixteen bytes moved as one (a widened copy step's element).
struct alignas(16) wide16 {
  unsigned int w[4];
};

/// True when g's runs are contiguous and its run, offsets and strides are multiples of k.
inline bool divisible(const run_geom& g, index_t k) {
  if (!g.contiguous() || g.run % k != 0 || g.soff % k != 0 || g.doff % k != 0) return false;
  for (int d = 0; d < g.nd; ++d)
    if (g.sstr[d] % k != 0 || g.dstr[d] % k != 0) return false;
  return true;
}
/// g counted in groups of k elements (@pre divisible(g, k)).
inline run_geom divided(run_geom g, index_t k) {
  g.run /= k;
  g.soff /= k;
  g.doff /= k;
  for (int d = 0; d < g.nd; ++d) {
    g.sstr[d] /= k;
    g.dstr[d] /= k;
  }
  return g;
}

/// True when region g moves whole 16-byte units of elements of `elem_bytes`.
inline bool widenable(const run_geom& g, index_t elem_bytes) {
  return elem_bytes > 0 && 16 % elem_bytes == 0 && elem_bytes != 16 && divisible(g, 16 / elem_bytes);
}
/// g in 16-byte units (@pre widenable(g, elem_bytes)).
inline run_geom widened(const run_geom& g, index_t elem_bytes) { return divided(g, 16 / elem_bytes); }

namespace detail {
/// Every op of t counted in groups of k (@pre each divisible), its items renumbered.
inline void regroup(step_table& t, index_t k) {
  t.items = 0;
  for (dev_op& o : t.ops) {
    o.geo = divided(o.geo, k);
    o.begin = t.items;
    t.items += o.geo.count();
  }
}
}  // namespace detail

/// Rewrites `t` in 16-byte units when every op's region allows it (widenable; buffers are
/// 16-byte aligned: the device pool's are 256). A work item then moves 16 bytes with one load
/// and one store per buffer: a copy moves the unit, a fill writes it, and a scale or a
/// reduction combines its elements lane by lane, each in the group order of the element-wise
/// table, so the bits are the same. Returns false (and leaves `t`) otherwise.
inline bool widen(step_table& t, index_t elem_bytes) {
  if (t.ops.empty()) return false;
  for (const dev_op& o : t.ops)
    if (!widenable(o.geo, elem_bytes)) return false;
  detail::regroup(t, 16 / elem_bytes);
  return true;
}

/// Items a thread of a spread copy step moves, and the step size from which copies spread
/// (bench/step_kernels on an H200: distribute_device_tensor's S(0) slicing at 256 MiB ran at
/// 0.92 of the floor spread over 4, 0.80 over 2 and 0.76 at one item a thread; at 4 and 64
/// KiB one item a thread took 1.1 and 1.4 us, spread over 2 1.3 and 2.0, over 4 1.3 and 2.9:
/// with few items, spreading leaves the device emptier).
inline constexpr int spread_k = 4;
inline constexpr index_t spread_big = index_t{1} << 20;

/// Whether every op of `t` is a copy to one rank (no fan-out): what spread_copies takes.
inline bool spreadable(const step_table& t) {
  if (t.ops.empty() || t.per_thread != 1 || !t.fanout.empty()) return false;
  for (const dev_op& o : t.ops)
    if (o.code != op_code::copy) return false;
  return true;
}

/// Where a widened step of at least spread_big items is spreadable: each thread moves
/// spread_k items, its block's items strided by the block (every load coalesced across the
/// warp), all its loads issued before the first store (true). One 16-byte item a thread
/// leaves too few bytes in flight behind the look-up of its place: the S(0) slicing ran at
/// 0.55-0.79 of the floor that way (0.56 with 64-byte items), 0.91-0.94 spread. Fan-out
/// copies stay one item a thread (0.92 of the floor against 0.89-0.91 spread).
inline bool spread_copies(step_table& t) {
  if (t.items < spread_big || !spreadable(t)) return false;
  t.per_thread = spread_k;
  return true;
}

/// Shared memory of the tile kernel, in 16-byte units (16 KiB a block).
inline constexpr index_t tile_units = 1024;

/// A tile group's magic numbers, from its width, rows, tile_rows and run (tile() sets them;
/// whoever changes those fields calls it again).
inline void derive_divisors(tile_group& g) {
  g.by_width = divisor(g.width);
  g.by_tile_rows = divisor(g.tile_rows);
  g.by_last_rows = divisor(g.rows % g.tile_rows == 0 ? g.tile_rows : g.rows % g.tile_rows);
  g.by_run = divisor(g.run > 0 ? g.run : 1);
}

namespace detail {
/// The rows of op g flattened: its outer dims row-major over both buffers, the source's rows
/// `width` apart and the destination's `run` apart (its piece contiguous); their count, or -1.
inline index_t flat_rows(const run_geom& g, index_t width) {
  index_t rows = 1, s = width, d = g.run;
  for (int k = g.nd - 1; k >= 0; --k) {
    if (g.sstr[k] != s || g.dstr[k] != d) return -1;
    s *= g.ext[k];
    d *= g.ext[k];
    rows *= g.ext[k];
  }
  return rows;
}
}  // namespace detail

/// Rewrites a widened copy step whose pieces are short runs (under 128 bytes) cut from the
/// rows of each source — a transposing step: S(i)->S(j), an all_to_all — for the tile kernel
/// (tile_body.hpp): each block reads whole rows of one source into shared memory, contiguous
/// in the source, then writes each op's piece of them, contiguous in its destination, so both
/// the reads and the writes are whole lines where the step-per-item kernel read 32-byte runs
/// 256 bytes apart. Applies where, for every source, its ops are copies of contiguous runs
/// whose rows are `width` apart in the source and `run` apart in the destination, side by
/// side they cover [0, width) once, and a row fits the tile; then sorts the ops by source,
/// sets t.tiles and t.tile_blocks and returns true. Otherwise leaves t and returns false.
inline bool tile(step_table& t) {
  if (t.ops.empty() || !t.fanout.empty() || t.per_thread != 1) return false;
  std::vector<dev_op> ops = t.ops;
  // By source, then by column: a tile's store finds a unit's op by its column (tile_body.hpp).
  std::stable_sort(ops.begin(), ops.end(), [](const dev_op& a, const dev_op& b) {
    return a.src != b.src ? a.src < b.src : a.geo.soff < b.geo.soff;
  });
  std::vector<tile_group> groups;
  index_t blocks = 0;
  for (std::size_t i = 0; i < ops.size();) {
    std::size_t j = i;
    while (j < ops.size() && ops[j].src == ops[i].src) ++j;
    tile_group g;
    g.src = ops[i].src;
    g.op_begin = static_cast<index_t>(i);
    g.op_end = static_cast<index_t>(j);
    g.lo = ops[i].geo.soff;
    for (std::size_t k = i; k < j; ++k) {
      const run_geom& o = ops[k].geo;
      if (ops[k].code != op_code::copy || !o.contiguous() || o.run >= 8) return false;
      g.width += o.run;
      if (o.soff < g.lo) g.lo = o.soff;
    }
    // Rows `width` apart: the source row stride of the ops with outer dims (one row if none).
    for (std::size_t k = i; k < j; ++k) {
      const run_geom& o = ops[k].geo;
      const index_t rows = detail::flat_rows(o, g.width);
      if (rows < 0 || (k > i && rows != g.rows)) return false;
      g.rows = rows;
    }
    // The pieces side by side cover [lo, lo + width) once.
    std::vector<std::pair<index_t, index_t>> cols;
    for (std::size_t k = i; k < j; ++k) cols.push_back({ops[k].geo.soff - g.lo, ops[k].geo.run});
    std::sort(cols.begin(), cols.end());
    index_t at = 0;
    for (const auto& [c, n] : cols) {
      if (c != at) return false;
      at += n;
    }
    // Rows padded so that a warp's reads of one op's pieces fall in distinct banks (16-byte
    // units, 8 to a 128-byte bank cycle: pitch = run mod 8).
    const index_t run = ops[i].geo.run;
    g.run = run;
    for (std::size_t k = i; k < j; ++k)
      if (ops[k].geo.run != run) g.run = 0;
    g.pitch = g.width + ((run - g.width) % 8 + 8) % 8;
    if (g.pitch > tile_units) return false;
    g.tile_rows = tile_units / g.pitch;
    g.tile_begin = blocks;
    derive_divisors(g);
    blocks += (g.rows + g.tile_rows - 1) / g.tile_rows;
    groups.push_back(g);
    i = j;
  }
  t.ops = std::move(ops);
  t.items = 0;
  for (dev_op& o : t.ops) {
    o.begin = t.items;
    t.items += o.geo.count();
  }
  // Groups of one tile count (every source's rows alike, as an even split gives): a block's
  // group is then block / count, not a search (a chain of dependent table reads in a small step).
  t.tile_uniform = blocks / static_cast<index_t>(groups.size());
  for (const tile_group& g : groups)
    if ((g.rows + g.tile_rows - 1) / g.tile_rows != t.tile_uniform) t.tile_uniform = 0;
  t.tiles = std::move(groups);
  t.tile_blocks = blocks;
  return true;
}

/// Sets t.uniform where every op has the same number of items (a work item's op is then
/// item / uniform, not a binary search over the ops' first items).
inline void mark_uniform(step_table& t) {
  t.uniform = 0;
  if (t.ops.empty()) return;
  const index_t n = t.ops[0].geo.count();
  for (const dev_op& o : t.ops)
    if (o.geo.count() != n) return;
  t.uniform = n;
}

/// The 16-byte items from which a transposing step runs by tiles. The tile kernel reads and
/// writes whole lines (S(0)->S(1) at 256 MiB: 0.86 of the floor tiled, 0.67 not, H200) but a
/// block first fills shared memory, waits, then writes: a small step's latency. On an H200
/// (bench/results/step_kernels_h200_28m.txt, kernel time above an empty graph node) the step
/// ran faster untiled up to 1 MiB (4 KiB: 1.55 against 1.72 us; 256 KiB: 1.84 against 2.53;
/// 1 MiB: 2.05 against 2.63) and faster tiled from 4 MiB (3.44 against 3.96; 16 MiB: 8.35
/// against 11.62). 2 MiB, between the two, is where the tiles start.
inline constexpr index_t tile_big = index_t{1} << 17;

/// Whether finish() runs a transposing step by tiles: from tile_big items (what the backend
/// does), always (the emulation tests, which prove the tile path on small steps), never.
enum class tiling { by_size, always, never };

/// A built table as the kernels run it: in 16-byte units where it can be (then true); then a
/// transposing copy step in tiles (as `how` says), another large copy step spread over
/// spread_k items a thread; ops of equal size found without a search.
inline bool finish(step_table& t, index_t elem_bytes, tiling how = tiling::by_size) {
  const bool wide = widen(t, elem_bytes);
  const bool tiles = how == tiling::always || (how == tiling::by_size && t.items >= tile_big);
  if (wide && !(tiles && tile(t))) spread_copies(t);
  mark_uniform(t);
  return wide;
}

}  // namespace spmd::cuda
