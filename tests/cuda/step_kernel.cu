// The step body (spmd/backends/cuda/step_body.hpp) compiled into a CUDA kernel for every
// element type the simulation reduces, so nvcc checks the device side on every machine with
// nvcc. Its behaviour is tested on the host (step_table.cpp, emulated grid); running it on a
// GPU comes with the CUDA backend. Exits 77 (skip) with a message.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "spmd/backends/cuda/step_body.hpp"

template <class T>
__global__ void step_kernel(spmd::cuda::step_view t, const T* const* in, T* const* out) {
  spmd::cuda::step_thread<T>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, in, out);
}

template __global__ void step_kernel<float>(spmd::cuda::step_view, const float* const*, float* const*);
template __global__ void step_kernel<double>(spmd::cuda::step_view, const double* const*, double* const*);
template __global__ void step_kernel<spmd::bfloat16>(spmd::cuda::step_view, const spmd::bfloat16* const*,
                                                     spmd::bfloat16* const*);
template __global__ void step_kernel<std::int32_t>(spmd::cuda::step_view, const std::int32_t* const*,
                                                   std::int32_t* const*);
template __global__ void step_kernel<std::int64_t>(spmd::cuda::step_view, const std::int64_t* const*,
                                                   std::int64_t* const*);

int main() {
  std::printf("step_kernel: device compile checked; the GPU run comes with the CUDA backend (skip)\n");
  return 77;
}
