// tests/sim/float16.cpp — spmd::float16 (IEEE binary16) against an independent reference:
// every float16's value from the format's definition, and rounding from float and double by
// searching the sorted list of all float16 values (nearest, ties to the even bit pattern).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <spmd/core/float16.hpp>

using spmd::float16;

namespace {

/// The value of bit pattern h by the definition of binary16 (NaN: quiet NaN).
double definition(std::uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0x1f) v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  else if (e == 0) v = std::ldexp(static_cast<double>(m), -24);
  else v = std::ldexp(1.0 + m / 1024.0, e - 15);
  return s ? -v : v;
}

/// The positive finite values in bit order (0x0000 .. 0x7bff), plus 65536 standing for
/// infinity (the next step after 65504, so that ties at 65520 round as IEEE says).
const std::vector<double>& positives() {
  static const std::vector<double> v = [] {
    std::vector<double> out;
    for (std::uint32_t h = 0; h <= 0x7bff; ++h) out.push_back(definition(static_cast<std::uint16_t>(h)));
    out.push_back(65536.0);
    return out;
  }();
  return v;
}

/// Nearest float16 to x (finite or infinite, not NaN), ties to the even bit pattern.
std::uint16_t reference_round(double x) {
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  const std::vector<double>& v = positives();
  std::uint16_t r;
  if (a >= v.back()) {
    r = 0x7c00;
  } else {
    const auto hi = static_cast<std::size_t>(std::upper_bound(v.begin(), v.end(), a) - v.begin());
    const std::size_t lo = hi - 1;  // v[lo] <= a < v[hi]
    const double dl = a - v[lo], dh = v[hi] - a;
    const std::size_t pick = dl < dh ? lo : dh < dl ? hi : (lo % 2 == 0 ? lo : hi);
    r = static_cast<std::uint16_t>(pick);  // index == bit pattern; index 0x7c00 == infinity
  }
  return static_cast<std::uint16_t>(sign | r);
}

float from_bits32(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace

TEST_CASE("every float16 converts to the float of its definition", "[f16]") {
  for (std::uint32_t h = 0; h <= 0xffff; ++h) {
    const float f = float16::from_bits(static_cast<std::uint16_t>(h));
    const double want = definition(static_cast<std::uint16_t>(h));
    if (std::isnan(want)) {
      CHECK(std::isnan(f));
    } else {
      INFO("bits " << h);
      CHECK(static_cast<double>(f) == want);
      CHECK(std::signbit(f) == std::signbit(want));
      CHECK(float16{f}.bits == h);  // and back, exactly
    }
  }
}

TEST_CASE("float16 rounds floats to nearest even", "[f16]") {
  long n = 0;
  auto check_one = [&](float x) {
    if (std::isnan(x)) return;
    ++n;
    const std::uint16_t got = float16{x}.bits, want = reference_round(static_cast<double>(x));
    if (got != want) FAIL_CHECK("x = " << x << ": got " << got << ", want " << want);
  };
  // Every float in the range where float16 is not saturated or zero, at a stride, both signs.
  for (std::uint32_t u = 0x32000000u; u <= 0x47800000u; u += 97) {
    check_one(from_bits32(u));
    check_one(from_bits32(u | 0x80000000u));
  }
  // The exact ties and their neighbours: halfway between consecutive float16 values.
  const std::vector<double>& v = positives();
  for (std::size_t i = 0; i + 1 < v.size(); ++i) {
    const float mid = static_cast<float>((v[i] + v[i + 1]) / 2);  // exact in float
    check_one(mid);
    check_one(std::nextafter(mid, 0.f));
    check_one(std::nextafter(mid, 1e9f));
    check_one(-mid);
  }
  for (float x : {0.f, -0.f, 65504.f, 65519.99f, 65520.f, 1e30f, std::numeric_limits<float>::infinity(),
                  std::numeric_limits<float>::denorm_min(), 2.9802322e-8f /* 2^-25 */, 2.9802326e-8f})
    check_one(x), check_one(-x);
  CHECK(n > 1000000);
}

TEST_CASE("float16 rounds doubles once (no double rounding through float)", "[f16]") {
  // Just above and below each tie by less than float can see: through float these would
  // land on the tie and round to even; correctly rounded, they go to their side.
  const std::vector<double>& v = positives();
  std::mt19937_64 rng(7);
  for (std::size_t i = 0; i + 1 < v.size(); i += 1 + rng() % 13) {
    const double mid = (v[i] + v[i + 1]) / 2, eps = mid * 0x1p-40;
    for (double x : {mid + eps, mid - eps, -(mid + eps)}) {
      INFO("x = " << x);
      CHECK(float16{x}.bits == reference_round(x));
    }
  }
}

TEST_CASE("float16 keeps NaN, sign and limits", "[f16]") {
  const float16 nan{std::numeric_limits<float>::quiet_NaN()};
  CHECK(std::isnan(static_cast<float>(nan)));
  CHECK(std::isnan(static_cast<float>(float16{-std::numeric_limits<float>::quiet_NaN()})));
  CHECK((float16{-std::numeric_limits<float>::quiet_NaN()}.bits & 0x8000) != 0);
  using L = std::numeric_limits<float16>;
  CHECK(static_cast<float>(L::max()) == 65504.f);
  CHECK(static_cast<float>(L::lowest()) == -65504.f);
  CHECK(static_cast<float>(L::min()) == std::ldexp(1.f, -14));
  CHECK(static_cast<float>(L::denorm_min()) == std::ldexp(1.f, -24));
  CHECK(static_cast<float>(L::epsilon()) == std::ldexp(1.f, -10));
  CHECK(std::isinf(static_cast<float>(L::infinity())));
  CHECK(std::isnan(static_cast<float>(L::quiet_NaN())));
  CHECK((float16{1.f} + float16{2.f}).bits == float16{3.f}.bits);
  CHECK((-float16{0.f}).bits == 0x8000);
  static_assert(float16{1.0f}.bits == 0x3c00);
  static_assert(float16{65520.0}.bits == 0x7c00);
  static_assert(float16{-2}.bits == 0xc000);
}
