// kernels/random.cu — the random operators' block kernels for the floating element types
// (spmd_cuda).
#include "spmd/backends/cuda/kernels/random.cuh"

namespace spmd::cuda::kernels {

#define SPMD_RANDOM(T)                                                                        \
  template void random_fill<T>(const job_batch<block_job<T>, block_geom>&, const random::draw&, T, cudaStream_t); \
  template void random_dropout<T>(const job_batch<block_io_job<T>, block_geom>&, const random::draw&, cudaStream_t);
SPMD_RANDOM(float)
SPMD_RANDOM(double)
SPMD_RANDOM(::spmd::bfloat16)
SPMD_RANDOM(::spmd::float16)
#undef SPMD_RANDOM

}  // namespace spmd::cuda::kernels
