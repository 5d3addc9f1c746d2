// spmd/backends/cuda/kernels/gemm.cuh — the local matrix products (nvcc only).
//
// float and double go to cuBLAS (one batched call for every rank and bmm batch), whose sums run in an
// order of its choosing: within a tolerance of the host's BLAS, not bit for bit. The 16-bit floats and
// the integers go to a kernel that accumulates each output element over k in order, in the
// host kernel's accumulator type (float for the 16-bit floats): the same bits as the host.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/gemm_heads.hpp"
#include "spmd/backends/cuda/kernels/ops.cuh"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/core/element_math.hpp"

namespace spmd::cuda::kernels {

namespace detail {

inline void check_cublas(cublasStatus_t s, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw error(std::string("spmd::cuda: ") + call + " failed: " + cublasGetStatusString(s),
                cudaErrorUnknown);
}

/// This thread's cuBLAS handle for the current device (made once; the process keeps it).
inline cublasHandle_t cublas_handle() {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  thread_local cublasHandle_t handles[64] = {};
  if (dev >= 64) throw error("spmd::cuda: device " + std::to_string(dev) + " is past the 64 this build handles", cudaErrorInvalidDevice);
  if (handles[dev] == nullptr) check_cublas(cublasCreate(&handles[dev]), "cublasCreate");
  return handles[dev];
}

}  // namespace detail

/// count row-major products c = alpha · op(a) op(b) + beta · c of one shape (f, column_major_of),
/// operand i's pointers set by point(i, a, b, c) on the device: one cuBLAS batched call
/// (float and double). The pointer arrays live in stream-ordered device memory and are
/// written by a small kernel, so nothing waits for the host and a capture records them. `who`
/// names the caller in an error.
template <class T, class Point>
void gemm_batched(const column_major_gemm& f, index_t count, T alpha, T beta, Point point, cudaStream_t stream,
                  const char* who) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "cuBLAS's batched gemm is float or double here");
  device_buffer<const T*> arrays(3 * count);
  const T** pa = arrays.data();
  const T** pb = pa + count;
  T** pc = const_cast<T**>(pa + 2 * count);
  detail::for_each(
      count, [=] __device__(index_t i) { point(i, pa[i], pb[i], pc[i]); }, stream, "gemm pointer kernel launch");
  const cublasHandle_t h = detail::cublas_handle();
  detail::check_cublas(cublasSetStream(h, stream), "cublasSetStream");
  const cublasOperation_t t1 = f.first_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t t2 = f.second_transposed ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int m = static_cast<int>(f.m), n = static_cast<int>(f.n), k = static_cast<int>(f.k);
  const int ld1 = static_cast<int>(f.ld_first), ld2 = static_cast<int>(f.ld_second), ldc = static_cast<int>(f.ldc);
  cublasStatus_t s;
  if constexpr (std::is_same_v<T, float>)
    s = cublasSgemmBatched(h, t1, t2, m, n, k, &alpha, pb, ld1, pa, ld2, &beta, pc, ldc, static_cast<int>(count));
  else
    s = cublasDgemmBatched(h, t1, t2, m, n, k, &alpha, pb, ld1, pa, ld2, &beta, pc, ldc, static_cast<int>(count));
  if (s != CUBLAS_STATUS_SUCCESS)
    detail::check_cublas(s, (std::string(std::is_same_v<T, float> ? "cublasSgemmBatched (" : "cublasDgemmBatched (") +
                             who + ")")
                                .c_str());
}

template <class T>
void gemm_ranks(const gemm_ranks_args<T>& p, index_t ranks, index_t m, index_t n, index_t k, bool a_transposed,
                bool b_transposed, index_t batch, cudaStream_t stream) {
  const index_t count = ranks * batch;
  if (m == 0 || n == 0 || count == 0) return;
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (k == 0) {
      for (index_t r = 0; r < ranks; ++r)
        check(cudaMemsetAsync(p.c[r], 0, static_cast<std::size_t>(batch * m * n) * sizeof(T), stream), "cudaMemsetAsync");
      return;
    }
    gemm_batched<T>(
        column_major_of(m, n, k, a_transposed, b_transposed, a_transposed ? m : k, b_transposed ? k : n, n), count,
        T(1), T(0),
        [=] __device__(index_t i, const T*& a, const T*& b, T*& c) {
          const index_t r = i / batch, j = i % batch;
          a = p.a[r] + j * m * k;
          b = p.b[r] + j * k * n;
          c = p.c[r] + j * m * n;
        },
        stream, "matmul");
  } else {
    using Acc = element_math::calc_t<T>;
    const index_t per = batch * m * n;
    detail::for_each(
        ranks * per,
        [=] __device__(index_t i) {
          const index_t r = i / per, q = i % per, bi = q / (m * n), ij = q % (m * n), row = ij / n, col = ij % n;
          const T* pa = p.a[r] + bi * m * k;
          const T* pb = p.b[r] + bi * k * n;
          Acc s = Acc(0);
          for (index_t t = 0; t < k; ++t)
            s += Acc(a_transposed ? pa[t * m + row] : pa[row * k + t]) *
                 Acc(b_transposed ? pb[col * k + t] : pb[t * n + col]);
          p.c[r][q] = static_cast<T>(s);
        },
        stream, "gemm kernel launch (every rank)");
  }
}

/// One rank's product: gemm_ranks with one rank (cuBLAS's batched call with a batch of
/// `batch`, or the in-order kernel).
template <class T>
void gemm(T* c, const T* a, const T* b, index_t m, index_t n, index_t k, bool a_transposed, bool b_transposed,
          index_t batch, cudaStream_t stream) {
  gemm_ranks_args<T> p{};
  p.a[0] = a;
  p.b[0] = b;
  p.c[0] = c;
  gemm_ranks<T>(p, 1, m, n, k, a_transposed, b_transposed, batch, stream);
}

}  // namespace spmd::cuda::kernels
