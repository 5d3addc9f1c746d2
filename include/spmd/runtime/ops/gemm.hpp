// spmd/runtime/ops/gemm.hpp — the local matrix product every rank runs: C = op(A) · op(B) on
// contiguous row-major blocks, either operand read transposed (no copy made). A small float
// product runs host/vector_math's kernel (host/gemm_lanes.hpp); larger float and double
// products go to BLAS (cblas_sgemm / cblas_dgemm) when
// the build found one (SPMD_HAVE_CBLAS, set by meson when OpenBLAS is installed); other
// element types, and builds without BLAS, use a loop in i-k-j order, which the compiler
// vectorises over j.
#pragma once

#include <cstring>
#include <type_traits>

#include "spmd/core/config.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/thread_pool.hpp"
#include "spmd/host/vector_math.hpp"

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

/// True when gemm<T> hands the product to a BLAS that spreads it over the cores itself.
template <class T>
inline constexpr bool gemm_threads_itself =
#if defined(SPMD_HAVE_CBLAS)
    std::is_same_v<T, float> || std::is_same_v<T, double>;
#else
    false;
#endif

/// While alive, BLAS runs each product on the calling thread alone, so that several threads
/// can run products at once without oversubscribing the cores. OpenBLAS's thread count is a
/// process-wide setting: the scope sets it to 1 and puts the old value back (a product another
/// user thread starts meanwhile also runs on one thread; the bits are the same either way, as
/// OpenBLAS splits a product by rows and columns, never along k). Other BLAS builds have no
/// such switch and are left as they are.
class gemm_one_thread {
 public:
  gemm_one_thread() {
#if defined(SPMD_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
    saved_ = openblas_get_num_threads();
    if (saved_ != 1) openblas_set_num_threads(1);
#endif
  }
  ~gemm_one_thread() {
#if defined(SPMD_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
    if (saved_ != 1) openblas_set_num_threads(saved_);
#endif
  }
  gemm_one_thread(const gemm_one_thread&) = delete;
  gemm_one_thread& operator=(const gemm_one_thread&) = delete;

 private:
  [[maybe_unused]] int saved_ = 1;
};

#if defined(SPMD_HAVE_CBLAS)
/// One BLAS call: c = alpha · op(a) op(b) (see gemm_ld), k > 0.
template <class T>
void blas_gemm(T* c, index_t ldc, const T* a, index_t lda, const T* b, index_t ldb, index_t m, index_t n, index_t k,
               bool at, bool bt, T alpha) {
  const auto ta = at ? CblasTrans : CblasNoTrans, tb = bt ? CblasTrans : CblasNoTrans;
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  T beta = T(0);
#if defined(OPENBLAS_VERSION)
  // OpenBLAS clears c for beta = 0 in a pass of its own (gemm_beta), then adds the product
  // to it: on a small product that pass costs 7-25 % of the call, on one thread 1-8 % of
  // any (bench/RESULTS.md, issue 54). Clearing c here and passing beta = 1 gives the same
  // bits (0 + the product either way) for less. A large c on several threads keeps
  // OpenBLAS's pass, which its threads share.
  if (m * n <= 65536 || openblas_get_num_threads() == 1) {
    for (index_t i = 0; i < m; ++i) std::memset(c + i * ldc, 0, static_cast<std::size_t>(n) * sizeof(T));
    beta = T(1);
  }
#endif
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
                static_cast<int>(ldc));
  else
    cblas_dgemm(CblasRowMajor, ta, tb, M, N, K, alpha, a, static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
                static_cast<int>(ldc));
}
#endif

/// The largest product (m n k multiply-adds) that goes to host/vector_math's small-product
/// kernel instead of BLAS: below it a BLAS call's set-up (its checks, packing both operands,
/// clearing c) costs more than the kernel's lack of cache blocking; at 2^20 the two run alike
/// (bench/RESULTS.md, issue 54: OpenBLAS 64-75 GFLOP/s on spmd-train's gpt's shapes, the
/// small kernel 85-95).
inline constexpr index_t gemm_small_limit = index_t{1} << 20;

