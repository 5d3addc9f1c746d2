// tests/cuda/run_table.hpp — a step table run as the CUDA backend runs it, on the host: through
// the per-thread bodies over an emulated grid (last block and thread first, fewer threads
// than items), element by element or, for a widened table, in units of 16 bytes (spread_k of
// them a thread for a spread copy step, or by tiles for a tiled one: each block's loads, then
// its stores, as the kernel's barrier orders them); a small step's table read from the
// inline copy its kernel gets as a parameter (make_inline), as the backend launches it.
#pragma once

#include <cstring>
#include <initializer_list>
#include <memory>
#include <vector>

#include "spmd/backends/cuda/grid_emulation.hpp"
#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/backends/cuda/tile_body.hpp"

namespace spmd_test {

/// A shape (or mesh shape, V) from a list.
template <class V = spmd::shape_vec>
V vec(std::initializer_list<spmd::index_t> xs) {
  V v{};
  for (spmd::index_t x : xs) v.push_back(x);
  return v;
}

/// 16-byte aligned storage for n elements, each `poison` (the device pool's buffers are
/// 256-byte aligned; a widened table relies on it), with a unit to spare.
template <class T>
struct aligned_vec {
  std::vector<spmd::cuda::wide16> raw;
  explicit aligned_vec(std::size_t n = 0, T poison = T(99)) : raw((n * sizeof(T) + 15) / 16 + 2) {
    for (std::size_t i = 0; i < n; ++i) data()[i] = poison;
  }
  T* data() { return reinterpret_cast<T*>(raw.data()); }
};

/// Whether *p still holds aligned_vec's poison: nothing was written past a block.
template <class T>
bool untouched(const T* p) {
  const T poison = T(99);
  return std::memcmp(p, &poison, sizeof(T)) == 0;
}

/// Every placement list of a mesh of `mesh_dims` dims over Replicate, Shard(0) .. Shard(k - 1)
/// for k = `shard_dims`, and Partial(op).
inline std::vector<spmd::placement_vec> layouts(int mesh_dims, spmd::reduce_op op, int shard_dims = 2) {
  std::vector<spmd::placement> one = {spmd::make_replicate(), spmd::make_partial(op)};
  for (int d = 0; d < shard_dims; ++d) one.push_back(spmd::make_shard(d));
  std::vector<spmd::placement_vec> out{spmd::placement_vec{}};
  for (int m = 0; m < mesh_dims; ++m) {
    std::vector<spmd::placement_vec> next;
    for (const spmd::placement_vec& v : out)
      for (const spmd::placement& p : one) {
        spmd::placement_vec w = v;
        w.push_back(p);
        next.push_back(w);
      }
    out = next;
  }
  return out;
}

/// Where the emulated kernel reads the table: as the backend picks (inline where
/// fits_inline), or always from the table's arrays (the device-memory kernels' path).
enum class table_from { as_backend, arrays };

/// Runs `t` on in[r] / out[r] (r < n); `wide` when t was widened (finish returned true):
/// every buffer then 16-byte aligned, as the device pool's are.
/// A small step's launch spreads over `spread_blocks` blocks at least (inline_threads), the
/// backend's inline_spread_blocks unless given.
template <class T>
void run_on_grid(const spmd::cuda::step_table& t, bool wide, const T* const* in, T* const* out, spmd::index_t n,
                 table_from from = table_from::as_backend,
                 spmd::index_t spread_blocks = spmd::cuda::inline_spread_blocks) {
  // The inline table a small step's kernel gets as its parameter (make_inline), or the arrays.
  const bool small = from == table_from::as_backend && spmd::cuda::fits_inline(t);
  const auto packed = small ? std::make_unique<spmd::cuda::inline_table>(spmd::cuda::make_inline(t)) : nullptr;
  if (small) packed->threads = spmd::cuda::inline_threads(t.items, spread_blocks);
  const spmd::cuda::step_view v = small ? packed->resolved() : t.view();
  // The grid: a small step's launch as the backend makes it (inline_launch: one item a
  // thread), else 3 blocks of 5 threads, fewer threads than items (the grid-stride loop).
  const spmd::cuda::launch_shape g = small ? spmd::cuda::inline_launch(*packed) : spmd::cuda::launch_shape{3, 5};
  if (wide) {
    std::vector<const spmd::cuda::wide16*> wi(static_cast<std::size_t>(n));
    std::vector<spmd::cuda::wide16*> wo(static_cast<std::size_t>(n));
    for (std::size_t r = 0; r < wi.size(); ++r) {
      wi[r] = reinterpret_cast<const spmd::cuda::wide16*>(in[r]);
      wo[r] = reinterpret_cast<spmd::cuda::wide16*>(out[r]);
    }
    if (t.tile_blocks > 0) {  // the tile kernel: each block loads its tile, then stores it
      std::vector<spmd::cuda::wide16> smem(static_cast<std::size_t>(spmd::cuda::tile_units));
      const spmd::index_t threads = 5;
      for (spmd::index_t b = t.tile_blocks - 1; b >= 0; --b) {
        std::memset(static_cast<void*>(smem.data()), 0x6b, smem.size() * sizeof(smem[0]));  // stale
        const spmd::cuda::tile_place tp = spmd::cuda::tile_of(v, b);
        for (spmd::index_t th = threads - 1; th >= 0; --th) spmd::cuda::tile_load(tp, th, threads, wi.data(), smem.data());
        for (spmd::index_t th = threads - 1; th >= 0; --th)
          spmd::cuda::tile_store(v, tp, th, threads, smem.data(), wo.data());
      }
      return;
    }
    spmd::cuda::emulate_grid(g.blocks, g.threads, [&](spmd::index_t b, spmd::index_t th, spmd::index_t nb, spmd::index_t nt) {
      if (t.per_thread == spmd::cuda::spread_k)  // as kernels::step_wide picks its kernel
        spmd::cuda::copy_spread_thread<spmd::cuda::spread_k>(v, b, th, nb, nt, wi.data(), wo.data());
      else if (small && packed->batch == spmd::cuda::inline_batch)
        spmd::cuda::wide_thread<T, spmd::cuda::inline_batch>(v, b, th, nb, nt, wi.data(), wo.data());
      else
        spmd::cuda::wide_thread<T>(v, b, th, nb, nt, wi.data(), wo.data());
    });
  } else {
    spmd::cuda::emulate_grid(g.blocks, g.threads, [&](spmd::index_t b, spmd::index_t th, spmd::index_t nb, spmd::index_t nt) {
      spmd::cuda::step_thread<T>(v, b, th, nb, nt, in, out);
    });
  }
}

/// Whether `t` has an op of `code`.
inline bool has_code(const spmd::cuda::step_table& t, spmd::op_code code) {
  for (const auto& o : t.ops)
    if (o.code == code) return true;
  return false;
}
}  // namespace spmd_test
