// spmd/backends/cuda/op_bodies.hpp — what one thread does for one element (or row) of an
// operator's local kernel on the device: elementwise functions with broadcasting, strided
// copies (views, cat), reductions, softmax, layer_norm and embedding.
//
// Host-and-device functions over plain geometry structs, no exceptions, no allocation: the
// kernels of kernels/ops.cuh call them from every thread, and the CPU test suite runs them
// through the grid emulation against the host kernels (tests/cuda/op_bodies.cpp). Each
// follows the host kernel's order of operations, so integer and copy results have the same
// bits and floating reductions add in the same order.
#pragma once

#include <cmath>
#include <limits>

#include "spmd/host/element.hpp"
#include "spmd/core/config.hpp"
#include "spmd/core/element_math.hpp"

namespace spmd::cuda {

/// A walk over `nd` dims of extents `ext` in row-major order, with up to three operands'
/// strides (s[0], s[1], s[2]; 0 where an operand broadcasts).
struct index_geom {
  int nd = 0;
  index_t ext[max_tensor_dims] = {};
  index_t s[3][max_tensor_dims] = {};
  SPMD_HD friend constexpr bool operator==(const index_geom&, const index_geom&) = default;
  SPMD_HD index_t count() const {
    index_t n = 1;
    for (int d = 0; d < nd; ++d) n *= ext[d];
    return n;
  }
  /// The three operands' offsets of row-major position i.
  SPMD_HD void offsets(index_t i, index_t& o0, index_t& o1, index_t& o2) const {
    o0 = o1 = o2 = 0;
    for (int d = nd - 1; d >= 0; --d) {
      const index_t x = i % ext[d];
      i /= ext[d];
      o0 += x * s[0][d];
      o1 += x * s[1][d];
      o2 += x * s[2][d];
    }
  }
};

// ---- elementwise (the output is contiguous: element i is out[i]) ------------------------

template <unary_fn F, class T>
SPMD_HD void unary_item(T* out, const T* in, index_t i) {
  out[i] = element_math::unary_elem<F>(in[i]);
}

/// a and b read through g.s[1] and g.s[2] (their broadcast strides).
template <binary_fn F, class T>
SPMD_HD void binary_item(T* out, const T* a, const T* b, const index_geom& g, index_t i) {
  index_t o0, oa, ob;
  g.offsets(i, o0, oa, ob);
  out[i] = element_math::binary_elem<F>(a[oa], b[ob]);
}

template <binary_fn F, bool ScalarLeft, class T>
SPMD_HD void scalar_item(T* out, const T* in, T c, index_t i) {
  out[i] = ScalarLeft ? element_math::binary_elem<F>(c, in[i]) : element_math::binary_elem<F>(in[i], c);
}

// ---- copies ------------------------------------------------------------------------------

/// dst[g.s[0]-offset] = src[g.s[1]-offset] at position i of g.
template <class T>
SPMD_HD void copy_item(T* dst, const T* src, const index_geom& g, index_t i) {
  index_t od, os, unused;
  g.offsets(i, od, os, unused);
  dst[od] = src[os];
}

// ---- reductions ------------------------------------------------------------------------

/// Output element i (row-major over the kept dims: k.ext, input strides k.s[0]) reduces the
/// input elements over the reduced dims (r.ext, input strides r.s[0]) in row-major order —
/// the order in which the host kernel meets them — starting from the op's start value.
template <reduce_op Op, bool Mean, class T>
SPMD_HD void reduce_item(T* out, const T* in, const index_geom& k, const index_geom& r, index_t i) {
  using Acc = element_math::calc_t<T>;
  index_t base, u1, u2;
  k.offsets(i, base, u1, u2);
  Acc a = host::reduction_start<Acc>(Op);
  const index_t n = r.count();
  for (index_t j = 0; j < n; ++j) {
    index_t o, v1, v2;
    r.offsets(j, o, v1, v2);
    a = host::combine<Op>(a, static_cast<Acc>(in[base + o]));
  }
  if constexpr (Mean) out[i] = static_cast<T>(host::divide(a, n));
  else out[i] = static_cast<T>(a);
}

// ---- softmax, layer_norm, embedding ---------------------------------------------------

/// Row `row` of a softmax along one dim: rows walks the other dims (input strides s[0],
/// output strides s[1]); the row has n elements at input stride sx, output stride so. In
/// double, as the host kernel.
template <bool Log, class U, class T>
SPMD_HD void softmax_row(U* out, const T* x, const index_geom& rows, index_t n, index_t sx, index_t so,
                         index_t row) {
  index_t ox, oo, unused;
  rows.offsets(row, ox, oo, unused);
  const T* px = x + ox;
  U* po = out + oo;
  double m = -std::numeric_limits<double>::infinity();
  for (index_t k = 0; k < n; ++k) m = std::fmax(m, static_cast<double>(px[k * sx]));
  double s = 0;
  for (index_t k = 0; k < n; ++k) s += std::exp(static_cast<double>(px[k * sx]) - m);
  const double log_s = std::log(s);
  for (index_t k = 0; k < n; ++k) {
    const double v = static_cast<double>(px[k * sx]) - m;
    po[k * so] = static_cast<U>(Log ? v - log_s : std::exp(v) / s);
  }
}

/// A layer_norm row's mean and 1 / sqrt(var + eps) (biased variance), two passes in double,
/// the row at x + ox walked by inner's input strides.
struct norm_stats {
  double mean, rstd;
};
template <class T>
SPMD_HD norm_stats layer_norm_stats(const T* x, index_t ox, const index_geom& inner, double eps) {
  const index_t n = inner.count();
  double mean = 0, var = 0;
  for (index_t j = 0; j < n; ++j) {
    index_t ix, io, iw;
    inner.offsets(j, ix, io, iw);
    mean += static_cast<double>(x[ox + ix]);
  }
  mean /= static_cast<double>(n);
  for (index_t j = 0; j < n; ++j) {
    index_t ix, io, iw;
    inner.offsets(j, ix, io, iw);
    const double dx = static_cast<double>(x[ox + ix]) - mean;
    var += dx * dx;
  }
  var /= static_cast<double>(n);
  return {mean, 1.0 / std::sqrt(var + eps)};
}

/// Row `row` of a layer_norm: outer walks the leading dims (input strides s[0], output s[1]);
/// inner the normalised ones (input s[0], output s[1], weight and bias s[2]). Two passes in
/// double, biased variance, as the host kernel.
template <bool Affine, class U, class T>
SPMD_HD void layer_norm_row(U* out, const T* x, const T* w, const T* b, const index_geom& outer,
                            const index_geom& inner, double eps, index_t row) {
  index_t ox, oo, unused;
  outer.offsets(row, ox, oo, unused);
  const index_t n = inner.count();
  const norm_stats st = layer_norm_stats(x, ox, inner, eps);
  const double mean = st.mean, inv = st.rstd;
  for (index_t j = 0; j < n; ++j) {
    index_t ix, io, iw;
    inner.offsets(j, ix, io, iw);
    double v = (static_cast<double>(x[ox + ix]) - mean) * inv;
    if constexpr (Affine) v = v * static_cast<double>(w[iw]) + static_cast<double>(b[iw]);
    out[oo + io] = static_cast<U>(v);
  }
}

/// Row `row` of layer_norm's input gradient (geometry as layer_norm_row; g has x's offsets):
/// rstd (ĝ − mean ĝ − x̂ mean(ĝ x̂)), ĝ = g w, in double, as the host's reference path.
template <bool Affine, class U, class T>
SPMD_HD void layer_norm_backward_row(U* out, const T* g, const T* x, const T* w, const index_geom& outer,
                                     const index_geom& inner, double eps, index_t row) {
  index_t ox, oo, unused;
  outer.offsets(row, ox, oo, unused);
  const index_t n = inner.count();
  const norm_stats st = layer_norm_stats(x, ox, inner, eps);
  const double mean = st.mean, rstd = st.rstd;
  auto gh = [&](index_t ix, index_t iw) {
    double v = static_cast<double>(g[ox + ix]);
    if constexpr (Affine) v *= static_cast<double>(w[iw]);
    return v;
  };
  double sum_g = 0, sum_gx = 0;
  for (index_t j = 0; j < n; ++j) {
    index_t ix, io, iw;
    inner.offsets(j, ix, io, iw);
    sum_g += gh(ix, iw);
    sum_gx += gh(ix, iw) * (static_cast<double>(x[ox + ix]) - mean) * rstd;
  }
  const double mean_g = sum_g / static_cast<double>(n), mean_gx = sum_gx / static_cast<double>(n);
  for (index_t j = 0; j < n; ++j) {
    index_t ix, io, iw;
    inner.offsets(j, ix, io, iw);
    const double xh = (static_cast<double>(x[ox + ix]) - mean) * rstd;
    out[oo + io] = static_cast<U>(rstd * (gh(ix, iw) - mean_g - xh * mean_gx));
  }
}

/// Output element i of an embedding (indices contiguous, out contiguous (..., h)): the row of
/// the rank's weight block (rows [first, first + rows), h columns, contiguous), or 0 where
/// another rank holds it. An index outside [0, vocab) writes 0 and sets bad[0] = 1, bad[1] =
/// the index (one of them, when several threads find one): the host then throws, naming it.
template <class U, class T, class I>
SPMD_HD void embedding_item(U* out, const T* w, const I* idx, index_t first, index_t rows, index_t h,
                            index_t vocab, index_t i, index_t* bad) {
  const index_t p = i / h, k = i % h;
  const index_t id = static_cast<index_t>(idx[p]);
  if (id < 0 || id >= vocab) {
    bad[0] = 1;
    bad[1] = id;
    out[i] = static_cast<U>(0);
    return;
  }
  const index_t row = id - first;
  out[i] = (row >= 0 && row < rows) ? static_cast<U>(w[row * h + k]) : static_cast<U>(0);
}

/// Output element i of a one_hot with c classes (indices and out contiguous): 1 where i's
/// class is its row's index. An index outside [0, c) writes 0 and flags it as embedding_item.
template <class U, class I>
SPMD_HD void one_hot_item(U* out, const I* idx, index_t c, index_t i, index_t* bad) {
  const index_t id = static_cast<index_t>(idx[i / c]);
  if (id < 0 || id >= c) {
    bad[0] = 1;
    bad[1] = id;
  }
  out[i] = static_cast<U>(i % c == id ? 1 : 0);
}

}  // namespace spmd::cuda
