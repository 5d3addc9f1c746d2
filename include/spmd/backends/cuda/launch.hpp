// spmd/backends/cuda/launch.hpp — the device kernels as the host sees them: declarations only.
//
// Definitions are in kernels/*.cuh and are instantiated for every device element type by
// nvcc in the spmd_cuda library (src/cuda/*.cu). Everything queues on `stream` and returns at
// once; a launch error throws spmd::cuda::error naming the kernel.
#pragma once

#include <cuda_runtime_api.h>

#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/core/config.hpp"

namespace spmd::cuda {

/// The most ranks a step launch takes: their buffer pointers travel as kernel parameters
/// (2 x 128 pointers = 2 KiB), so a launch needs no pointer upload and can be captured.
inline constexpr index_t max_launch_ranks = 128;

/// Every rank's input and output buffers of one step, by mesh index.
template <class T>
struct rank_ptrs {
  const T* in[max_launch_ranks];
  T* out[max_launch_ranks];
};

namespace kernels {

/// One step for every rank: `table` (its members and ops in device memory) over `items`
/// work items.
template <class T>
void step(const step_view& table, const rank_ptrs<T>& ptrs, cudaStream_t stream);

/// out[k] = To(in[k]) for k < n (forward_dtype).
template <class To, class From>
void cast(To* out, const From* in, index_t n, cudaStream_t stream);

}  // namespace kernels
}  // namespace spmd::cuda
