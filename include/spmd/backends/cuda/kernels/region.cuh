// spmd/backends/cuda/kernels/region.cuh — one rank's box operations (nvcc only): the region
// kernels the per-rank executor (backends/process/execute.hpp) runs through the NCCL
// transport. Each is a grid-stride loop over the region's elements; offsets come from
// region_offsets and reductions from reduce_at (step_body.hpp), the step kernel's own
// per-element functions, so a rank's result is the step kernel's and the simulation's.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/kernels/step.cuh"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/host/element.hpp"

namespace spmd::cuda::kernels {

namespace detail {

#define SPMD_GRID_LOOP(i, n)                                                                   \
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < (n); \
       i += static_cast<index_t>(gridDim.x) * blockDim.x)

template <class T>
__global__ void region_copy_kernel(T* out, const T* in, const __grid_constant__ run_geom g, index_t n) {
  SPMD_GRID_LOOP(e, n) {
    index_t s, d;
    region_offsets(g, e, s, d);
    out[d] = in[s];
  }
}
template <class T>
__global__ void region_fill_kernel(T* out, const __grid_constant__ run_geom g, T v, index_t n) {
  SPMD_GRID_LOOP(e, n) {
    index_t s, d;
    region_offsets(g, e, s, d);
    out[d] = v;
  }
}
template <class T>
__global__ void region_scale_kernel(T* out, const T* in, const __grid_constant__ run_geom g, index_t k, index_t n) {
  SPMD_GRID_LOOP(e, n) {
    index_t s, d;
    region_offsets(g, e, s, d);
    out[d] = host::times(in[s], k);
  }
}
template <class T>
__global__ void region_reduce_kernel(reduce_op op, T* out, const __grid_constant__ region_sources<T> src, index_t k,
                                     const __grid_constant__ run_geom g, index_t n) {
  SPMD_GRID_LOOP(e, n) {
    index_t s, d;
    region_offsets(g, e, s, d);
    out[d] = ::spmd::cuda::detail::reduce_at<T>(op, src.p, nullptr, k, s);
  }
}
template <class T>
__global__ void region_divide_kernel(T* x, index_t len, index_t k) {
  SPMD_GRID_LOOP(i, len) x[i] = host::divide(x[i], k);
}

#undef SPMD_GRID_LOOP

}  // namespace detail

template <class T>
void region_copy(T* out, const T* in, const run_geom& g, cudaStream_t stream) {
  const index_t n = g.count();
  if (n == 0) return;
  // In 16-byte units where the region and both pointers allow (the pack and unpack around
  // NCCL's calls: a strided piece's runs are usually whole units).
  if (widenable(g, index_t{sizeof(T)}) &&
      (reinterpret_cast<std::uintptr_t>(out) | reinterpret_cast<std::uintptr_t>(in)) % 16 == 0) {
    const run_geom w = widened(g, index_t{sizeof(T)});
    const index_t units = w.count();
    detail::region_copy_kernel<wide16><<<detail::blocks_for(units), detail::step_threads, 0, stream>>>(
        reinterpret_cast<wide16*>(out), reinterpret_cast<const wide16*>(in), w, units);
    check(cudaGetLastError(), "the region copy kernel's launch (16-byte units)");
    return;
  }
  detail::region_copy_kernel<T><<<detail::blocks_for(n), detail::step_threads, 0, stream>>>(out, in, g, n);
  check(cudaGetLastError(), "the region copy kernel's launch");
}
template <class T>
void region_fill(T* out, const run_geom& g, T v, cudaStream_t stream) {
  const index_t n = g.count();
  if (n == 0) return;
  detail::region_fill_kernel<T><<<detail::blocks_for(n), detail::step_threads, 0, stream>>>(out, g, v, n);
  check(cudaGetLastError(), "the region fill kernel's launch");
}
template <class T>
void region_scale(T* out, const T* in, const run_geom& g, index_t k, cudaStream_t stream) {
  const index_t n = g.count();
  if (n == 0) return;
  detail::region_scale_kernel<T><<<detail::blocks_for(n), detail::step_threads, 0, stream>>>(out, in, g, k, n);
  check(cudaGetLastError(), "the region scale kernel's launch");
}
template <class T>
void region_reduce(reduce_op op, T* out, const region_sources<T>& src, index_t k, const run_geom& g,
                   cudaStream_t stream) {
  const index_t n = g.count();
  if (n == 0) return;
  detail::region_reduce_kernel<T><<<detail::blocks_for(n), detail::step_threads, 0, stream>>>(op, out, src, k, g, n);
  check(cudaGetLastError(), "the region reduce kernel's launch");
}
template <class T>
void region_divide(T* x, index_t len, index_t k, cudaStream_t stream) {
  if (len == 0) return;
  detail::region_divide_kernel<T><<<detail::blocks_for(len), detail::step_threads, 0, stream>>>(x, len, k);
  check(cudaGetLastError(), "the region divide kernel's launch");
}

}  // namespace spmd::cuda::kernels
