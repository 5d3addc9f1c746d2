// tests/random/avx2.cpp — the host's AVX2 draw path (host/random_avx2.hpp) gives the scalar
// functions' bits (random/draw.hpp, which the device runs too):
//   - Box-Muller's log over every 24-bit input, and its cos and sin over every 24-bit angle;
//   - whole draws of f32, bf16 and f16, uniform and normal, against draw_at element by
//     element: the fast path, bf16's exact one, the general one (NaN, values that round to
//     `to`, an inexact scaled span), streaming stores, a counter whose low word wraps, runs
//     that start and end off a block edge;
//   - the fast bf16 rounding over every low half of 17 kinds of high half.
// On a CPU without AVX2 and F16C the cases say so and check nothing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "spmd/host/random.hpp"
#include "spmd/host/random_avx2.hpp"
#include "spmd/random/draw.hpp"

namespace {

using spmd::bfloat16;
using spmd::float16;
using spmd::index_t;
using spmd::random::distribution;
using spmd::random::draw;

bool skip_without_avx2() {
  if (spmd::host::avx2::available()) return false;
  WARN("this CPU has no AVX2 and F16C: the AVX2 draw path is not checked here");
  return true;
}

#if SPMD_HOST_AVX2
/// Box-Muller of eight lanes at a time through the vector functions.
[[gnu::target("avx2,f16c")]] void box_muller_avx2(const std::uint32_t* a, const std::uint32_t* b, float* c,
                                                  float* s, std::size_t n) {
  namespace d = spmd::host::avx2::detail;
  for (std::size_t i = 0; i < n; i += 8) {
    __m256 vc, vs;
    d::box_muller(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i)),
                  _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i)), vc, vs);
    _mm256_storeu_ps(c + i, vc);
    _mm256_storeu_ps(s + i, vs);
  }
}

/// bf16 rounding of the fast path (two registers joined, rounded in 16-bit lanes) against
/// bfloat16::round_bits: mismatching values among x (a multiple of 16 values, no NaN).
[[gnu::target("avx2,f16c")]] std::size_t join_bf16_mismatches(const std::vector<float>& x) {
  namespace d = spmd::host::avx2::detail;
  const d::params p{};
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); i += 16) {
    alignas(32) std::uint32_t joined[8];
    const __m256i j = d::join_bf16<distribution::normal, d::path::fast>(p, _mm256_loadu_ps(x.data() + i),
                                                                 _mm256_loadu_ps(x.data() + i + 8));
    _mm256_store_si256(reinterpret_cast<__m256i*>(joined), j);
    for (int l = 0; l < 8; ++l)
      for (int h = 0; h < 2; ++h) {
        const std::uint16_t got = static_cast<std::uint16_t>(joined[l] >> (16 * h));
        const float v = x[i + static_cast<std::size_t>(8 * h + l)];
        if (got != bfloat16::round_bits(v) && bad++ == 0)
          UNSCOPED_INFO("first mismatch: " << v << " gives " << got << ", round_bits " << bfloat16::round_bits(v));
      }
  }
  return bad;
}

/// Whether fill_blocks takes bf16's exact uniform path for [from, to).
[[gnu::target("avx2,f16c")]] bool exact_bf16(float from, float to) {
  namespace d = spmd::host::avx2::detail;
  d::params p{};
  p.a = d::splat(from);
  p.b = d::splat((to - from) * (1.0f / 256));
  return d::uniform_exact_bf16(p);
}

/// Lanes whose bits differ from the scalar box_muller, with one of them reported.
std::size_t box_muller_mismatches(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  std::vector<float> c(a.size()), s(a.size());
  box_muller_avx2(a.data(), b.data(), c.data(), s.data(), a.size());
  std::size_t bad = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto z = spmd::random::detail::box_muller<float>(a[i], b[i]);
    if (std::memcmp(&z.c, &c[i], 4) != 0 || std::memcmp(&z.s, &s[i], 4) != 0) {
      if (bad++ == 0) UNSCOPED_INFO("first mismatch: a " << a[i] << " b " << b[i] << ": scalar (" << z.c << ", "
                                                         << z.s << ") vector (" << c[i] << ", " << s[i] << ")");
    }
  }
  return bad;
}
#endif

