// tests/random/stats.cpp — large samples look like their distributions: means, variances,
// histograms (chi-square), tails, neighbour correlation, bernoulli and dropout rates; the
// 16-bit types stay in range. Bounds are 6 standard errors (or the chi-square's 6 sigma), so
// a correct generator fails them with probability below 1e-8 per check, and the seeds are
// fixed: the test is deterministic.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "spmd/host/random.hpp"
#include "spmd/random/draw.hpp"

namespace {

using spmd::index_t;
using spmd::random::distribution;
using spmd::random::draw;

constexpr index_t n = index_t{1} << 21;

template <class T>
std::vector<double> sample(const draw& d, index_t count = n) {
  std::vector<T> v(static_cast<std::size_t>(count));
  spmd::host::fill_run<T>(d, 0, count, v.data());
  return std::vector<double>(v.begin(), v.end());
}

struct moments {
  double mean = 0, var = 0, lag1 = 0;
};
moments moments_of(const std::vector<double>& x) {
  moments m;
  for (double v : x) m.mean += v;
  m.mean /= static_cast<double>(x.size());
  double cov = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double c = x[i] - m.mean;
    m.var += c * c;
    if (i + 1 < x.size()) cov += c * (x[i + 1] - m.mean);
  }
  m.lag1 = cov / m.var;
  m.var /= static_cast<double>(x.size() - 1);
  return m;
}

/// Chi-square of counts in `bins` equiprobable bins of cdf(x); checked against its 6 sigma.
template <class Cdf>
void check_histogram(const std::vector<double>& x, int bins, Cdf cdf) {
  std::vector<double> count(static_cast<std::size_t>(bins), 0.0);
  for (double v : x) {
    const int b = std::min(bins - 1, static_cast<int>(cdf(v) * bins));
    count[static_cast<std::size_t>(std::max(0, b))] += 1;
  }
  const double expect = static_cast<double>(x.size()) / bins;
  double chi2 = 0;
  for (double c : count) chi2 += (c - expect) * (c - expect) / expect;
  const double dof = bins - 1;
  INFO("chi-square " << chi2 << " with " << dof << " degrees of freedom");
  CHECK(chi2 < dof + 6 * std::sqrt(2 * dof));
  CHECK(chi2 > dof - 6 * std::sqrt(2 * dof));
}

double normal_cdf(double z) { return 0.5 * std::erfc(-z / std::sqrt(2.0)); }

template <class T>
void uniform_case(std::uint64_t seed) {
  const std::vector<double> x = sample<T>({distribution::uniform, seed, 0, 0.0, 1.0, 0});
  const moments m = moments_of(x);
  const double se = std::sqrt(1.0 / 12 / n);
  CHECK(std::abs(m.mean - 0.5) < 6 * se);
  CHECK(std::abs(m.var - 1.0 / 12) < 6 * std::sqrt(1.0 / 180 / n));  // var of (u - 1/2)^2
  CHECK(std::abs(m.lag1) < 6 / std::sqrt(double(n)));
  CHECK(*std::min_element(x.begin(), x.end()) >= 0.0);
  CHECK(*std::max_element(x.begin(), x.end()) < 1.0);
  check_histogram(x, 64, [](double v) { return v; });
}

template <class T>
void normal_case(std::uint64_t seed, double mean, double std) {
  const std::vector<double> x = sample<T>({distribution::normal, seed, 8, mean, std, 0});
  const moments m = moments_of(x);
  const double tol = std::is_same_v<T, spmd::bfloat16> ? 0.01 : 0.0;  // 8-bit rounding
  CHECK(std::abs(m.mean - mean) < 6 * std / std::sqrt(double(n)) + tol * std);
  CHECK(std::abs(m.var / (std * std) - 1) < 6 * std::sqrt(2.0 / n) + 2 * tol);
  CHECK(std::abs(m.lag1) < 6 / std::sqrt(double(n)));  // the cos and sin of a pair included
  std::size_t beyond2 = 0;
  for (double v : x) beyond2 += std::abs(v - mean) > 2 * std;
  const double p2 = std::erfc(2 / std::sqrt(2.0));
  CHECK(std::abs(double(beyond2) / n - p2) < 6 * std::sqrt(p2 * (1 - p2) / n) + tol);
  if (!tol) check_histogram(x, 64, [&](double v) { return normal_cdf((v - mean) / std); });
}

TEST_CASE("uniform samples: mean, variance, histogram, range, independence", "[random][stats]") {
  uniform_case<float>(1);
  uniform_case<double>(2);
  uniform_case<spmd::float16>(3);
  // bf16: 256 equally likely values k / 256.
  const std::vector<double> b = sample<spmd::bfloat16>({distribution::uniform, 4, 0, 0.0, 1.0, 0});
  for (double v : b) {
    CHECK(v * 256 == std::floor(v * 256));
    if (v * 256 != std::floor(v * 256)) break;
  }
  check_histogram(b, 64, [](double v) { return v; });
}

TEST_CASE("uniform_(from, to) scales into [from, to)", "[random][stats]") {
  const std::vector<double> x = sample<float>({distribution::uniform, 7, 0, -2.0, 6.0, 0});
  const moments m = moments_of(x);
  CHECK(std::abs(m.mean - 2.0) < 6 * 8 * std::sqrt(1.0 / 12 / n));
  CHECK(*std::min_element(x.begin(), x.end()) >= -2.0);
  CHECK(*std::max_element(x.begin(), x.end()) < 6.0);
  // A value that would round up to `to` becomes `from`: bf16 in [1, 1 + 2^-7).
  const std::vector<double> h = sample<spmd::bfloat16>({distribution::uniform, 8, 0, 1.0, 1.0078125, 0});
  for (double v : h) CHECK((v >= 1.0 && v < 1.0078125));
}

TEST_CASE("normal samples: mean, variance, tails, histogram, independence", "[random][stats]") {
  normal_case<float>(11, 0.0, 1.0);
  normal_case<double>(12, 0.0, 1.0);
  normal_case<float>(13, 3.0, 2.0);
  normal_case<double>(14, -1.0, 0.25);
  normal_case<spmd::float16>(15, 0.0, 1.0);
  normal_case<spmd::bfloat16>(16, 0.0, 1.0);
}

TEST_CASE("bernoulli and dropout rates", "[random][stats]") {
  for (double p : {0.0, 0.1, 0.5, 0.9, 1.0}) {
    const auto t = static_cast<std::uint64_t>(std::ldexp(p, 32));
    const std::vector<double> x = sample<float>({distribution::bernoulli, 21, 0, p, 0, t});
    double ones = 0;
    for (double v : x) ones += v;
    INFO("p = " << p);
    CHECK(std::abs(ones / n - p) <= 6 * std::sqrt(p * (1 - p) / n));
    // dropout keeps 1 - p of the elements, scaled, and so keeps the mean.
    const draw dd{distribution::dropout, 22, 0, p, 0, t};
    double kept = 0, sum = 0;
    for (index_t i = 0; i < n; ++i) {
      const float y = spmd::random::dropout_at<float>(dd, static_cast<std::uint64_t>(i), 1.0f);
      kept += y != 0.0f;
      sum += y;
    }
    CHECK(std::abs(kept / n - (1 - p)) <= 6 * std::sqrt(p * (1 - p) / n));
    if (p < 1) CHECK(std::abs(sum / n - 1) < 6 * std::sqrt(p / (1 - p) / n) + 1e-6);
  }
}

}  // namespace
