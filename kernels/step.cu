// kernels/step.cu — the step and cast kernels for every device element type (spmd_cuda).
#include "spmd/backends/cuda/elements.hpp"
#include "spmd/backends/cuda/kernels/step.cuh"

namespace spmd::cuda::kernels {

// The widened (16-byte) copy step: one definition, here.
__global__ void __launch_bounds__(detail::step_threads)
    step_wide_kernel(step_view t, rank_ptrs<wide16> p) {
  copy_thread<wide16>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

void step_wide(const step_view& table, const rank_ptrs<wide16>& ptrs, cudaStream_t stream) {
  if (table.items == 0) return;
  step_wide_kernel<<<detail::blocks_for(table.items), detail::step_threads, 0, stream>>>(table, ptrs);
  check(cudaGetLastError(), "the step kernel's launch (16-byte copies)");
}


#define SPMD_STEP(T) template void step<T>(const step_view&, const rank_ptrs<T>&, cudaStream_t);
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