/// Elements whose bits differ between fill_run (the AVX2 path for long runs) and draw_at.
template <class T>
index_t draw_mismatches(const draw& d, std::uint64_t g, index_t n, std::size_t misalign = 0) {
  std::vector<T> buf(static_cast<std::size_t>(n) + 16);
  T* out = buf.data() + misalign;
  spmd::host::fill_run<T>(d, g, n, out);
  index_t bad = 0;
  for (index_t k = 0; k < n; ++k) {
    const T want = spmd::random::draw_at<T>(d, g + static_cast<std::uint64_t>(k));
    if (std::memcmp(&want, out + k, sizeof(T)) != 0) {
      if (bad++ == 0) UNSCOPED_INFO("first mismatch at element " << g + static_cast<std::uint64_t>(k));
    }
  }
  return bad;
}

draw make(distribution dist, double a, double b, std::uint64_t offset = 0) {
  draw d;
  d.dist = dist;
  d.seed = 0x9e3779b97f4a7c15ull;
  d.offset = offset;
  d.a = a;
  d.b = b;
  return d;
}

template <class T>
void check_draws(const char* type) {
  struct range {
    double a, b;
    const char* what;
  };
  const range uniforms[] = {
      {0, 1, "[0, 1): fast path"},
      {-1, 1, "[-1, 1): fast path (bf16: exact, no rounding)"},
      {-2, 3, "[-2, 3): fast path (bf16: rounded)"},
      {1 - 1.0 / 4096, 1, "[1 - 2^-12, 1): values round to `to`"},
      {-3e38, 3e38, "[-3e38, 3e38): to - from overflows, NaN at x = 0"},
      {0, 1e-40, "[0, 1e-40): the scaled span is subnormal"},
      {-1, -0.0, "[-1, -0): to is -0"},
      {5, 5, "[5, 5]: to - from is 0"},
  };
  for (const range& r : uniforms) {
    INFO(type << " uniform " << r.what);
    CHECK(draw_mismatches<T>(make(distribution::uniform, r.a, r.b, 4 * 12345), 3, 40'001) == 0);
  }
  const range normals[] = {
      {0, 1, "N(0, 1)"},
      {0.5, 2, "N(0.5, 2)"},
      {0, 1e300, "std infinite as a float: 0 * inf is NaN"},
      {-1e-3, 1e-30, "tiny std"},
  };
  for (const range& r : normals) {
    INFO(type << " normal " << r.what);
    CHECK(draw_mismatches<T>(make(distribution::normal, r.a, r.b, 4 * 777), 1, 40'003) == 0);
  }
  for (const std::uint64_t before : {40, 36, 33}) {  // 36, 33: the wrap falls inside a register
    INFO(type << ": blocks 2^32 - " << before << " .. 2^32 + " << 100 - before
              << ", the counter's low word wraps");
    const std::uint64_t offset = 4 * ((std::uint64_t{1} << 32) - before);
    CHECK(draw_mismatches<T>(make(distribution::uniform, 0, 1, offset), 0, 400) == 0);
    CHECK(draw_mismatches<T>(make(distribution::normal, 0, 1, offset), 0, 400) == 0);
  }
  {
    INFO(type << ": 2^19 elements, aligned (streaming stores) and not");
    const index_t n = index_t{1} << 19;
    CHECK(draw_mismatches<T>(make(distribution::uniform, -1, 1), 0, n) == 0);
    CHECK(draw_mismatches<T>(make(distribution::normal, 0, 1), 0, n) == 0);
    CHECK(draw_mismatches<T>(make(distribution::uniform, -1, 1), 0, n, 1) == 0);
  }
}

}  // namespace

TEST_CASE("AVX2 Box-Muller: log over every 24-bit input, cos and sin over every angle", "[avx2]") {
  if (skip_without_avx2()) return;
#if SPMD_HOST_AVX2
  constexpr std::uint32_t all = std::uint32_t{1} << 24;
  std::vector<std::uint32_t> every(all), fixed(all);
  for (std::uint32_t i = 0; i < all; ++i) every[i] = i;
  for (const std::uint32_t other : {0u, 0x5a5a5au, all - 1}) {
    INFO("the other input " << other);
    std::fill(fixed.begin(), fixed.end(), other);
    CHECK(box_muller_mismatches(every, fixed) == 0);  // every radius
    CHECK(box_muller_mismatches(fixed, every) == 0);  // every angle
  }
#endif
}

TEST_CASE("AVX2 bf16 rounding: every low half under high halves of each kind", "[avx2]") {
  if (skip_without_avx2()) return;
#if SPMD_HOST_AVX2
  // high halves: zeros, subnormals, odd and even mantissas, the largest finite values (which
  // round to infinity), infinities, both signs
  const std::uint32_t highs[] = {0x0000, 0x0001, 0x0002, 0x007f, 0x0080, 0x3f80, 0x3f81, 0x4049, 0x7f7e,
                                 0x7f7f, 0x7f80, 0x8000, 0x8001, 0xbf80, 0xbf81, 0xff7f, 0xff80};
  std::vector<float> x;
  for (const std::uint32_t h : highs)
    for (std::uint32_t l = 0; l < 0x10000; ++l)
      if (const float v = spmd::detail::bf16_bit_cast<float>((h << 16) | l); !std::isnan(v)) x.push_back(v);
  x.resize((x.size() + 15) / 16 * 16, 0.0f);  // (NaNs left out: the fast path never sees one)
  CHECK(join_bf16_mismatches(x) == 0);
#endif
}

TEST_CASE("AVX2 draws equal draw_at bit for bit: f32", "[avx2]") {
  if (skip_without_avx2()) return;
  check_draws<float>("f32");
}
TEST_CASE("AVX2 draws equal draw_at bit for bit: bf16", "[avx2]") {
  if (skip_without_avx2()) return;
  check_draws<bfloat16>("bf16");
}
TEST_CASE("AVX2 draws equal draw_at bit for bit: f16", "[avx2]") {
  if (skip_without_avx2()) return;
  check_draws<float16>("f16");
}

TEST_CASE("the fast uniform path is taken only where it is exact", "[avx2]") {
#if SPMD_HOST_AVX2
  using spmd::host::avx2::detail::uniform_fast;
  CHECK(uniform_fast<float>(0.f, 1.f, 1.f));
  CHECK(uniform_fast<bfloat16>(-2.f, 3.f, 5.f));
  CHECK_FALSE(uniform_fast<float>(1.f - 0x1p-24f, 1.f, 0x1p-24f));  // 2^-24 2^-24 is exact, but
  // the top value 1 - 2^-24 + (1 - 2^-24) 2^-24 rounds to 1 = to
  CHECK_FALSE(uniform_fast<bfloat16>(1.f - 0x1p-12f, 1.f, 0x1p-12f));  // rounds to `to` in bf16
  CHECK_FALSE(uniform_fast<float>(0.f, 1e-40f, 1e-40f));                // span 2^-24 underflows
  CHECK_FALSE(uniform_fast<float>(-3e38f, 3e38f, std::numeric_limits<float>::infinity()));
  if (spmd::host::avx2::available()) {  // bf16's exact path: every k (to - from) 2^-8 + from a bf16
    CHECK(exact_bf16(0.f, 1.f));    // k 2^-8
    CHECK(exact_bf16(-1.f, 1.f));   // k 2^-7 - 1
    CHECK(exact_bf16(0.f, 256.f));  // k
    CHECK_FALSE(exact_bf16(-0.1f, 0.1f));
    CHECK_FALSE(exact_bf16(-2.f, 3.f));   // 5k 2^-8 - 2 needs up to 11 bits
    CHECK_FALSE(exact_bf16(0.f, 0.75f));  // 3k 2^-10: 9 bits at k = 171
  }
#else
  SUCCEED("no AVX2 path on this target");
#endif
}
