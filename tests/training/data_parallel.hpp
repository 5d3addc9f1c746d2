// tests/training/data_parallel.hpp — the small model the data-parallel tests train, written once
// for any parameter layout: y = relu(x W1ᵀ + b1) W2ᵀ + b2, loss = mean((y − t)²), f64.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "../common/values.hpp"

#include "spmd/runtime/autograd.hpp"

namespace dp_test {

inline std::vector<double> values(std::size_t n, unsigned seed, double scale = 1e-3) {
  return test_values::values<double>(n, seed, scale);
}

/// |a − b| ≤ tol·(1 + |b|) element by element (the relative-or-absolute tolerance of the
/// comparisons with one-device training).
inline void close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i])));
}

// Sizes: 10 samples of 4 features, hidden 6, 3 outputs (10 rows over 4 ranks: 3, 3, 3, 1).
inline constexpr spmd::index_t batch = 10, in = 4, hidden = 6, out = 3;

struct init {
  std::vector<double> w1 = values(hidden * in, 1, 1e-3), b1 = values(hidden, 2, 1e-4),
                      w2 = values(out * hidden, 3, 1e-3), b2 = values(out, 4, 1e-4);
  std::vector<double> x(int step) const { return values(batch * in, 10 + static_cast<unsigned>(step), 2e-3); }
  std::vector<double> t(int step) const { return values(batch * out, 50 + static_cast<unsigned>(step), 1e-3); }
};

/// The loss of the model on (x, t) with parameters given as variables (any layouts that the
/// operators' rules accept).
template <class X, class Tgt, class W1, class B1, class W2, class B2>
auto loss(const X& x, const Tgt& t, const W1& w1, const B1& b1, const W2& w2, const B2& b2) {
  namespace rt = spmd::runtime;
  auto h = rt::relu(rt::linear(rt::as_variable(x), w1, b1));
  auto d = rt::linear(h, w2, b2) - t;
  return rt::mean<>(d * d);
}

}  // namespace dp_test
