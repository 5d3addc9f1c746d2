// spmd/backends/cuda/kernels/random.cuh — random operators (nvcc only): one launch for every
// rank's block (a job_batch), each thread finding its element's global index and calling the
// host's own per-element function (random/draw.hpp through block_body.hpp), so the device
// gives the host's bits. Where every block is a run of the global tensor, the draw's kernel is
// made for its distribution (random_run.hpp).
#pragma once

#include <cuda_runtime.h>

#include "spmd/backends/cuda/block_body.hpp"
#include "spmd/backends/cuda/kernels/ops.cuh"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/random_run.hpp"
#include "spmd/random/draw.hpp"

namespace spmd::cuda::kernels {

/// Blocks an SM the random kernels are compiled for: 64 registers a thread, half the SM's
/// warps. Uncapped, nvcc gave them 68-80 registers (three blocks, 35% occupancy), and the
/// draws, bound by instruction issue, left a third of the issue slots empty; capped, ptxas
/// spills 12-184 bytes in the rarer paths, and on an H200 dropout went from 0.89 to 0.92 of
/// the floor, the draws from 0.596 to 0.600 (uniform f32): bench/RESULTS.md.
inline constexpr int random_min_blocks = 4;

namespace detail {
/// random_fill's launch where every block is a run: random_run_item made for body B.
template <random_body B, class T>
void random_fill_runs(const job_batch<block_job<T>, block_geom>& jobs, const random::draw& d, T identity,
                      cudaStream_t stream) {
  for_each_job<random_min_blocks>(
      jobs,
      [=] __device__(const block_job<T>& j, const block_geom&, index_t e) { random_run_item<T, B>(j, e, d, identity); },
      stream, "the random fill kernel's launch");
}
}  // namespace detail

template <class T>
void random_fill(const job_batch<block_job<T>, block_geom>& jobs, const random::draw& d, T identity,
                 cudaStream_t stream) {
  if (const random_body body = random_body_for(jobs, d); body != random_body::any)
    return with_run_body(body, [&]<random_body B>() { detail::random_fill_runs<B>(jobs, d, identity, stream); });
  detail::for_each_job<random_min_blocks>(
      jobs,
      [=] __device__(const block_job<T>& j, const block_geom& g, index_t e) { random_item<T>(j, g, e, d, identity); },
      stream, "the random fill kernel's launch");
}

template <class T>
void random_dropout(const job_batch<block_io_job<T>, block_geom>& jobs, const random::draw& d, cudaStream_t stream) {
  detail::for_each_job<random_min_blocks>(
      jobs, [=] __device__(const block_io_job<T>& j, const block_geom& g, index_t e) { dropout_item<T>(j, g, e, d); },
      stream, "the dropout kernel's launch");
}

}  // namespace spmd::cuda::kernels
