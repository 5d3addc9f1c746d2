// spmd/backends/cuda/gemm_heads.hpp — row-major products as cuBLAS's column-major batched
// calls see them, in plain C++ (no CUDA headers): what kernels/gemm.cuh and kernels/ring.cuh
// pass to cublas{S,D}gemmBatched, and what tests/cuda/ring_bodies.cpp emulates on the host.
//
// Row-major C = op(A) op(B) is column-major Cᵀ = op(B)ᵀ op(A)ᵀ, and cuBLAS reads a row-major
// block whose rows lie at stride ld as its transpose with leading dimension ld: the operands
// swap, each keeps its own op, m and n swap, and every leading dimension is the stored rows'
// stride. One function says so (column_major_of); both batched products go through it.
#pragma once

#include "spmd/core/config.hpp"

namespace spmd::cuda::kernels {

/// The arguments of a column-major gemm (cuBLAS's) that computes a row-major product: the
/// first operand is the row-major b, the second the row-major a.
struct column_major_gemm {
  bool first_transposed = false, second_transposed = false;
  index_t m = 0, n = 0, k = 0, ld_first = 0, ld_second = 0, ldc = 0;
};
/// Row-major c (m x n, rows at stride ldc) = op(a) (m x k) · op(b) (k x n), a's stored rows at
/// stride lda (k columns, or m when transposed), b's at ldb.
constexpr column_major_gemm column_major_of(index_t m, index_t n, index_t k, bool a_transposed, bool b_transposed,
                                            index_t lda, index_t ldb, index_t ldc) {
  return {b_transposed, a_transposed, n, m, k, ldb, lda, ldc};
}

/// Where head h's operand starts: (h / per) · outer + (h % per) · inner elements in (heads of
/// d side by side in each row, a batch's rows after another's).
struct head_offsets {
  index_t per = 1, outer = 0, inner = 0;
  SPMD_HD index_t of(index_t h) const { return (h / per) * outer + (h % per) * inner; }
};

/// Row-major c (m x n, rows at stride ldc) = alpha · op(a) · op(b) + beta · c for every head
/// h < heads, each operand at its head's offset, rows at its own stride (lda, ldb: the
/// stored rows', transposed or not). One cuBLAS batched call (kernels::gemm_heads).
template <class T>
struct gemm_heads_args {
  T* c = nullptr;
  const T* a = nullptr;
  const T* b = nullptr;
  head_offsets c_at, a_at, b_at;
  index_t ldc = 0, lda = 0, ldb = 0, m = 0, n = 0, k = 0, heads = 0;
  bool a_transposed = false, b_transposed = false;
  T alpha = 1, beta = 0;

  constexpr column_major_gemm column_major() const {
    return column_major_of(m, n, k, a_transposed, b_transposed, lda, ldb, ldc);
  }
};

}  // namespace spmd::cuda::kernels
