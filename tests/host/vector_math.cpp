// tests/host/vector_math.cpp — the host's vectorised float functions (host/vector_math.hpp):
//  - each function's error in ULPs against the double-precision function rounded to float,
//    over 2^24 inputs spread over every float exponent (every 256th bit pattern) and the
//    special values; the bounds are docs/numerics.md's;
//  - every path this CPU has (AVX-512, AVX2, scalar) gives the same bits, element by element,
//    on those inputs, and for the softmax rows of every length 1..80 (the tails included).
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cstring>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "spmd/host/vector_math.hpp"
#include "paths.hpp"

namespace {

namespace vm = spmd::host::vector_math;
using spmd::unary_fn;
using spmd::host::vector_isa;

using spmd_test::isa_limit;
std::vector<vector_isa> paths() { return spmd_test::paths("vector_math"); }

/// Every 256th float bit pattern (both signs, every exponent), then the special values.
std::vector<float> inputs() {
  std::vector<float> x;
  x.reserve((std::size_t{1} << 24) + 16);
  for (std::uint64_t b = 0; b < (std::uint64_t{1} << 32); b += 256)
    x.push_back(std::bit_cast<float>(static_cast<std::uint32_t>(b + (b >> 8) % 256)));
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(), 1.0f, -1.0f,
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(),
                  std::numeric_limits<float>::max(), 88.72283172607421875f, 88.7228393554687f, -103.972084f,
                  0.625f, -0.625f, 9.0f})
    x.push_back(v);
  return x;
}

/// The distance in float steps between a float and the exact value (a double): in units of
/// the float grid's spacing at the exact value (0 for equal bits, NaN against NaN, same
/// infinity). A huge number for a wrong NaN or infinity.
double ulp_error(float got, double exact) {
  if (std::isnan(exact)) return std::isnan(got) ? 0 : 1e30;
  if (std::isnan(got)) return 1e30;
  if (std::isinf(got) || std::isinf(exact)) {
    if (static_cast<double>(got) == exact) return 0;
    // an overflow at the edge: the exact value rounds to inf or to FLT_MAX
    const double r = static_cast<double>(static_cast<float>(exact));
    return r == static_cast<double>(got) ? 0 : 1e30;
  }
  const double a = std::fabs(exact);
  // the spacing of floats at |exact| (subnormals: the smallest spacing)
  int e = 0;
  std::frexp(a < static_cast<double>(std::numeric_limits<float>::min()) ? static_cast<double>(std::numeric_limits<float>::min()) : a, &e);
  const double ulp = std::ldexp(1.0, e - 24);
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

double exact(unary_fn f, double x) {
  switch (f) {
    case unary_fn::exp: return std::exp(x);
    case unary_fn::log: return x == 0 ? -INFINITY : std::log(x);
    case unary_fn::tanh: return std::tanh(x);
    case unary_fn::sigmoid: return 1.0 / (1.0 + std::exp(-x));
    default: return 0;
  }
}

template <unary_fn F>
void check_function(const char* name, double bound) {
  const auto x = inputs();
  std::vector<float> y(x.size());
  std::vector<std::vector<float>> by_path;
  for (vector_isa isa : paths()) {
    isa_limit limit(isa);
    vm::map<F>(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
    by_path.push_back(y);
  }
  double worst = 0;
  float worst_x = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double err = ulp_error(y[i], exact(F, static_cast<double>(x[i])));
    if (err > worst) worst = err, worst_x = x[i];
  }
  std::printf("vector_math: %s: at most %.3f ULP (at %a) over %zu inputs\n", name, worst, worst_x, x.size());
  CHECK(worst <= bound);
  for (std::size_t p = 1; p < by_path.size(); ++p)
    for (std::size_t i = 0; i < x.size(); ++i)
      if (std::bit_cast<std::uint32_t>(by_path[p][i]) != std::bit_cast<std::uint32_t>(by_path[0][i])) {
        FAIL(name << ": path " << p << " gives " << by_path[p][i] << " at " << x[i] << ", the scalar path "
                  << by_path[0][i]);
      }
}

}  // namespace

