// tests/sim/bfloat16.cpp — spmd::bfloat16: exact rounding, arithmetic through float, limits.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

#include <catch2/catch.hpp>

#include <spmd/core/bfloat16.hpp>

using spmd::bfloat16;

namespace {

float from_bits32(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// Round to nearest even by exhaustive comparison with the two neighbours (in double).
std::uint16_t reference_round(double x) {
  if (std::isnan(x)) return 0;  // not used for NaN
  // Candidates: every bfloat16 with the right sign near x, by bracketing through float.
  const float f = static_cast<float>(x);  // may round, fine: neighbours are checked below
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  const std::uint16_t lo = static_cast<std::uint16_t>(u >> 16);
  std::uint16_t best = lo;
  double best_err = -1;
  for (int k = -2; k <= 2; ++k) {
    const std::uint16_t c = static_cast<std::uint16_t>(lo + k);
    if ((c & 0x7f80) == 0x7f80 && (c & 0x7f) != 0) continue;  // NaN
    if (((c ^ lo) & 0x8000) != 0) continue;                     // crossed the sign
    const double v = static_cast<double>(from_bits32(static_cast<std::uint32_t>(c) << 16));
    double err = std::fabs(v - x);
    if (std::isinf(v)) {
      // Overflow: x rounds to infinity when it is at or past max + half an ulp.
      const double lim = std::ldexp(2.0 - std::ldexp(1.0, -8), 127);  // max + half an ulp
      err = std::fabs(x) >= lim ? 0 : std::numeric_limits<double>::infinity();
    }
    if (best_err < 0 || err < best_err || (err == best_err && (c & 1) == 0)) {
      best = c;
      best_err = err;
    }
  }
  return best;
}

}  // namespace

TEST_CASE("bfloat16 rounds every float to nearest even", "[bf16]") {
  // Every upper half, with low halves around the rounding boundaries.
  const std::uint32_t lows[] = {0x0000, 0x0001, 0x3fff, 0x7fff, 0x8000, 0x8001, 0xbfff, 0xffff};
  int bad = 0;
  for (std::uint32_t hi = 0; hi < 0x10000; ++hi)
    for (std::uint32_t lo : lows) {
      const std::uint32_t u = (hi << 16) | lo;
      const float f = from_bits32(u);
      const bfloat16 h{f};
      if (std::isnan(f)) {
        bad += !std::isnan(static_cast<float>(h));
        continue;
      }
      bad += h.bits != reference_round(static_cast<double>(f));
    }
  CHECK(bad == 0);
  // Ties go to even.
  CHECK(bfloat16{from_bits32(0x3f808000)}.bits == 0x3f80);  // 1 + 2^-8: tie, even is 1
  CHECK(bfloat16{from_bits32(0x3f818000)}.bits == 0x3f82);  // tie, even is up
  CHECK(bfloat16{from_bits32(0x3f808001)}.bits == 0x3f81);
}

TEST_CASE("bfloat16 from double rounds once", "[bf16]") {
  std::mt19937_64 rng(3);
  int bad = 0;
  for (int i = 0; i < 200000; ++i) {
    std::uint64_t u = rng();
    double d;
    std::memcpy(&d, &u, 8);
    if (!std::isfinite(d) || std::fabs(d) > 1e38 || std::fabs(d) < 1e-36) continue;
    bad += bfloat16{d}.bits != reference_round(d);
  }
  CHECK(bad == 0);
  // A value just above a tie in double, which through float would round to the tie and
  // then to even (double rounding): 1 + 2^-8 + 2^-30.
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30);
  CHECK(bfloat16{x}.bits == 0x3f81);
  CHECK(bfloat16{static_cast<float>(x)}.bits == 0x3f80);
}

TEST_CASE("bfloat16 converts exactly to float and back", "[bf16]") {
  int bad = 0;
  for (std::uint32_t b = 0; b < 0x10000; ++b) {
    const bfloat16 h = bfloat16::from_bits(static_cast<std::uint16_t>(b));
    const float f = h;
    if (std::isnan(f)) continue;
    bad += bfloat16{f}.bits != h.bits;
  }
  CHECK(bad == 0);
  CHECK(bfloat16{std::numeric_limits<float>::quiet_NaN()} != bfloat16{0.f});
  CHECK(std::isnan(static_cast<float>(bfloat16{std::numeric_limits<float>::quiet_NaN()})));
}

TEST_CASE("bfloat16 arithmetic goes through float and rounds once", "[bf16]") {
  constexpr bfloat16 a{1.5f}, b{0.0078125f};  // 2^-7
  static_assert(static_cast<float>(a + b) == 1.5078125f);
  static_assert(static_cast<float>(a * a) == 2.25f);
  static_assert(static_cast<float>(-a) == -1.5f);
  static_assert(bfloat16{1.0f} + bfloat16{0.001953125f} == bfloat16{1.0f});  // 1 + 2^-9 rounds to 1
  static_assert(bfloat16{3} == bfloat16{3.0f});
  bfloat16 c{2.0f};
  c += bfloat16{1.0f};
  c *= bfloat16{2.0f};
  CHECK(static_cast<float>(c) == 6.0f);
  CHECK(bfloat16{-0.0f} == bfloat16{0.0f});
  CHECK(bfloat16{1.0f} < bfloat16{2.0f});
}

TEST_CASE("numeric_limits<bfloat16>", "[bf16]") {
  using L = std::numeric_limits<bfloat16>;
  static_assert(L::is_specialized && L::has_infinity && L::digits == 8);
  CHECK(static_cast<float>(L::max()) == 3.3895313892515355e38f);
  CHECK(static_cast<float>(L::lowest()) == -3.3895313892515355e38f);
  CHECK(static_cast<float>(L::min()) == std::ldexp(1.0f, -126));
  CHECK(static_cast<float>(L::epsilon()) == std::ldexp(1.0f, -7));
  CHECK(static_cast<float>(L::infinity()) == std::numeric_limits<float>::infinity());
  CHECK(static_cast<float>(L::denorm_min()) == std::ldexp(1.0f, -133));
  CHECK(std::isnan(static_cast<float>(L::quiet_NaN())));
  // Overflow rounds to infinity.
  CHECK(bfloat16{3.4e38f}.bits == L::infinity().bits);
}
