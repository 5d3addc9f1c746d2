// spmd/backends/cuda/block_body.hpp — a rank's block of a global tensor, made on the device:
// what one thread does for one work item (block_item_elems consecutive elements) of the
// factories (full, arange), of the random draws (rand, randn, uniform_, normal_, bernoulli_,
// dropout) and of the Partial split that distribute_device_tensor applies after slicing
// (block_jobs.hpp builds the jobs).
//
// Every rank's block is one job of one launch (job_batch.hpp); ranks whose blocks have the
// same shape share a geometry. The bodies compute what the host's generate and distribute do
// for the same elements (host/distribute.hpp, random/draw.hpp: the same functions, so the
// same bits), and the CPU tests run them over an emulated grid against those
// (tests/cuda/block_bodies.cpp).
#pragma once

#include <cstdint>

#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/core/config.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/partial_split.hpp"
#include "spmd/random/draw.hpp"

namespace spmd::cuda {

/// The shape of a block and the global tensor's row-major strides: element e of the block
/// (row-major over `shape`) is global element base + sum of idx[d] * gstride[d].
struct block_geom {
  int nd = 0;
  index_t shape[max_tensor_dims] = {};
  index_t gstride[max_tensor_dims] = {};
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

/// Work items of a block of n elements.
SPMD_HD constexpr index_t block_items(index_t n) { return (n + block_item_elems - 1) / block_item_elems; }

/// The global row-major index of element e of a block at `base`; `col` gets e's index along
/// the last dim.
SPMD_HD inline index_t global_index(const block_geom& g, index_t base, index_t e, index_t& col) {
  index_t at = base;
  col = 0;
  for (int d = g.nd - 1; d >= 0; --d) {
    index_t x = 0;
    divmod(e, g.shape[d], e, x);
    at += x * g.gstride[d];
    if (d == g.nd - 1) col = x;
  }
  return at;
}
SPMD_HD inline index_t global_index(const block_geom& g, index_t base, index_t e) {
  index_t col = 0;
  return global_index(g, base, e, col);
}

/// The global indices of elements e0 .. e0 + m - 1 of a block (m <= block_item_elems): the
/// first by division, the next ones a step along the row while they stay in it.
SPMD_HD inline void global_indices(const block_geom& g, index_t base, index_t e0, int m, index_t* at) {
  index_t col = 0;
  at[0] = global_index(g, base, e0, col);
  const index_t row = g.nd > 0 ? g.shape[g.nd - 1] : 1, step = g.nd > 0 ? g.gstride[g.nd - 1] : 0;
  SPMD_UNROLL
  for (int k = 1; k < block_item_elems; ++k)
    if (k < m) at[k] = col + k < row ? at[0] + k * step : global_index(g, base, e0 + k);
}

/// Elements of item `item` of a block of n elements: where they start and how many (1 to 4).
SPMD_HD inline int item_span(index_t item, index_t n, index_t& e0) {
  e0 = item * block_item_elems;
  return n - e0 < block_item_elems ? static_cast<int>(n - e0) : block_item_elems;
}

/// out[0 .. m) = v[0 .. m): one 8- or 16-byte store (two for 32 bytes) where the item is whole
/// and `out` aligned to it, as the pool's blocks are; element stores otherwise.
template <class T>
SPMD_HD void store_item(T* out, int m, const T* v) {
  constexpr std::size_t bytes = block_item_elems * sizeof(T);
  const auto at = reinterpret_cast<std::uintptr_t>(out);
  if constexpr (bytes == 16 || bytes == 32) {
    if (m == block_item_elems && at % 16 == 0) {
      wide16 w[bytes / 16];
      __builtin_memcpy(w, v, bytes);
      SPMD_UNROLL
      for (std::size_t k = 0; k < bytes / 16; ++k) reinterpret_cast<wide16*>(out)[k] = w[k];
      return;
    }
  } else if constexpr (bytes == 8) {
    if (m == block_item_elems && at % 8 == 0) {
      unsigned long long w = 0;
      __builtin_memcpy(&w, v, bytes);
      *reinterpret_cast<unsigned long long*>(out) = w;
      return;
    }
  }
  SPMD_UNROLL
  for (int k = 0; k < block_item_elems; ++k)
    if (k < m) out[k] = v[k];
}

/// v[0 .. m) = in[0 .. m): store_item's mirror (a dropout's input, a block split in place).
template <class T>
SPMD_HD void load_item(const T* in, int m, T* v) {
  constexpr std::size_t bytes = block_item_elems * sizeof(T);
  const auto at = reinterpret_cast<std::uintptr_t>(in);
  if constexpr (bytes == 16 || bytes == 32) {
    if (m == block_item_elems && at % 16 == 0) {
      wide16 w[bytes / 16];
      SPMD_UNROLL
      for (std::size_t k = 0; k < bytes / 16; ++k) w[k] = reinterpret_cast<const wide16*>(in)[k];
      __builtin_memcpy(v, w, bytes);
      return;
    }
  } else if constexpr (bytes == 8) {
    if (m == block_item_elems && at % 8 == 0) {
      const unsigned long long w = *reinterpret_cast<const unsigned long long*>(in);
      __builtin_memcpy(v, &w, bytes);
      return;
    }
  }
  SPMD_UNROLL
  for (int k = 0; k < block_item_elems; ++k)
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
/// since q - 1) for q < m, each Philox block computed once (Per elements to a block: a
/// constant, so no 64-bit division).
template <int Per, class F>
SPMD_HD void by_block(const random::draw& d, const index_t* at, int m, F&& f) {
  std::uint64_t held = ~std::uint64_t{0};
  random::philox_block w{};
  SPMD_UNROLL
  for (int q = 0; q < block_item_elems; ++q) {
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
}  // namespace detail

/// Item `item` of a random draw's block (host::fill_locals: random::draw_at by global index,
/// or the identity on a Partial group's other members).
template <class T>
SPMD_HD void random_item(const block_job<T>& j, const block_geom& g, index_t item, const random::draw& d, T identity) {
  index_t e0 = 0;
  const int m = item_span(item, j.n, e0);
  T v[block_item_elems];
  if (j.identity) {
    SPMD_UNROLL
    for (int q = 0; q < block_item_elems; ++q) v[q] = identity;
  } else {
    index_t at[block_item_elems];
    global_indices(g, j.base, e0, m, at);
    T lanes[4] = {};
    auto pick = [&](int q, const random::philox_block& w, int lane, bool fresh) {
      if (fresh) random::draw_block<T>(d, w, lanes);  // a block's values once (a normal pair's Box-Muller once)
      // Constant indices only: an array indexed at run time would live in local memory.
      v[q] = lane == 0 ? lanes[0] : lane == 1 ? lanes[1] : lane == 2 ? lanes[2] : lanes[3];
    };
    switch (random::elements_per_block<T>(d.dist)) {
      case 4: detail::by_block<4>(d, at, m, pick); break;
      case 2: detail::by_block<2>(d, at, m, pick); break;
      default: detail::by_block<1>(d, at, m, pick); break;
    }
  }
  store_item(j.out + e0, m, v);
}

/// Item `item` of a dropout's block (host::dropout_block: random::dropout_at by global index).
template <class T>
SPMD_HD void dropout_item(const block_io_job<T>& j, const block_geom& g, index_t item, const random::draw& d) {
  index_t e0 = 0;
  const int m = item_span(item, j.n, e0);
  T v[block_item_elems];
  load_item(j.in + e0, m, v);
  index_t at[block_item_elems];
  global_indices(g, j.base, e0, m, at);
  detail::by_block<4>(d, at, m, [&](int q, const random::philox_block& w, int lane, bool) {
    v[q] = random::dropout_in_block<T>(d, w, lane, v[q]);
  });
  store_item(j.out + e0, m, v);
}

}  // namespace spmd::cuda
