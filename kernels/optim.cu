// kernels/optim.cu — the fused optimizer updates (AdamW, SGD) for the floating element types
// (spmd_cuda).
#include "spmd/backends/cuda/elements.hpp"
#include "spmd/backends/cuda/kernels/optim.cuh"

namespace spmd::cuda::kernels {

#define SPMD_FUSED(T)                                                                                            \
  template void fused_update<T, optim_math::adamw_coeffs<T>>(const optim_math::segment<T, optim_math::adamw_coeffs<T>>*,   \
                                                             index_t, const optim_math::adamw_coeffs<T>*, index_t,     \
                                                             cudaStream_t);                                            \
  template void fused_update<T, optim_math::sgd_coeffs<T>>(const optim_math::segment<T, optim_math::sgd_coeffs<T>>*,       \
                                                           index_t, const optim_math::sgd_coeffs<T>*, index_t, cudaStream_t);
SPMD_FUSED(float)
SPMD_FUSED(double)
SPMD_FUSED(::spmd::bfloat16)
SPMD_FUSED(::spmd::float16)
#undef SPMD_FUSED

}  // namespace spmd::cuda::kernels
