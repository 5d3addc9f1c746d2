// spmd/backends/cuda/kernels/random.cuh — random operators on one rank's block (nvcc only):
// a grid-stride loop in which each thread finds its element's global index and calls the
// host's own per-element function (random/draw.hpp), so the device gives the host's bits.
#pragma once

#include <cuda_runtime.h>

#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/kernels/step.cuh"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/random/draw.hpp"

namespace spmd::cuda::kernels {

namespace detail {

/// The global row-major index of element e of the block.
__device__ inline std::uint64_t global_index(const random_box& b, index_t e) {
  index_t g = b.base;
  for (int d = b.rank - 1; d >= 0; --d) {
    const index_t n = b.shape[d];
    g += (e % n) * b.gstride[d];
    e /= n;
  }
  return static_cast<std::uint64_t>(g);
}

template <class T>
__global__ void random_fill_kernel(T* out, const __grid_constant__ random_box b, const random::draw d, bool identity_rank, T identity) {
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < b.count;
       e += static_cast<index_t>(gridDim.x) * blockDim.x)
    out[e] = identity_rank ? identity : random::draw_at<T>(d, global_index(b, e));
}

template <class T>
__global__ void random_dropout_kernel(T* out, const T* in, const __grid_constant__ random_box b, const random::draw d) {
  for (index_t e = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; e < b.count;
       e += static_cast<index_t>(gridDim.x) * blockDim.x)
    out[e] = random::dropout_at<T>(d, global_index(b, e), in[e]);
}

}  // namespace detail

template <class T>
void random_fill(T* out, const random_box& box, const random::draw& d, bool identity_rank, T identity,
                 cudaStream_t stream) {
  if (box.count == 0) return;
  detail::random_fill_kernel<T><<<detail::blocks_for(box.count), detail::step_threads, 0, stream>>>(
      out, box, d, identity_rank, identity);
  check(cudaGetLastError(), "the random fill kernel's launch");
}

template <class T>
void random_dropout(T* out, const T* in, const random_box& box, const random::draw& d, cudaStream_t stream) {
  if (box.count == 0) return;
  detail::random_dropout_kernel<T><<<detail::blocks_for(box.count), detail::step_threads, 0, stream>>>(
      out, in, box, d);
  check(cudaGetLastError(), "the dropout kernel's launch");
}

}  // namespace spmd::cuda::kernels
