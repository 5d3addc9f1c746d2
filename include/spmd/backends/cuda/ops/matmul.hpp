// spmd/backends/cuda/ops/matmul.hpp — matmul, matmul_t, t_matmul and bmm on the device: cuBLAS for
// float and double (within a tolerance of the host's BLAS), a kernel in the host kernel's
// order for the 16-bit floats and the integers (the same bits). One call for every rank when their
// blocks have the same shapes (cuBLAS batched), else one per rank.
#pragma once

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/runtime/ops/matmul.hpp"

namespace spmd::cuda {

namespace ops_detail {

/// c = a . b for every held rank: one call for all of them when their shapes agree (the
/// common, evenly sharded case), else one per rank. dims(a_shape, b_shape) gives {m, n, k,
/// batch}.
template <class T, class Dims>
void gemm_all(device_set<T>& c, const device_set<T>& a, const device_set<T>& b, bool at, bool bt, Dims dims) {
  const held_range h = c.held_ranks();
  bool same = h.count() <= max_launch_ranks;
  for (const index_t i : c.held())
    same = same && a.shape(i) == a.shape(h.lo) && b.shape(i) == b.shape(h.lo);
  if (same && h.count() > 1) {
    const auto [m, n, k, batch] = dims(a.shape(h.lo), b.shape(h.lo));
    kernels::gemm_ranks_args<T> p{};
    for (const index_t i : c.held()) {
      p.a[i - h.lo] = a.data(i);
      p.b[i - h.lo] = b.data(i);
      p.c[i - h.lo] = c.data(i);
    }
    kernels::gemm_ranks<T>(p, h.count(), m, n, k, at, bt, batch, current_stream());
    return;
  }
  for (const index_t i : c.held()) {
    const auto [m, n, k, batch] = dims(a.shape(i), b.shape(i));
    kernels::gemm<T>(c.data(i), a.data(i), b.data(i), m, n, k, at, bt, batch, current_stream());
  }
}

struct gemm_dims {
  index_t m, n, k, batch;
};

/// The product of a block's leading dims [0, n).
inline index_t leading(const shape_vec& s, int n) {
  index_t p = 1;
  for (int d = 0; d < n; ++d) p *= s[d];
  return p;
}

}  // namespace ops_detail

template <>
struct device_op<spmd::ops::matmul> {
  template <class T, class Off>
  static void run(const spmd::ops::matmul&, device_set<T>& out, Off&, const device_set<T>& a, const device_set<T>& b) {
    ops_detail::gemm_all(out, a, b, false, false, [](const shape_vec& sa, const shape_vec& sb) {
      const int r = sa.size();  // (b, m) are the rows of one gemm
      return ops_detail::gemm_dims{ops_detail::leading(sa, r - 1), sb[1], sa[r - 1], 1};
    });
  }
};

template <>
struct device_op<spmd::ops::matmul_t> {
  template <class T, class Off>
  static void run(const spmd::ops::matmul_t&, device_set<T>& out, Off&, const device_set<T>& a, const device_set<T>& b) {
    ops_detail::gemm_all(out, a, b, false, true, [](const shape_vec& sa, const shape_vec& sb) {
      const int r = sa.size();
      return ops_detail::gemm_dims{ops_detail::leading(sa, r - 1), sb[0], sa[r - 1], 1};
    });
  }
};

template <>
struct device_op<spmd::ops::t_matmul> {
  template <class T, class Off>
  static void run(const spmd::ops::t_matmul&, device_set<T>& out, Off&, const device_set<T>& a, const device_set<T>& b) {
    ops_detail::gemm_all(out, a, b, true, false, [](const shape_vec& sa, const shape_vec& sb) {
      const int r = sa.size();  // (b, k) are contracted
      return ops_detail::gemm_dims{sa[r - 1], sb[r - 1], ops_detail::leading(sa, r - 1), 1};
    });
  }
};

template <>
struct device_op<spmd::ops::bmm> {
  template <class T, class Off>
  static void run(const spmd::ops::bmm&, device_set<T>& out, Off&, const device_set<T>& a, const device_set<T>& b) {
    ops_detail::gemm_all(out, a, b, false, false, [](const shape_vec& sa, const shape_vec& sb) {
      // The leading (batch) dims of a contiguous block are one batch.
      const int r = sa.size();
      index_t nb = 1;
      for (int d = 0; d + 2 < r; ++d) nb *= sa[d];
      return ops_detail::gemm_dims{sa[r - 2], sb[r - 1], sa[r - 1], nb};
    });
  }
};

}  // namespace spmd::cuda
