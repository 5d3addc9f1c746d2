// kernels/ops.cu — the operators' local kernels for every device element type (spmd_cuda).
#include "spmd/backends/cuda/elements.hpp"
#include "spmd/backends/cuda/kernels/gemm.cuh"
#include "spmd/backends/cuda/kernels/ops.cuh"

namespace spmd::cuda::kernels {

#define SPMD_UNARY(F, T) template void unary<unary_fn::F, T>(const job_batch<out_in<T>>&, cudaStream_t);
#define SPMD_UNARY_ALL(T)                                                                    \
  SPMD_UNARY(neg, T) SPMD_UNARY(abs, T) SPMD_UNARY(relu, T)
#define SPMD_UNARY_FLOAT(T)                                                                  \
  SPMD_UNARY(exp, T) SPMD_UNARY(log, T) SPMD_UNARY(sqrt, T) SPMD_UNARY(gelu, T)              \
  SPMD_UNARY(tanh, T) SPMD_UNARY(sigmoid, T) SPMD_UNARY(gelu_tanh, T)                        \
  SPMD_BINARY(relu_backward, T) SPMD_BINARY(gelu_backward, T)                                \
  SPMD_BINARY(gelu_tanh_backward, T) SPMD_BINARY(sign_mul, T) SPMD_BINARY(equal, T)    \
  SPMD_BINARY(expand_as, T)

#define SPMD_BINARY(F, T)                                                                    \
  template void binary<binary_fn::F, T>(const job_batch<out_ab<T>, index_geom>&, cudaStream_t); \
  template void scalar<binary_fn::F, true, T>(const job_batch<out_in<T>>&, T, cudaStream_t);  \
  template void scalar<binary_fn::F, false, T>(const job_batch<out_in<T>>&, T, cudaStream_t);
#define SPMD_BINARY_ALL(T)                                                                   \
  SPMD_BINARY(add, T) SPMD_BINARY(sub, T) SPMD_BINARY(mul, T) SPMD_BINARY(maximum, T)        \
  SPMD_BINARY(minimum, T)

#define SPMD_REDUCE(T)                                                                       \
  template void reduce<reduce_op::sum, false, T>(const job_batch<out_in<T>, reduce_geom>&, cudaStream_t);     \
  template void reduce<reduce_op::product, false, T>(const job_batch<out_in<T>, reduce_geom>&, cudaStream_t); \
  template void reduce<reduce_op::max, false, T>(const job_batch<out_in<T>, reduce_geom>&, cudaStream_t);     \
  template void reduce<reduce_op::min, false, T>(const job_batch<out_in<T>, reduce_geom>&, cudaStream_t);

#define SPMD_FLOAT_ONLY(T)                                                                   \
  SPMD_UNARY_FLOAT(T) SPMD_BINARY(div, T)                                                    \
  template void reduce<reduce_op::sum, true, T>(const job_batch<out_in<T>, reduce_geom>&, cudaStream_t);      \
  template void softmax<false, T>(const job_batch<out_in<T>, softmax_geom>&, cudaStream_t);                 \
  template void softmax<true, T>(const job_batch<out_in<T>, softmax_geom>&, cudaStream_t);                  \
  template void layer_norm<false, T>(const job_batch<norm_ptrs<T>, norm_geom>&, double, cudaStream_t);      \
  template void layer_norm<true, T>(const job_batch<norm_ptrs<T>, norm_geom>&, double, cudaStream_t);       \
  template void layer_norm_backward<false, T>(const job_batch<norm_ptrs<T>, norm_geom>&, double, cudaStream_t); \
  template void layer_norm_backward<true, T>(const job_batch<norm_ptrs<T>, norm_geom>&, double, cudaStream_t);  \
  template void embedding<T, ::std::int32_t>(const job_batch<embedding_ptrs<T, ::std::int32_t>, embedding_geom>&, \
                                             index_t, cudaStream_t);                                        \
  template void embedding<T, ::std::int64_t>(const job_batch<embedding_ptrs<T, ::std::int64_t>, embedding_geom>&, \
                                             index_t, cudaStream_t);                                        \
  template void one_hot<T, ::std::int32_t>(const job_batch<one_hot_ptrs<T, ::std::int32_t>>&, index_t, cudaStream_t); \
  template void one_hot<T, ::std::int64_t>(const job_batch<one_hot_ptrs<T, ::std::int64_t>>&, index_t, cudaStream_t);

#define SPMD_EVERY(T)                                                                        \
  SPMD_UNARY_ALL(T) SPMD_BINARY_ALL(T) SPMD_REDUCE(T)                                        \
  template void copy<T>(const job_batch<out_in<T>, index_geom>&, cudaStream_t);              \
  template void generate<T>(const job_batch<block_job<T>, block_geom>&, fill_kind, T, T, cudaStream_t); \
  template void split_partial<T>(const job_batch<block_job<T>>&, reduce_op, index_t, cudaStream_t); \
  template void gemm<T>(T*, const T*, const T*, index_t, index_t, index_t, bool, bool, index_t, cudaStream_t); \
  template void gemm_ranks<T>(const gemm_ranks_args<T>&, index_t, index_t, index_t, index_t, bool, bool, index_t, \
                              cudaStream_t);

SPMD_CUDA_FOR_EACH_ELEMENT(SPMD_EVERY)
SPMD_FLOAT_ONLY(float)
SPMD_FLOAT_ONLY(double)
SPMD_FLOAT_ONLY(::spmd::bfloat16)
SPMD_FLOAT_ONLY(::spmd::float16)

}  // namespace spmd::cuda::kernels
