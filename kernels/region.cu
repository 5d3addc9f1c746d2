// kernels/region.cu — one rank's box operations for every device element type (spmd_cuda).
#include "spmd/backends/cuda/elements.hpp"
#include "spmd/backends/cuda/kernels/region.cuh"

namespace spmd::cuda::kernels {

#define SPMD_REGION(T)                                                                        \
  template void region_copy<T>(T*, const T*, const run_geom&, cudaStream_t);                 \
  template void region_fill<T>(T*, const run_geom&, T, cudaStream_t);                        \
  template void region_scale<T>(T*, const T*, const run_geom&, index_t, cudaStream_t);       \
  template void region_reduce<T>(reduce_op, T*, const region_sources<T>&, index_t, const run_geom&, \
                                 cudaStream_t);                                              \
  template void region_divide<T>(T*, index_t, index_t, cudaStream_t);
SPMD_CUDA_FOR_EACH_ELEMENT(SPMD_REGION)
#undef SPMD_REGION

}  // namespace spmd::cuda::kernels
