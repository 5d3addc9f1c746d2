// bench/launch_floor.hpp — empty kernels (launch_floor.cu) for redistribute_cuda's launch floor.
#pragma once

#include <cuda_runtime_api.h>

#include "spmd/backends/cuda/launch.hpp"

namespace bench {
/// An empty kernel, one block.
void launch_empty(cudaStream_t s);
/// An empty kernel with the step kernel's parameters (about 2 KiB).
void launch_empty_step_params(const spmd::cuda::step_view& v, const spmd::cuda::rank_ptrs<spmd::cuda::wide16>& p,
                              cudaStream_t s);
/// An empty kernel taking Bytes of parameters (6144 and 16384 are built).
template <int Bytes>
struct param_bytes {
  unsigned char b[Bytes];
};
template <int Bytes>
void launch_empty_bytes(const param_bytes<Bytes>& p, cudaStream_t s);
}  // namespace bench
