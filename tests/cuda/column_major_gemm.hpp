// tests/cuda/column_major_gemm.hpp — cuBLAS's gemm as its documentation defines it, in plain
// loops: what the emulation tests compute for a call the backend would make.
#pragma once

#include "spmd/backends/cuda/gemm_heads.hpp"

namespace spmd::test {

/// c (m x n, column-major, ldc) = alpha · op(x) op(y) + beta · c: x the first operand (m x k
/// after op, leading dimension ld_first), y the second (k x n after op); with beta 0, c is
/// not read (cuBLAS's rule).
template <class T>
void column_major_gemm(const cuda::kernels::column_major_gemm& f, T alpha, const T* x, const T* y, T beta, T* c) {
  for (index_t i = 0; i < f.m; ++i)
    for (index_t j = 0; j < f.n; ++j) {
      T s = 0;
      for (index_t l = 0; l < f.k; ++l)
        s += (f.first_transposed ? x[l + i * f.ld_first] : x[i + l * f.ld_first]) *
             (f.second_transposed ? y[j + l * f.ld_second] : y[l + j * f.ld_second]);
      T& out = c[i + j * f.ldc];
      out = alpha * s + (beta == T(0) ? T(0) : beta * out);
    }
}

}  // namespace spmd::test