/// c (m x n, row stride ldc) = alpha · op(a) op(b), a and b read with row strides lda and ldb
/// (BLAS's leading dimensions): one head's block inside a (batch, positions, width) tensor,
/// used where it lies. A float product of at most gemm_small_limit multiply-adds runs
/// host/vector_math's small-product kernel; larger float and double products go through BLAS
/// when the build has one, else a loop summing over k in order.
///
/// A product worth spreading (OpenBLAS's own threshold, m n k > 2^18), called where the
/// simulation's threads are free, is cut into one block of rows (or columns) per thread, each
/// a one-thread call of the small kernel or of OpenBLAS: OpenBLAS's threads are never woken, so
/// they never spin (sched_yield, for 2^28 cycles after each product) on the cores the ranks'
/// threads need (bench/RESULTS.md, issue 54). The bits are the same: both kernels sum every
/// element over k in the same order whatever the blocks. (Another BLAS threads itself and is
/// called whole.)
template <class T>
void gemm_ld(T* c, index_t ldc, const T* a, index_t lda, const T* b, index_t ldb, index_t m, index_t n, index_t k,
             bool at, bool bt, T alpha) {
  if (m == 0 || n == 0) return;
  // Which kernel: the small one for a small float product (any float product where there is no
  // BLAS), else BLAS; neither: the loop below.
  constexpr bool blas_here = gemm_threads_itself<T>;
  const bool small = std::is_same_v<T, float> && k > 0 && (m * n * k <= gemm_small_limit || !blas_here);
  const bool blas = blas_here && k > 0 && !small;
  if (small || blas) {
    const auto block = [&](T* cb, const T* ab, const T* bb, index_t mb, index_t nb) {
      if constexpr (std::is_same_v<T, float>)
        if (small) return host::vector_math::gemm_small(cb, ldc, ab, lda, bb, ldb, mb, nb, k, at, bt, alpha);
#if defined(SPMD_HAVE_CBLAS)
      if constexpr (blas_here) blas_gemm(cb, ldc, ab, lda, bb, ldb, mb, nb, k, at, bt, alpha);
#endif
    };
#if defined(SPMD_HAVE_CBLAS) && !defined(OPENBLAS_VERSION)
    // another BLAS threads itself (and may block by size): never split
    const index_t parts = small && host::threads_free() && m * n * k > (index_t{1} << 18) ? host::threads() : 1;
#else
    const index_t parts = host::threads_free() && m * n * k > (index_t{1} << 18) ? host::threads() : 1;
#endif
    const bool by_rows = m >= n;
    const index_t span = by_rows ? m : n, step = (span + parts - 1) / parts;
    if (parts <= 1 || step < 8) return block(c, a, b, m, n);
    const gemm_one_thread one;
    host::parallel_for((span + step - 1) / step, [&](index_t p) {
      const index_t lo = p * step, len = lo + step < span ? step : span - lo;
      if (by_rows)  // rows lo.. of op(a): a's rows, or its columns when read transposed
        block(c + lo * ldc, at ? a + lo : a + lo * lda, b, len, n);
      else  // columns lo.. of op(b)
        block(c + lo, a, bt ? b + lo * ldb : b + lo, m, len);
    });
    return;
  }
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      T s = T(0);
      for (index_t p = 0; p < k; ++p) s += (at ? a[p * lda + i] : a[i * lda + p]) * (bt ? b[j * ldb + p] : b[p * ldb + j]);
      c[i * ldc + j] = alpha * s;
    }
}

/// c (m x n) = a · b, where a is (m x k), or (k x m) read transposed when `at`, and b is
/// (k x n), or (n x k) read transposed when `bt`. Every pointer is to a contiguous row-major
/// block; c is overwritten.
template <class T>
void gemm(T* c, const T* a, const T* b, index_t m, index_t n, index_t k, bool at, bool bt) {
  if (m == 0 || n == 0) return;
  if constexpr (gemm_threads_itself<T> || std::is_same_v<T, float>) {  // (k == 0: gemm_ld writes the zeros)
    gemm_ld(c, n, a, at ? m : k, b, bt ? k : n, m, n, k, at, bt, T(1));
    return;
  }
  using Acc = std::conditional_t<is_narrow_float<T>, float, T>;
  if (at || bt) {  // each element summed over k in order (the CUDA kernel's order too)
    for (index_t i = 0; i < m; ++i)
      for (index_t j = 0; j < n; ++j) {
        Acc s = Acc(0);
        for (index_t p = 0; p < k; ++p)
          s += Acc(at ? a[p * m + i] : a[i * k + p]) * Acc(bt ? b[j * k + p] : b[p * n + j]);
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