TEST_CASE("exp is within 1 ULP, the same bits on every path", "[vector_math]") {
  check_function<unary_fn::exp>("exp", 1.0);
}
TEST_CASE("softmax's exp: within 1 ULP from ln 2^-126 to 0, 0 below, the same bits on every path", "[vector_math]") {
  std::vector<float> x;
  for (float v : inputs())
    if (!(v > 0.0f)) x.push_back(v);  // x <= 0, -inf and NaN
  std::vector<float> y(x.size());
  std::vector<std::vector<float>> by_path;
  for (vector_isa isa : paths()) {
    isa_limit limit(isa);
    vm::exp_nonpositive(x.data(), y.data(), static_cast<std::int64_t>(x.size()));
    by_path.push_back(y);
  }
  const float cutoff = -87.3365402f;  // the least x whose e^x is normal
  double worst = 0;
  float worst_x = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    if (x[i] < cutoff) {
      if (y[i] != 0.0f || std::signbit(y[i])) FAIL("exp_nonpositive(" << x[i] << ") = " << y[i] << ", not +0");
      continue;
    }
    const double err = ulp_error(y[i], std::exp(static_cast<double>(x[i])));
    if (err > worst) worst = err, worst_x = x[i];
  }
  std::printf("vector_math: softmax's exp: at most %.3f ULP (at %a) over %zu inputs\n", worst, worst_x, x.size());
  CHECK(worst <= 1.0);
  for (std::size_t p = 1; p < by_path.size(); ++p)
    CHECK(std::memcmp(by_path[p].data(), by_path[0].data(), x.size() * sizeof(float)) == 0);
}
TEST_CASE("log is within 1 ULP, the same bits on every path", "[vector_math]") {
  check_function<unary_fn::log>("log", 1.0);
}
TEST_CASE("tanh is within 2 ULP, the same bits on every path", "[vector_math]") {
  check_function<unary_fn::tanh>("tanh", 2.0);
}
TEST_CASE("sigmoid is within 3 ULP, the same bits on every path", "[vector_math]") {
  check_function<unary_fn::sigmoid>("sigmoid", 3.0);
}

namespace {
/// The tanh GELU and its derivative in double, in torch's formulas.
double gelu_exact(double x) {
  return 0.5 * x * (1 + std::tanh(0.79788456080286535588 * (x + 0.044715 * x * x * x)));
}
double gelu_grad_exact(double x) {
  const double beta = 0.79788456080286535588, kappa = 0.044715;
  const double t = std::tanh(beta * (x + kappa * x * x * x));
  return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * beta * (1 + 3 * kappa * x * x);
}
/// |got - exact| in ULPs of the result, less what the formula itself loses where 1 ± tanh
/// cancels: tanh's own error (2 ULP of 1) times the factor in front of it, |x| / 2 (and the
/// derivative's x²-sized terms), which torch's float formula loses the same way.
double gelu_error(double got, double exact, double cancel) {
  const double scale = std::max(std::fabs(exact), static_cast<double>(std::numeric_limits<float>::min()));
  int e = 0;
  std::frexp(scale, &e);
  const double ulp = std::ldexp(1.0, e - 24);
  const double lost = cancel * std::ldexp(1.0, -23);
  return std::max(0.0, std::fabs(got - exact) - lost) / ulp;
}
}  // namespace

