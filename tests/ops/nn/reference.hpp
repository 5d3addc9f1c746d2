// tests/ops/nn/reference.hpp — one-device references for the nn ops, written apart from the
// library's kernels: double-precision loops over row-major data seen as (outer, n, inner).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "../common/op_test.hpp"

namespace nn_ref {

using op_test::host_tensor;
using op_test::index_t;

/// Some mesh dim of the placements P shards tensor dim d.
template <class P>
constexpr bool shards_dim(int d) {
  for (const spmd::placement& p : P::value())
    if (p.is_shard() && p.dim == d) return true;
  return false;
}

template <class T>
host_tensor<double> widen(const host_tensor<T>& t) {
  host_tensor<double> w{t.shape, {}};
  for (const T& v : t.data) w.data.push_back(static_cast<double>(v));
  return w;
}

inline index_t product(const std::vector<index_t>& s, std::size_t from, std::size_t to) {
  index_t n = 1;
  for (std::size_t d = from; d < to; ++d) n *= s[d];
  return n;
}

/// softmax (or log_softmax) along `dim`.
inline host_tensor<double> softmax(const host_tensor<double>& x, std::size_t dim, bool log) {
  const index_t outer = product(x.shape, 0, dim), n = x.shape[dim],
                inner = product(x.shape, dim + 1, x.shape.size());
  host_tensor<double> y = x;
  for (index_t o = 0; o < outer; ++o)
    for (index_t i = 0; i < inner; ++i) {
      auto at = [&](index_t k) -> double& { return y.data[static_cast<std::size_t>((o * n + k) * inner + i)]; };
      double m = at(0);
      for (index_t k = 1; k < n; ++k) m = std::max(m, at(k));
      double s = 0;
      for (index_t k = 0; k < n; ++k) s += std::exp(at(k) - m);
      for (index_t k = 0; k < n; ++k) at(k) = log ? at(k) - m - std::log(s) : std::exp(at(k) - m) / s;
    }
  return y;
}

/// layer_norm over the last `norm` dims; w and b (may be null) of those extents.
inline host_tensor<double> layer_norm(const host_tensor<double>& x, std::size_t norm,
                                      const host_tensor<double>* w, const host_tensor<double>* b,
                                      double eps) {
  const std::size_t r = x.shape.size();
  const index_t outer = product(x.shape, 0, r - norm), n = product(x.shape, r - norm, r);
  host_tensor<double> y = x;
  for (index_t o = 0; o < outer; ++o) {
    double* row = y.data.data() + o * n;
    double mean = 0;
    for (index_t k = 0; k < n; ++k) mean += row[k];
    mean /= static_cast<double>(n);
    double var = 0;
    for (index_t k = 0; k < n; ++k) var += (row[k] - mean) * (row[k] - mean);
    var /= static_cast<double>(n);
    for (index_t k = 0; k < n; ++k) {
      row[k] = (row[k] - mean) / std::sqrt(var + eps);
      if (w) row[k] = row[k] * w->data[static_cast<std::size_t>(k)] + b->data[static_cast<std::size_t>(k)];
    }
  }
  return y;
}

/// layer_norm's input gradient over the last `norm` dims, from the output's gradient g (x's
/// shape) and the weight w (may be null): with ĝ = g w and x̂ the normalised x,
/// dx = (ĝ - mean ĝ - x̂ mean(ĝ x̂)) / sqrt(var + eps), written out directly (the chain rule
/// through mean and variance, torch's formula).
inline host_tensor<double> layer_norm_backward(const host_tensor<double>& g, const host_tensor<double>& x,
                                               std::size_t norm, const host_tensor<double>* w, double eps) {
  const std::size_t r = x.shape.size();
  const index_t outer = product(x.shape, 0, r - norm), n = product(x.shape, r - norm, r);
  host_tensor<double> dx = x;
  for (index_t o = 0; o < outer; ++o) {
    const double* xr = x.data.data() + o * n;
    const double* gr = g.data.data() + o * n;
    double mean = 0, var = 0;
    for (index_t k = 0; k < n; ++k) mean += xr[k];
    mean /= static_cast<double>(n);
    for (index_t k = 0; k < n; ++k) var += (xr[k] - mean) * (xr[k] - mean);
    var /= static_cast<double>(n);
    const double sd = std::sqrt(var + eps);
    std::vector<double> gh(static_cast<std::size_t>(n)), xh(static_cast<std::size_t>(n));
    double mg = 0, mgx = 0;
    for (index_t k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(k);
      gh[i] = gr[k] * (w ? w->data[i] : 1.0);
      xh[i] = (xr[k] - mean) / sd;
      mg += gh[i] / static_cast<double>(n);
      mgx += gh[i] * xh[i] / static_cast<double>(n);
    }
    for (index_t k = 0; k < n; ++k) {
      const auto i = static_cast<std::size_t>(k);
      dx.data[static_cast<std::size_t>(o * n + k)] = (gh[i] - mg - xh[i] * mgx) / sd;
    }
  }
  return dx;
}

/// The rows of w (V, H) at the indices: shape indices' + (H).
template <class I>
host_tensor<double> embedding(const host_tensor<I>& idx, const host_tensor<double>& w) {
  const index_t h = w.shape[1];
  std::vector<index_t> shape = idx.shape;
  shape.push_back(h);
  auto y = host_tensor<double>::zeros(shape);
  for (std::size_t p = 0; p < idx.data.size(); ++p)
    for (index_t k = 0; k < h; ++k)
      y.data[p * static_cast<std::size_t>(h) + static_cast<std::size_t>(k)] =
          w.data[static_cast<std::size_t>(idx.data[p] * h + k)];
  return y;
}

}  // namespace nn_ref
