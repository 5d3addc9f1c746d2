// kernels/ring.cu — context parallelism's ring on the device, for float and double (spmd_cuda).
#include "spmd/backends/cuda/kernels/ring.cuh"

namespace spmd::cuda::kernels {

#define SPMD_RING(T)                                                                                       \
  template void gemm_heads<T>(const gemm_heads_args<T>&, cudaStream_t);                                    \
  template void ring_forward_rows<T>(const ring_pair&, T*, T*, T*, cudaStream_t);                          \
  template void ring_probability_rows<T>(const ring_pair&, T*, const T*, cudaStream_t);                    \
  template void ring_ds_rows<T>(const ring_pair&, const T*, T*, const T*, T, cudaStream_t);                \
  template void ring_delta_rows<T>(T*, const T*, const T*, index_t, index_t, index_t, index_t, cudaStream_t); \
  template void ring_fill<T>(T*, index_t, T, cudaStream_t);
SPMD_RING(float)
SPMD_RING(double)
#undef SPMD_RING

}  // namespace spmd::cuda::kernels
