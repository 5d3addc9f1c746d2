// spmd/backends/cuda/block_body.hpp — a rank's block of a global tensor, made on the device:
// what one thread does for one work item (consecutive elements: block_item_elems of them for
// the factories (full, arange) and the Partial split that distribute_device_tensor applies
// after slicing, random_item_elems for the random draws (rand, randn, uniform_, normal_,
// bernoulli_, dropout); block_jobs.hpp builds the jobs).
//
// Every rank's block is one job of one launch (job_batch.hpp); ranks whose blocks have the
// same shape share a geometry. The bodies compute what the host's generate and distribute do
// for the same elements (host/distribute.hpp, random/draw.hpp: the same functions, so the
// same bits), and the CPU tests run them over an emulated grid against those
// (tests/cuda/block_bodies.cpp).
#pragma once

#include <cstdint>

#include "spmd/backends/cuda/divisor.hpp"
#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/core/config.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/partial_split.hpp"
#include "spmd/random/draw.hpp"

namespace spmd::cuda {

/// The shape of a block and the global tensor's row-major strides: element e of the block
/// (row-major over the extents) is global element base + sum of idx[d] * gstride[d].
/// block_geometry (block_jobs.hpp) merges the dims that are contiguous in the global tensor
/// too and drops those of extent 1, so a block of whole rows (Shard(0), Replicate) has one
/// dim and its elements need no division; each extent carries its divisor's magic number.
struct block_geom {
  int nd = 1;
  divisor ext[max_tensor_dims] = {};
  index_t gstride[max_tensor_dims] = {1};
  SPMD_HD friend constexpr bool operator==(const block_geom&, const block_geom&) = default;
};

/// One rank's block: where it is written, how many elements it has, where it starts in the
/// global tensor, and what the Partial placements make of it.
template <class T>
struct block_job {
  T* out = nullptr;
  index_t n = 0;          // elements of the block
  index_t base = 0;       // global row-major index of the block's first element
  index_t part = 0;       // the rank's position in its Partial group (the split's j)
  bool identity = false;  // a generated block that holds the reduce op's identity
};

/// One rank's block of a dropout: its output, its input (shaped alike), its size and where
/// it starts.
template <class T>
struct block_io_job {
  T* out = nullptr;
  const T* in = nullptr;
  index_t n = 0;
  index_t base = 0;
};

/// What a generated block holds: one value, or each element's global row-major index.
enum class fill_kind : unsigned char { constant, index };

/// Elements a work item covers: 4 consecutive elements of one block, so that a thread stores
/// 16 bytes of f32 at once, draws a whole Philox block (4 words) once rather than once per
/// element, and finds its job and its global index once for the four. (One element per
/// thread ran the factories at 0.14-0.35 of the write floor on an H200 and the uniform draw
/// at 0.09: instructions per element, not bytes, set the time; bench/RESULTS.md.)
inline constexpr int block_item_elems = 4;

/// Elements a work item of the random draws and dropout covers: 8, two Philox blocks of f32,
/// so that the job look-up, the global index and the checks of the whole-item path are paid
/// once for two blocks (the draws are instruction-bound: bench/RESULTS.md).
inline constexpr int random_item_elems = 8;

/// Work items of a block of n elements, E to an item.
template <int E = block_item_elems>
SPMD_HD constexpr index_t block_items(index_t n) {
  return (n + E - 1) / E;
}

/// The global row-major index of element e of a block at `base`; `col` gets e's index along
/// the last dim. The outermost dim needs no division (e is below its extent by then).
SPMD_HD inline index_t global_index(const block_geom& g, index_t base, index_t e, index_t& col) {
  const int last = g.nd - 1;
  if (last <= 0) {
    col = e;
    return base + e * g.gstride[0];
  }
  index_t at = base, x = 0;
  g.ext[last].divmod(e, e, x);
  col = x;
  at += x * g.gstride[last];
  for (int d = last - 1; d > 0; --d) {
    g.ext[d].divmod(e, e, x);
    at += x * g.gstride[d];
  }
  return at + e * g.gstride[0];
}
SPMD_HD inline index_t global_index(const block_geom& g, index_t base, index_t e) {
  index_t col = 0;
  return global_index(g, base, e, col);
}

/// The global indices of elements e0 .. e0 + m - 1 of a block (m <= E): the first by
/// global_index, the next ones a step along the row while they stay in it.
template <int E = block_item_elems>
SPMD_HD void global_indices(const block_geom& g, index_t base, index_t e0, int m, index_t* at) {
  index_t col = 0;
  at[0] = global_index(g, base, e0, col);
  const index_t row = g.ext[g.nd - 1].d, step = g.gstride[g.nd - 1];
  SPMD_UNROLL
  for (int k = 1; k < E; ++k)
    if (k < m) at[k] = col + k < row ? at[0] + k * step : global_index(g, base, e0 + k);
}

/// Whether the E elements from e0 are consecutive in the global tensor (in one row of the
/// block, the row contiguous); a0 gets e0's global index.
template <int E>
SPMD_HD bool whole_run(const block_geom& g, index_t base, index_t e0, index_t& a0) {
  index_t col = 0;
  a0 = global_index(g, base, e0, col);
  const int last = g.nd - 1;
  return g.gstride[last] == 1 && col + E <= g.ext[last].d;
}

/// Elements of item `item` of a block of n elements, E to an item: where they start and how
/// many (1 to E).
template <int E = block_item_elems>
SPMD_HD int item_span(index_t item, index_t n, index_t& e0) {
  e0 = item * E;
  return n - e0 < E ? static_cast<int>(n - e0) : E;
}

/// What store_whole's `out` must be aligned to: 16 bytes for items of a multiple of 16 bytes,
/// 8 for items of 8, an element otherwise.
template <class T, int E>
inline constexpr std::size_t whole_store_align = E * sizeof(T) % 16 == 0 ? 16 : E * sizeof(T) == 8 ? 8 : alignof(T);

/// out[0 .. E) = v[0 .. E) in 16-byte stores (one 8-byte store for 8 bytes), `out` aligned
/// to whole_store_align<T, E> (@pre).
template <class T, int E>
SPMD_HD void store_whole(T* out, const T* v) {
  constexpr std::size_t bytes = E * sizeof(T);
  if constexpr (bytes % 16 == 0) {
    wide16 w[bytes / 16];
    __builtin_memcpy(w, v, bytes);
    SPMD_UNROLL
    for (std::size_t k = 0; k < bytes / 16; ++k) reinterpret_cast<wide16*>(out)[k] = w[k];
  } else if constexpr (bytes == 8) {
    unsigned long long w = 0;
    __builtin_memcpy(&w, v, bytes);
    *reinterpret_cast<unsigned long long*>(out) = w;
  } else {
    SPMD_UNROLL
    for (int k = 0; k < E; ++k) out[k] = v[k];
  }
}

/// out[0 .. m) = v[0 .. m) of an item of E elements: store_whole where the item is whole and
/// `out` aligned to it, as the pool's blocks are; element stores otherwise.
template <class T, int E = block_item_elems>
SPMD_HD void store_item(T* out, int m, const T* v) {
  if (m == E && reinterpret_cast<std::uintptr_t>(out) % whole_store_align<T, E> == 0) {
    store_whole<T, E>(out, v);
    return;
  }
  SPMD_UNROLL
  for (int k = 0; k < E; ++k)
    if (k < m) out[k] = v[k];
}

/// v[0 .. m) = in[0 .. m): store_item's mirror (a dropout's input, a block split in place).
template <class T, int E = block_item_elems>
SPMD_HD void load_item(const T* in, int m, T* v) {
  constexpr std::size_t bytes = E * sizeof(T);
  const auto at = reinterpret_cast<std::uintptr_t>(in);
  if constexpr (bytes % 16 == 0) {
    if (m == E && at % 16 == 0) {
      wide16 w[bytes / 16];
      SPMD_UNROLL
      for (std::size_t k = 0; k < bytes / 16; ++k) w[k] = reinterpret_cast<const wide16*>(in)[k];
      __builtin_memcpy(v, w, bytes);
      return;
    }
  } else if constexpr (bytes == 8) {
    if (m == E && at % 8 == 0) {
      const unsigned long long w = *reinterpret_cast<const unsigned long long*>(in);
      __builtin_memcpy(v, &w, bytes);
      return;
    }
  }
  SPMD_UNROLL
  for (int k = 0; k < E; ++k)
    if (k < m) v[k] = in[k];
}

/// Item `item` of a generated block (host::generate with detail::constant_value or
/// detail::index_value: T(global index)).
template <class T>
SPMD_HD void generate_item(const block_job<T>& j, const block_geom& g, index_t item, fill_kind k, T value, T identity) {
  index_t e0 = 0;
  const int m = item_span(item, j.n, e0);
  T v[block_item_elems];
  if (!j.identity && k == fill_kind::index) {
    index_t at[block_item_elems];
    global_indices(g, j.base, e0, m, at);
    SPMD_UNROLL
    for (int q = 0; q < block_item_elems; ++q)
      if (q < m) v[q] = T(at[q]);
  } else {
    SPMD_UNROLL
    for (int q = 0; q < block_item_elems; ++q) v[q] = j.identity ? identity : value;
  }
  store_item(j.out + e0, m, v);
}

/// Item `item` of a sliced block split for its Partial group of n members, in place
/// (host::distribute's split_partial).
template <class T>
SPMD_HD void split_item(const block_job<T>& j, index_t item, reduce_op op, index_t n) {
  index_t e0 = 0;
  const int m = item_span(item, j.n, e0);
  T v[block_item_elems];
  load_item(j.out + e0, m, v);
  SPMD_UNROLL
  for (int q = 0; q < block_item_elems; ++q)
    if (q < m) v[q] = host::detail::partial_part(op, v[q], j.part, n, e0 + q);
  store_item(j.out + e0, m, v);
}

namespace detail {
/// f(q, block of words holding global element at[q], its lane, whether that block is new
/// since q - 1) for q < m <= E, each Philox block computed once (Per elements to a block: a
/// constant, so no 64-bit division).
template <int Per, int E, class F>
SPMD_HD void by_block(const random::draw& d, const index_t* at, int m, F&& f) {
  std::uint64_t held = ~std::uint64_t{0};
  random::philox_block w{};
  SPMD_UNROLL
  for (int q = 0; q < E; ++q) {
    if (q >= m) break;
    const auto i = static_cast<std::uint64_t>(at[q]);
    const std::uint64_t b = d.offset / 4 + i / Per;
    const bool fresh = b != held;
    if (fresh) {
      w = random::philox_stream_block(d.seed, b);
      held = b;
    }
    f(q, w, static_cast<int>(i % Per), fresh);
  }
}

/// The whole-item case of random_item, which every item of a block of whole rows is but the
/// last: E elements consecutive in the global tensor from a0, where a0 starts a Philox block
/// (Per elements to a block: a constant, so the tests are masks and shifts). Their values are
/// E / Per consecutive blocks', drawn with no per-element look-up. False, with nothing
/// written, otherwise.
template <int Per, int E, class T>
SPMD_HD bool random_whole_item(const block_job<T>& j, const block_geom& g, index_t e0, const random::draw& d, T* v) {
  static_assert(Per == 4 || Per == 2, "a Philox block holds 4 words: 4 elements of one word or 2 of two");
  static_assert(E % Per == 0, "an item holds whole Philox blocks");
  index_t a0 = 0;
  if (!whole_run<E>(g, j.base, e0, a0) || (a0 & (Per - 1)) != 0) return false;
  const std::uint64_t b = d.offset / 4 + static_cast<std::uint64_t>(a0) / Per;
  SPMD_UNROLL
  for (int k = 0; k < E / Per; ++k) {
    T lanes[4] = {};
    random::draw_block<T>(d, random::philox_stream_block(d.seed, b + k), lanes);
    SPMD_UNROLL
    for (int q = 0; q < Per; ++q) v[k * Per + q] = lanes[q];
  }
  return true;
}
}  // namespace detail

/// Item `item` (random_item_elems elements) of a random draw's block (host::fill_locals:
/// random::draw_at by global index, or the identity on a Partial group's other members).
template <class T>
SPMD_HD void random_item(const block_job<T>& j, const block_geom& g, index_t item, const random::draw& d, T identity) {
  constexpr int E = random_item_elems;
  index_t e0 = 0;
  const int m = item_span<E>(item, j.n, e0);
  T v[E];
  if (j.identity) {
    SPMD_UNROLL
    for (int q = 0; q < E; ++q) v[q] = identity;
  } else if (const int per = random::elements_per_block<T>(d.dist);
             m < E || !(per == 4 ? detail::random_whole_item<4, E, T>(j, g, e0, d, v)
                                 : detail::random_whole_item<2, E, T>(j, g, e0, d, v))) {
    index_t at[E];
    global_indices<E>(g, j.base, e0, m, at);
    T lanes[4] = {};
    auto pick = [&](int q, const random::philox_block& w, int lane, bool fresh) {
      if (fresh) random::draw_block<T>(d, w, lanes);  // a block's values once (a normal pair's Box-Muller once)
      // Constant indices only: an array indexed at run time would live in local memory.
      v[q] = lane == 0 ? lanes[0] : lane == 1 ? lanes[1] : lane == 2 ? lanes[2] : lanes[3];
    };
    if (per == 4) detail::by_block<4, E>(d, at, m, pick);
    else detail::by_block<2, E>(d, at, m, pick);
  }
  store_item<T, E>(j.out + e0, m, v);
}

/// Item `item` (random_item_elems elements) of a dropout's block (host::dropout_block:
/// random::dropout_at by global index): consecutive Philox blocks for a whole item that
/// starts one, as random_item.
template <class T>
SPMD_HD void dropout_item(const block_io_job<T>& j, const block_geom& g, index_t item, const random::draw& d) {
  constexpr int E = random_item_elems;
  index_t e0 = 0;
  const int m = item_span<E>(item, j.n, e0);
  T v[E];
  load_item<T, E>(j.in + e0, m, v);
  index_t a0 = 0;
  if (m == E && whole_run<E>(g, j.base, e0, a0) && (a0 & 3) == 0) {
    const std::uint64_t b = d.offset / 4 + static_cast<std::uint64_t>(a0) / 4;
    SPMD_UNROLL
    for (int k = 0; k < E / 4; ++k) {
      const random::philox_block w = random::philox_stream_block(d.seed, b + k);
      SPMD_UNROLL
      for (int q = 0; q < 4; ++q) v[4 * k + q] = random::dropout_in_block<T>(d, w, q, v[4 * k + q]);
    }
  } else {
    index_t at[E];
    global_indices<E>(g, j.base, e0, m, at);
    detail::by_block<4, E>(d, at, m, [&](int q, const random::philox_block& w, int lane, bool) {
      v[q] = random::dropout_in_block<T>(d, w, lane, v[q]);
    });
  }
  store_item<T, E>(j.out + e0, m, v);
}

}  // namespace spmd::cuda
