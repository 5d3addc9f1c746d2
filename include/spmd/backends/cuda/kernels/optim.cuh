// spmd/backends/cuda/kernels/optim.cuh — the fused optimizer update (nvcc only): one launch
// for every block of every parameter of every rank. Block row y of the grid takes segments
// y, y + rows, ...; the threads of a row stride over a segment's elements, with the
// coefficients the segment names in `coeffs`. The body is
// optim_math::update_thread, which the CPU tests run through the grid emulation.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/kernels/step.cuh"
#include "spmd/core/optim_math.hpp"

namespace spmd::cuda::kernels {

template <class T, class Coeffs>
__global__ void __launch_bounds__(detail::step_threads)
    fused_update_kernel(const optim_math::segment<T, Coeffs>* table, index_t segments, const Coeffs* coeffs) {
  optim_math::update_thread(table, segments, coeffs, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, blockIdx.y,
                            gridDim.y);
}

template <class T, class Coeffs>
void fused_update(const optim_math::segment<T, Coeffs>* table, index_t segments, const Coeffs* coeffs, index_t longest,
                  cudaStream_t stream) {
  if (segments == 0 || longest == 0) return;
  // One row of blocks per segment (up to the grid's limit; rows stride beyond it), each row
  // wide enough for the longest block, the whole grid a few thousand blocks at most.
  const unsigned rows = static_cast<unsigned>(std::min<index_t>(segments, 65535));
  const unsigned cols = std::max(1u, std::min(detail::blocks_for(longest), 4096u / std::min(rows, 4096u)));
  const dim3 grid(cols, rows);
  fused_update_kernel<T, Coeffs><<<grid, detail::step_threads, 0, stream>>>(table, segments, coeffs);
  check(cudaGetLastError(), "the fused optimizer kernel's launch");
}

}  // namespace spmd::cuda::kernels
