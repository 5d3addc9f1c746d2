// kernels/step.cu — the step kernels (element by element, and in 16-byte units) and the cast
// kernels, for every device element type (spmd_cuda).
#include "spmd/backends/cuda/elements.hpp"
#include "spmd/backends/cuda/kernels/step.cuh"

namespace spmd::cuda::kernels {

#define SPMD_STEP(T)                                                                              \
  template void step<T>(const step_view&, const rank_ptrs<T>&, cudaStream_t, const inline_table*); \
  template void step_wide<T>(const step_view&, const rank_ptrs<wide16>&, cudaStream_t, const inline_table*);
SPMD_CUDA_FOR_EACH_ELEMENT(SPMD_STEP)
#undef SPMD_STEP

#define SPMD_CAST_TO(To)                                                                  \
  template void cast<To, float>(To*, const float*, index_t, cudaStream_t);              \
  template void cast<To, double>(To*, const double*, index_t, cudaStream_t);            \
  template void cast<To, ::spmd::bfloat16>(To*, const ::spmd::bfloat16*, index_t, cudaStream_t); \
  template void cast<To, ::spmd::float16>(To*, const ::spmd::float16*, index_t, cudaStream_t); \
  template void cast<To, ::std::int32_t>(To*, const ::std::int32_t*, index_t, cudaStream_t); \
  template void cast<To, ::std::int64_t>(To*, const ::std::int64_t*, index_t, cudaStream_t);
SPMD_CUDA_FOR_EACH_ELEMENT(SPMD_CAST_TO)
#undef SPMD_CAST_TO

}  // namespace spmd::cuda::kernels
