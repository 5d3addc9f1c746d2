// examples/tutorial/tutorial_support.hpp — what the tutorial programs share: a check that
// counts failures (each program exits 1 if any check failed), seeded random tensors (torch.randn's
// role), and the one-device references the examples compare with: a plain triple-loop
// matmul and relu(x @ w + b).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <spmd/host/host_tensor.hpp>
#include <spmd/host/view.hpp>

namespace tutorial {

using spmd::index_t;
using spmd::sim::host_tensor;
using spmd::sim::strided_view;

inline int& failures() {
  static int n = 0;
  return n;
}
/// Prints "ok" or "FAILED" with what was checked; main returns exit_code().
inline void expect(bool ok, const std::string& what) {
  std::printf("  %-6s %s\n", ok ? "ok" : "FAILED", what.c_str());
  if (!ok) ++failures();
}
inline int exit_code() {
  if (failures() != 0) std::printf("%d check(s) failed\n", failures());
  return failures() == 0 ? 0 : 1;
}

/// Normally distributed values, reproducible from the seed.
inline host_tensor<float> randn(std::vector<index_t> shape, unsigned seed) {
  auto t = host_tensor<float>::zeros(std::move(shape));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  for (float& v : t.data) v = normal(rng);
  return t;
}

/// a (m x k) @ b (k x n), summing over k in order.
inline host_tensor<float> matmul(strided_view<const float> a, strided_view<const float> b) {
  if (a.rank() != 2 || b.rank() != 2 || a.extent(1) != b.extent(0))
    throw std::invalid_argument("tutorial::matmul: shapes do not multiply");
  auto c = host_tensor<float>::zeros({a.extent(0), b.extent(1)});
  for (index_t i = 0; i < a.extent(0); ++i)
    for (index_t j = 0; j < b.extent(1); ++j) {
      float s = 0;
      for (index_t k = 0; k < a.extent(1); ++k) s += a(i, k) * b(k, j);
      c.at({i, j}) = s;
    }
  return c;
}

/// relu(x @ w + b), b broadcast over the rows.
inline host_tensor<float> linear_relu(strided_view<const float> x, strided_view<const float> w,
                                      strided_view<const float> b) {
  host_tensor<float> y = matmul(x, w);
  for (index_t i = 0; i < y.shape[0]; ++i)
    for (index_t j = 0; j < y.shape[1]; ++j) y.at({i, j}) = std::max(0.f, y.at({i, j}) + b(j));
  return y;
}

inline float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  float d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d = std::max(d, std::fabs(a[i] - b[i]));
  return d;
}

}  // namespace tutorial
