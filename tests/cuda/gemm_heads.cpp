// tests/cuda/gemm_heads.cpp — the column-major call that stands for a row-major product
// (backends/cuda/gemm_heads.hpp: column_major_of), which both of the backend's cuBLAS batched
// products pass on (kernels/gemm.cuh: gemm_ranks and the ring's gemm_heads): the call computed
// as cuBLAS defines a column-major gemm, against a row-major product in plain loops, for every
// pair of transposes, rows at their own strides (padding between them left untouched).
#include <catch2/catch.hpp>

#include <vector>

#include "spmd/backends/cuda/gemm_heads.hpp"
#include "column_major_gemm.hpp"

namespace {

using spmd::index_t;
using spmd::cuda::kernels::column_major_of;

std::vector<double> values(index_t n, int seed) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<double>((i * 7 + seed * 13) % 23 - 11);
  return v;
}

void one(index_t m, index_t n, index_t k, bool at, bool bt, index_t pad) {
  // a stored (m x k) or, transposed, (k x m); b (k x n) or (n x k); c (m x n): each row `pad`
  // elements longer than it needs.
  const index_t a_rows = at ? k : m, a_cols = at ? m : k, b_rows = bt ? n : k, b_cols = bt ? k : n;
  const index_t lda = a_cols + pad, ldb = b_cols + pad, ldc = n + pad;
  const std::vector<double> a = values(a_rows * lda, 1), b = values(b_rows * ldb, 2);
  std::vector<double> got = values(m * ldc, 3), want = got;
  const double alpha = 0.5, beta = 2;
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double s = 0;
      for (index_t l = 0; l < k; ++l)
        s += (at ? a[l * lda + i] : a[i * lda + l]) * (bt ? b[j * ldb + l] : b[l * ldb + j]);
      want[i * ldc + j] = alpha * s + beta * want[i * ldc + j];
    }
  // the first operand is b, the second a (kernels::gemm_batched's order)
  spmd::test::column_major_gemm(column_major_of(m, n, k, at, bt, lda, ldb, ldc), alpha, b.data(), a.data(), beta,
                                got.data());
  INFO("m " << m << " n " << n << " k " << k << " a transposed " << at << " b transposed " << bt << " pad " << pad);
  CHECK(got == want);
}

}  // namespace

TEST_CASE("a row-major product as cuBLAS's column-major call", "[gemm]") {
  for (const bool at : {false, true})
    for (const bool bt : {false, true})
      for (const index_t pad : {0, 3}) {
        one(3, 5, 4, at, bt, pad);
        one(1, 6, 2, at, bt, pad);
        one(4, 1, 7, at, bt, pad);
      }
}
