// kernels/random.cu — the random operators' block kernels for the floating element types
// (spmd_cuda).
#include "spmd/backends/cuda/kernels/random.cuh"

namespace spmd::cuda::kernels {

#define SPMD_RANDOM(T)                                                                        \
  template void random_fill<T>(T*, const random_box&, const random::draw&, bool, T, cudaStream_t); \
  template void random_dropout<T>(T*, const T*, const random_box&, const random::draw&, cudaStream_t);
SPMD_RANDOM(float)
SPMD_RANDOM(double)
SPMD_RANDOM(::spmd::bfloat16)
SPMD_RANDOM(::spmd::float16)
#undef SPMD_RANDOM

}  // namespace spmd::cuda::kernels
