// spmd/backends/cuda/kernels/step.cuh — the step kernel (nvcc only).
//
// One launch per plan step: a grid-stride loop over the step table's work items, each
// thread running step_item (step_body.hpp, the function the CPU tests run through the grid
// emulation). Rank pointers come as a kernel parameter (__grid_constant__: threads index it
// by rank, and a parameter indexed at run time would otherwise be copied to every thread's
// local memory); the table is in device memory, uploaded once per plan and shape, or for a
// small step a parameter too (inline_table).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/backends/cuda/tile_body.hpp"
#include "spmd/host/element.hpp"

namespace spmd::cuda::kernels {

namespace detail {

inline constexpr int step_threads = static_cast<int>(step_block_threads);

template <class T>
__global__ void __launch_bounds__(step_threads)
    step_kernel(const step_view t, const __grid_constant__ rank_ptrs<T> p) {
  step_thread<T>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

template <class T>
__global__ void __launch_bounds__(step_threads)
    step_wide_kernel(const step_view t, const __grid_constant__ rank_ptrs<wide16> p) {
  wide_thread<T>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

/// The two kernels above with the table as a parameter (inline_table: a small step).
template <class T>
__global__ void __launch_bounds__(step_threads)
    step_inline_kernel(const __grid_constant__ inline_table t, const __grid_constant__ rank_ptrs<T> p) {
  step_thread<T>(t.resolved(), blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

template <class T, int B>
__global__ void __launch_bounds__(step_threads)
    step_wide_inline_kernel(const __grid_constant__ inline_table t, const __grid_constant__ rank_ptrs<wide16> p) {
  wide_thread<T, B>(t.resolved(), blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

template <int K>
__global__ void __launch_bounds__(step_threads)
    step_spread_kernel(const step_view t, const __grid_constant__ rank_ptrs<wide16> p) {
  copy_spread_thread<K>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

/// A tiled step (step_table.hpp: tile): one block per tile, its rows read whole into shared
/// memory, then each op's piece written whole (tile_body.hpp). (A template, as every kernel
/// of these headers: several kernel files include them.)
template <index_t Units>
__global__ void __launch_bounds__(step_threads)
    step_tile_kernel(const step_view t, const __grid_constant__ rank_ptrs<wide16> p) {
  __shared__ wide16 smem[Units];
  const tile_place tp = tile_of(t, blockIdx.x);
  tile_load(tp, threadIdx.x, blockDim.x, p.in, smem);
  __syncthreads();
  tile_store(t, tp, threadIdx.x, blockDim.x, smem, p.out);
}

/// Blocks for one item per thread (a widened step: bench/step_kernels measured this grid
/// ahead of a grid-stride loop over a few waves on an H200).
inline unsigned blocks_per_item(index_t n) {
  const index_t b = (n + step_threads - 1) / step_threads;
  return static_cast<unsigned>(b < 0x7fffffff ? b : 0x7fffffff);
}

/// Blocks for n items: one item per thread up to a few waves of the device, then the
/// grid-stride loop takes the rest.
inline unsigned blocks_for(index_t n) {
  static const int cap = [] {
    int dev = 0, sms = 0;
    if (cudaGetDevice(&dev) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
      sms = 132;
    return sms * 16;
  }();
  const index_t b = (n + step_threads - 1) / step_threads;
  return static_cast<unsigned>(std::min<index_t>(b, cap));
}

}  // namespace detail

template <class T>
void step(const step_view& table, const rank_ptrs<T>& ptrs, cudaStream_t stream, const inline_table* small) {
  if (table.items == 0) return;
  if (small != nullptr) {  // one item a thread (inline_items at most)
    const launch_shape g = inline_launch(*small);
    detail::step_inline_kernel<T>
        <<<static_cast<unsigned>(g.blocks), static_cast<unsigned>(g.threads), 0, stream>>>(*small, ptrs);
  } else {
    detail::step_kernel<T><<<detail::blocks_for(table.items), detail::step_threads, 0, stream>>>(table, ptrs);
  }
  check(cudaGetLastError(), "the step kernel's launch");
}

template <class T>
void step_wide(const step_view& table, const rank_ptrs<wide16>& ptrs, cudaStream_t stream, const inline_table* small) {
  if (table.items == 0) return;
  if (small != nullptr) {  // fits_inline: one item a thread, neither tiled nor spread
    const launch_shape g = inline_launch(*small);
    const auto blocks = static_cast<unsigned>(g.blocks), threads = static_cast<unsigned>(g.threads);
    if (small->batch == inline_batch)
      detail::step_wide_inline_kernel<T, inline_batch><<<blocks, threads, 0, stream>>>(*small, ptrs);
    else
      detail::step_wide_inline_kernel<T, 1><<<blocks, threads, 0, stream>>>(*small, ptrs);
    check(cudaGetLastError(), "the step kernel's launch (16-byte units, inline table)");
    return;
  }
  if (table.tile_blocks > 0) {
    const auto tiles = static_cast<unsigned>(table.tile_blocks < 0x7fffffff ? table.tile_blocks : 0x7fffffff);
    detail::step_tile_kernel<tile_units><<<tiles, detail::step_threads, 0, stream>>>(table, ptrs);
    check(cudaGetLastError(), "the step kernel's launch (tiles)");
    return;
  }
  const unsigned blocks = detail::blocks_per_item((table.items + table.per_thread - 1) / table.per_thread);
  if (table.per_thread == spread_k)
    detail::step_spread_kernel<spread_k><<<blocks, detail::step_threads, 0, stream>>>(table, ptrs);
  else
    detail::step_wide_kernel<T><<<blocks, detail::step_threads, 0, stream>>>(table, ptrs);
  check(cudaGetLastError(), "the step kernel's launch (16-byte units)");
}

template <class To, class From>
__global__ void cast_kernel(To* out, const From* in, index_t n) {
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    out[i] = host::convert<To>(in[i]);  // the host executors' conversion
}

template <class To, class From>
void cast(To* out, const From* in, index_t n, cudaStream_t stream) {
  if (n == 0) return;
  cast_kernel<To, From><<<detail::blocks_for(n), detail::step_threads, 0, stream>>>(out, in, n);
  check(cudaGetLastError(), "the cast kernel's launch");
}

}  // namespace spmd::cuda::kernels
