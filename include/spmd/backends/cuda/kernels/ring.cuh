// spmd/backends/cuda/kernels/ring.cuh — context parallelism's ring on the device (nvcc only):
// the products over every head of a pair of runs (cuBLAS, rows at the blocks' own strides),
// and a thread per row for the bodies of ring_bodies.hpp.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/kernels/gemm.cuh"
#include "spmd/backends/cuda/kernels/ops.cuh"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/ring_bodies.hpp"

namespace spmd::cuda::kernels {

template <class T>
void gemm_heads(const gemm_heads_args<T>& g, cudaStream_t stream) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "the ring computes in float or double");
  if (g.m == 0 || g.n == 0 || g.heads == 0) return;
  const index_t count = g.heads;
  // Pointer arrays in stream-ordered device memory, written on the device (nothing waits for
  // the host, and a capture records them).
  device_buffer<const T*> arrays(3 * count);
  const T** pa = arrays.data();
  const T** pb = pa + count;
  T** pc = const_cast<T**>(pa + 2 * count);
  detail::for_each(
      count,
      [=] __device__(index_t h) {
        pa[h] = g.a + g.a_at.of(h);
        pb[h] = g.b + g.b_at.of(h);
        pc[h] = g.c + g.c_at.of(h);
      },
      stream, "ring product pointer kernel launch");
  const cublasHandle_t hd = detail::cublas_handle();
  detail::check_cublas(cublasSetStream(hd, stream), "cublasSetStream");
  // Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ (gemm.cuh); the leading
  // dimensions are the rows' strides.
  const cublasOperation_t ta = g.a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = g.b_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int M = static_cast<int>(g.m), N = static_cast<int>(g.n), K = static_cast<int>(g.k);
  const int lda = static_cast<int>(g.lda), ldb = static_cast<int>(g.ldb), ldc = static_cast<int>(g.ldc);
  if constexpr (std::is_same_v<T, float>)
    detail::check_cublas(cublasSgemmBatched(hd, tb, ta, N, M, K, &g.alpha, pb, ldb, pa, lda, &g.beta, pc, ldc,
                                            static_cast<int>(count)),
                         "cublasSgemmBatched (ring)");
  else
    detail::check_cublas(cublasDgemmBatched(hd, tb, ta, N, M, K, &g.alpha, pb, ldb, pa, lda, &g.beta, pc, ldc,
                                            static_cast<int>(count)),
                         "cublasDgemmBatched (ring)");
}

template <class T>
void ring_forward_rows(const ring_pair& p, T* s, T* out, T* lse, cudaStream_t stream) {
  const index_t rows = p.rows();
  detail::for_each(
      p.heads() * rows, [=] __device__(index_t i) { ring_forward_row<T>(p, s, out, lse, i / rows, i % rows); }, stream,
      "ring forward row kernel launch");
}

template <class T>
void ring_probability_rows(const ring_pair& p, T* s, const T* lse, cudaStream_t stream) {
  const index_t rows = p.rows();
  detail::for_each(
      p.heads() * rows, [=] __device__(index_t i) { ring_probability_row<T>(p, s, lse, i / rows, i % rows); }, stream,
      "ring probability row kernel launch");
}

template <class T>
void ring_ds_rows(const ring_pair& p, const T* prob, T* dp, const T* delta, T scale, cudaStream_t stream) {
  const index_t rows = p.rows();
  detail::for_each(
      p.heads() * rows, [=] __device__(index_t i) { ring_ds_row<T>(p, prob, dp, delta, scale, i / rows, i % rows); },
      stream, "ring dS row kernel launch");
}

template <class T>
void ring_delta_rows(T* delta, const T* g, const T* y, index_t nb, index_t cq, index_t w, index_t d,
                     cudaStream_t stream) {
  detail::for_each(
      nb * (w / d) * cq, [=] __device__(index_t i) { ring_delta_row<T>(delta, g, y, cq, w, d, i / cq, i % cq); },
      stream, "ring delta row kernel launch");
}

template <class T>
void ring_fill(T* x, index_t n, T value, cudaStream_t stream) {
  detail::for_each(
      n, [=] __device__(index_t i) { x[i] = value; }, stream, "ring fill kernel launch");
}

}  // namespace spmd::cuda::kernels
