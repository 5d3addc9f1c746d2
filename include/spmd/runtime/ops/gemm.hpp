// spmd/runtime/ops/gemm.hpp — the local matrix product every rank runs: C = A · B or A · Bᵀ on
// contiguous row-major blocks. float and double go to BLAS (cblas_sgemm / cblas_dgemm) when
// the build found one (SPMD_HAVE_CBLAS, set by meson when OpenBLAS is installed); other
// element types, and builds without BLAS, use a loop in i-k-j order, which the compiler
// vectorises over j.
#pragma once

#include <type_traits>

#include "spmd/core/config.hpp"
#include "spmd/backends/host/element.hpp"

#if defined(SPMD_HAVE_CBLAS)
// OpenBLAS's config header declares C99 _Complex types, which clang's -Wpedantic flags in
// C++; the warning is about their header, not ours.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wc99-extensions"
#endif
#include <cblas.h>
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
#endif

namespace spmd::runtime::detail {

/// c (m x n) = a (m x k) · b, where b is (k x n), or (n x k) read transposed when `bt`.
/// Every pointer is to a contiguous row-major block; c is overwritten.
template <class T>
void gemm(T* c, const T* a, const T* b, index_t m, index_t n, index_t k, bool bt) {
  if (m == 0 || n == 0) return;
#if defined(SPMD_HAVE_CBLAS)
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    if (k == 0) {
      for (index_t i = 0; i < m * n; ++i) c[i] = T(0);
      return;
    }
    const auto tb = bt ? CblasTrans : CblasNoTrans;
    const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
    if constexpr (std::is_same_v<T, float>)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, tb, M, N, K, 1.f, a, K, b, bt ? K : N, 0.f, c, N);
    else
      cblas_dgemm(CblasRowMajor, CblasNoTrans, tb, M, N, K, 1.0, a, K, b, bt ? K : N, 0.0, c, N);
    return;
  }
#endif
  using Acc = std::conditional_t<is_narrow_float<T>, float, T>;
  if (bt) {
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) {
        Acc s = Acc(0);
        for (index_t p = 0; p < k; ++p) s += Acc(a[i * k + p]) * Acc(b[j * k + p]);
        c[i * n + j] = static_cast<T>(s);
      }
    return;
  }
  if constexpr (std::is_same_v<Acc, T>) {
    for (index_t i = 0; i < m; ++i) {
      T* ci = c + i * n;
      for (index_t j = 0; j < n; ++j) ci[j] = T(0);
      for (index_t p = 0; p < k; ++p) {
        const T aip = a[i * k + p];
        const T* bp = b + p * n;
        for (index_t j = 0; j < n; ++j) ci[j] += aip * bp[j];
      }
    }
  } else {
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) {
        Acc s = Acc(0);
        for (index_t p = 0; p < k; ++p) s += Acc(a[i * k + p]) * Acc(b[p * n + j]);
        c[i * n + j] = static_cast<T>(s);
      }
  }
}

}  // namespace spmd::runtime::detail