TEST_CASE("the tanh GELU and its backward: torch's formulas within 4 ULP, the same bits on every path",
          "[vector_math]") {
  std::vector<float> x;
  for (std::uint32_t b = 0; b < (1u << 31); b += 1024) {  // |x| < 2^20: past it x³ overflows in float
    const float v = std::bit_cast<float>(b);
    if (v < 1048576.0f) x.push_back(v), x.push_back(-v);
  }
  const auto n = static_cast<std::int64_t>(x.size());
  std::vector<float> g(x.size(), 1.0f), y(x.size()), dy(x.size());
  std::vector<std::vector<float>> ys, dys;
  for (vector_isa isa : paths()) {
    isa_limit limit(isa);
    vm::map<unary_fn::gelu_tanh>(x.data(), y.data(), n);
    vm::gelu_tanh_backward(g.data(), x.data(), dy.data(), n);
    ys.push_back(y), dys.push_back(dy);
  }
  double worst = 0, worst_d = 0, worst_x = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    worst = std::max(worst, gelu_error(y[i], gelu_exact(v), std::fabs(v) / 2 + 1));
    const double ed = gelu_error(dy[i], gelu_grad_exact(v), 1 + std::fabs(v * v * v) / 8);
    if (ed > worst_d) worst_d = ed, worst_x = v;
  }
  std::printf("vector_math: gelu_tanh at most %.3f ULP, its backward %.3f ULP (at %a; past the cancellation) over %zu inputs\n",
              worst, worst_d, worst_x, x.size());
  CHECK(worst <= 4.0);
  CHECK(worst_d <= 4.0);
  for (std::size_t p = 1; p < ys.size(); ++p) {
    CHECK(std::memcmp(ys[p].data(), ys[0].data(), x.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(dys[p].data(), dys[0].data(), x.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("softmax and log_softmax rows: the same bits on every path, every tail, within 4 ULP and x - max's rounding; NaN and inf rows NaN", "[vector_math]") {
  std::vector<float> x;
  for (int i = 0; i < 80 * 80; ++i) x.push_back(static_cast<float>(std::sin(i * 0.37) * 12.0));
  x[5] = -std::numeric_limits<float>::infinity();  // a masked entry
  x[3 * 80 + 7] = 100.0f;  // a row whose other entries' exps are below 2^-126: 0 (numerics.md)
  x[4 * 80 + 9] = std::numeric_limits<float>::quiet_NaN();   // NaN: a row of NaN (torch's)
  x[6 * 80 + 11] = std::numeric_limits<float>::infinity();   // inf - inf: NaN too
  for (bool log_form : {false, true}) {
    std::vector<std::vector<float>> outs;
    for (vector_isa isa : paths()) {
      isa_limit limit(isa);
      std::vector<float> y(x.size(), -7.0f);
      for (std::int64_t n = 1; n <= 80; ++n) {  // 80 rows of n, at a stride of 80
        if (log_form) vm::softmax_rows<true>(x.data(), 80, y.data(), 80, 80, n);
        else vm::softmax_rows<false>(x.data(), 80, y.data(), 80, 80, n);
        for (std::int64_t r = 0; r < 80; ++r) {
          double m = -INFINITY, s = 0;
          for (std::int64_t k = 0; k < n; ++k) m = std::max(m, static_cast<double>(x[r * 80 + k]));
          for (std::int64_t k = 0; k < n; ++k) s += std::exp(x[r * 80 + k] - m);
          for (std::int64_t k = 0; k < n; ++k) {
            const double v = x[r * 80 + k] - m;
            const double want = log_form ? v - std::log(s) : std::exp(v) / s;
            const double got = y[r * 80 + k];
            if (std::isnan(want)) {
              if (!std::isnan(got)) FAIL("row " << r << " of " << n << ", element " << k << ": " << got << ", want NaN");
              continue;
            }
            // exp's and the rounding's few ULP, x - max's rounding (|v| ULP of the exp), the
            // float sum's (about one ULP per 8 terms: a relative error of the sum, an absolute
            // one of its log)
            const double u = std::ldexp(1.0, -24), sum_err = (4 + n / 8.0) * u;
            const double tol = log_form ? 8 * u * (std::fabs(v) + std::fabs(std::log(s))) + sum_err
                                        : ((8 + std::fabs(v)) * u + sum_err) * std::fabs(want) + 1.2e-38;
            if (got != want && !(std::fabs(got - want) <= tol))
              FAIL("row " << r << " of " << n << ", element " << k << ": " << got << ", want " << want);
          }
          if (n < 80) CHECK(y[r * 80 + n] == -7.0f);  // nothing past the row
        }
        outs.push_back(y);
      }
    }
    const std::size_t per = 80;  // outputs per path
    for (std::size_t p = 1; p * per < outs.size(); ++p)
      for (std::size_t k = 0; k < per; ++k)
        CHECK(std::memcmp(outs[p * per + k].data(), outs[k].data(), x.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("layer_norm rows and their input gradient: the same bits on every path, every tail", "[vector_math]") {
  const std::int64_t rows = 7, stride = 53;
  std::vector<float> x(static_cast<std::size_t>(rows * stride)), g(x.size()), w(stride), b(stride);
  for (std::size_t i = 0; i < x.size(); ++i) {
    x[i] = static_cast<float>(std::sin(i * 0.71) * 3 + 40);  // a large mean: the two-pass variance
    g[i] = static_cast<float>(std::cos(i * 0.29));
  }
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 1.0f + 0.01f * static_cast<float>(i), b[i] = 0.5f - 0.02f * static_cast<float>(i);
  std::vector<std::vector<float>> outs;
  for (vector_isa isa : paths()) {
    isa_limit limit(isa);
    for (std::int64_t n = 1; n <= stride; n += 3) {
      std::vector<float> y(x.size(), -1.0f), dy(x.size(), -1.0f), yp(x.size(), -1.0f);
      vm::layer_norm_rows(x.data(), stride, y.data(), stride, rows, n, w.data(), b.data(), 1e-5f);
      vm::layer_norm_rows(x.data(), stride, yp.data(), stride, rows, n, nullptr, nullptr, 1e-5f);
      vm::layer_norm_backward_rows(g.data(), stride, x.data(), stride, w.data(), dy.data(), stride, rows, n, 1e-5f);
      for (std::int64_t r = 0; r < rows; ++r) {  // against double, and nothing past the row
        double mean = 0, var = 0;
        for (std::int64_t k = 0; k < n; ++k) mean += x[r * stride + k];
        mean /= n;
        for (std::int64_t k = 0; k < n; ++k) var += (x[r * stride + k] - mean) * (x[r * stride + k] - mean);
        const double sd = std::sqrt(var / n + 1e-5);
        for (std::int64_t k = 0; k < n; ++k) {
          const double xh = (x[r * stride + k] - mean) / sd;
          CHECK(std::fabs(yp[r * stride + k] - xh) <= 2e-5 * (1 + std::fabs(xh)));
          CHECK(std::fabs(y[r * stride + k] - (xh * w[k] + b[k])) <= 2e-5 * (1 + std::fabs(xh)));
        }
        if (n < stride) CHECK(y[r * stride + n] == -1.0f);
        if (n < stride) CHECK(dy[r * stride + n] == -1.0f);
      }
      outs.push_back(y), outs.push_back(yp), outs.push_back(dy);
    }
  }
  const std::size_t per = outs.size() / paths().size();
  for (std::size_t p = 1; p * per < outs.size(); ++p)
    for (std::size_t k = 0; k < per; ++k)
      CHECK(std::memcmp(outs[p * per + k].data(), outs[k].data(), x.size() * sizeof(float)) == 0);
}

TEST_CASE("AdamW: core/optim_math.hpp's scalar step, bit for bit, on every path", "[vector_math]") {
  const std::size_t n = 1000 + 13;  // a tail
  std::vector<float> p(n), g(n), m(n), v(n);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = static_cast<float>(std::sin(i * 0.3));
    g[i] = static_cast<float>(std::cos(i * 0.7)) * 1e-2f;
    m[i] = static_cast<float>(std::sin(i * 1.1)) * 1e-3f;
    v[i] = static_cast<float>(i % 7) * 1e-6f;
  }
  for (bool decays : {false, true}) {
    spmd::optim_math::adamw_coeffs<float> c{decays, 1 - 1e-3f * 0.01f, 0.1f, 0.999f, 0.001f, 0.0447f, 1e-8f, 1e-3f / 0.19f};
    std::vector<float> wp = p, wm = m, wv = v;  // the scalar reference
    for (std::size_t i = 0; i < n; ++i) spmd::optim_math::adamw_elem(wp[i], g[i], wm[i], wv[i], c);
    for (vector_isa isa : paths()) {
      isa_limit limit(isa);
      std::vector<float> op(n), om(n), ov(n), ip = p, im = m, iv = v;
      vm::adamw(p.data(), g.data(), m.data(), v.data(), op.data(), om.data(), ov.data(), static_cast<std::int64_t>(n), c);
      vm::adamw(ip.data(), g.data(), im.data(), iv.data(), ip.data(), im.data(), iv.data(), static_cast<std::int64_t>(n), c);
      CHECK(std::memcmp(op.data(), wp.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(om.data(), wm.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(ov.data(), wv.data(), n * sizeof(float)) == 0);
      CHECK(std::memcmp(ip.data(), wp.data(), n * sizeof(float)) == 0);  // in place
    }
  }
}

TEST_CASE("attention's causal softmax and softmax backward rows: the same bits on every path, against double",
          "[vector_math]") {
  for (const std::int64_t n : {1, 5, 16, 37}) {
    std::vector<float> s0(static_cast<std::size_t>(n * n)), g(s0.size());
    for (std::size_t i = 0; i < s0.size(); ++i) {
      s0[i] = static_cast<float>(std::sin(i * 0.61) * 4);
      g[i] = static_cast<float>(std::cos(i * 0.23));
    }
    std::vector<std::vector<float>> outs;
    for (vector_isa isa : paths()) {
      isa_limit limit(isa);
      std::vector<float> p = s0, dp = g;
      vm::causal_softmax_rows(p.data(), n, n);
      vm::softmax_backward_rows(p.data(), dp.data(), n, n, n, 0.5f);
      for (std::int64_t r = 0; r < n; ++r) {
        double m = -INFINITY, sum = 0, dot = 0;
        for (std::int64_t j = 0; j <= r; ++j) m = std::max(m, static_cast<double>(s0[r * n + j]));
        for (std::int64_t j = 0; j <= r; ++j) sum += std::exp(s0[r * n + j] - m);
        for (std::int64_t j = 0; j < n; ++j) {
          const double want = j <= r ? std::exp(s0[r * n + j] - m) / sum : 0.0;
          CHECK(std::fabs(p[r * n + j] - want) <= 1e-6 * (1 + want));
          dot += (j <= r ? want : 0.0) * g[r * n + j];
        }
        for (std::int64_t j = 0; j < n; ++j) {
          const double pj = j <= r ? std::exp(s0[r * n + j] - m) / sum : 0.0;
          CHECK(std::fabs(dp[r * n + j] - 0.5 * pj * (g[r * n + j] - dot)) <= 1e-6);
        }
      }
      outs.push_back(p), outs.push_back(dp);
    }
    for (std::size_t k = 2; k < outs.size(); ++k)
      CHECK(std::memcmp(outs[k].data(), outs[k % 2].data(), outs[0].size() * sizeof(float)) == 0);
  }
}
