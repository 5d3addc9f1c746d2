// spmd/backends/cuda/ops/matmul.hpp — matmul, matmul_t and bmm on the device: cuBLAS for
// float and double (within a tolerance of the host's BLAS), a kernel in the host kernel's
// order for bfloat16 and the integers (the same bits). One call per rank.
#pragma once

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/runtime/ops/matmul.hpp"

namespace spmd::cuda {

template <>
struct device_op<spmd::ops::matmul> {
  template <class T, class Off>
  static void run(const spmd::ops::matmul&, device_set<T>& out, Off&, const device_set<T>& a, const device_set<T>& b) {
    for (const index_t i : out.held())
      kernels::gemm<T>(out.data(i), a.data(i), b.data(i), a.shape(i)[0], b.shape(i)[1], a.shape(i)[1], false, 1,
                       current_stream());
  }
};

template <>
struct device_op<spmd::ops::matmul_t> {
  template <class T, class Off>
  static void run(const spmd::ops::matmul_t&, device_set<T>& out, Off&, const device_set<T>& a, const device_set<T>& b) {
    for (const index_t i : out.held())
      kernels::gemm<T>(out.data(i), a.data(i), b.data(i), a.shape(i)[0], b.shape(i)[0], a.shape(i)[1], true, 1,
                       current_stream());
  }
};

template <>
struct device_op<spmd::ops::bmm> {
  template <class T, class Off>
  static void run(const spmd::ops::bmm&, device_set<T>& out, Off&, const device_set<T>& a, const device_set<T>& b) {
    for (const index_t i : out.held())
      kernels::gemm<T>(out.data(i), a.data(i), b.data(i), a.shape(i)[1], b.shape(i)[2], a.shape(i)[2], false,
                       a.shape(i)[0], current_stream());
  }
};

}  // namespace spmd::cuda
