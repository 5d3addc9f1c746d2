// tests/random/vector_paths.cpp — the host's vector draw paths, AVX-512
// (host/random_avx512.hpp) and AVX2 (host/random_avx2.hpp), give the scalar functions' bits
// (random/draw.hpp, which the device runs too):
//   - Box-Muller's log over every 24-bit input, and its cos and sin over every 24-bit angle,
//     at each width;
//   - whole draws of f32, bf16 and f16, uniform and normal, against draw_at element by
//     element, through fill_run with each path in turn (limit_draw_isa): the fast path, bf16's
//     exact one, the general one (NaN, values that round to `to`, an inexact scaled span),
//     streaming stores, a counter whose low word wraps, runs that start and end off a block
//     edge;
//   - the AVX2 path's fast bf16 rounding over every low half of 17 kinds of high half.
// Built twice (tests/random/meson.build): as every test is, and with -march=native, where the
// compiler may fuse a product and a sum into an FMA unless the code prevents it.
// A path this CPU lacks is skipped with a message.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "spmd/host/random.hpp"
#include "spmd/host/random_avx2.hpp"
#include "spmd/host/random_avx512.hpp"
#include "spmd/host/random_isa.hpp"
#include "spmd/random/draw.hpp"

namespace {

using spmd::bfloat16;
using spmd::float16;
using spmd::index_t;
using spmd::random::distribution;
using spmd::random::draw;

using spmd::host::random_isa;

bool skip_without_avx2() {
  if (spmd::host::avx2::available()) return false;
  WARN("this CPU has no AVX2 and F16C: the AVX2 draw path is not checked here");
  return true;
}
bool skip_without_avx512() {
  if (spmd::host::avx512::available()) return false;
  WARN("this CPU has no AVX-512 (F, BW, DQ, VL): the AVX-512 draw path is not checked here");
  return true;
}

/// Draws take at most `isa` while it lives.
struct isa_limit {
  explicit isa_limit(random_isa isa) { spmd::host::limit_draw_isa(isa); }
  ~isa_limit() { spmd::host::limit_draw_isa(random_isa::avx512); }
  isa_limit(const isa_limit&) = delete;
  isa_limit& operator=(const isa_limit&) = delete;
};

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

/// bf16 rounding of the AVX2 fast path (two registers joined, rounded in 16-bit lanes): the
/// patterns of x (a multiple of 16 values, no NaN), in x's order.
[[gnu::target("avx2,f16c")]] std::vector<std::uint16_t> round_bf16_avx2(const std::vector<float>& x) {
  namespace d = spmd::host::avx2::detail;
  const d::params p{};
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); i += 16) {
    alignas(32) std::uint32_t joined[8];
    const __m256i j = d::join_bf16<distribution::normal, d::path::fast>(p, _mm256_loadu_ps(x.data() + i),
                                                                 _mm256_loadu_ps(x.data() + i + 8));
    _mm256_store_si256(reinterpret_cast<__m256i*>(joined), j);
    for (int l = 0; l < 8; ++l)  // lane l: value l in its low half, value 8 + l in its high half
      for (int h = 0; h < 2; ++h)
        out[i + static_cast<std::size_t>(8 * h + l)] = static_cast<std::uint16_t>(joined[l] >> (16 * h));
  }
  return out;
}

/// Whether fill_blocks takes bf16's exact uniform path for [from, to).
[[gnu::target("avx2,f16c")]] bool exact_bf16(float from, float to) {
  namespace d = spmd::host::avx2::detail;
  d::params p{};
  p.a = d::splat(from);
  p.b = d::splat((to - from) * (1.0f / 256));
  return d::uniform_exact_bf16(p);
}

/// Box-Muller of sixteen lanes at a time through the AVX-512 functions.
[[gnu::target(SPMD_AVX512_TARGET)]] void box_muller_avx512(const std::uint32_t* a, const std::uint32_t* b,
                                                           float* c, float* s, std::size_t n) {
  namespace d = spmd::host::avx512::detail;
  for (std::size_t i = 0; i < n; i += 16) {
    d::u32v va, vb;
    std::memcpy(&va, a + i, sizeof va);
    std::memcpy(&vb, b + i, sizeof vb);
    d::f32v vc, vs;
    d::box_muller(va, vb, vc, vs);
    std::memcpy(c + i, &vc, sizeof vc);
    std::memcpy(s + i, &vs, sizeof vs);
  }
}

/// Lanes whose bits differ from the scalar box_muller, with one of them reported.
std::size_t box_muller_mismatches(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b,
                                  random_isa isa) {
  std::vector<float> c(a.size()), s(a.size());
  if (isa == random_isa::avx512) box_muller_avx512(a.data(), b.data(), c.data(), s.data(), a.size());
  else box_muller_avx2(a.data(), b.data(), c.data(), s.data(), a.size());
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

/// The vector paths this CPU has, each with a message for one it lacks.
std::vector<random_isa> vector_paths() {
  std::vector<random_isa> have;
  if (!skip_without_avx512()) have.push_back(random_isa::avx512);
  if (!skip_without_avx2()) have.push_back(random_isa::avx2);
  return have;
}

#if SPMD_HOST_AVX2
/// The AVX-512 path's bf16 rounding (round_bf16, then two registers' high halves joined): the
/// patterns of x (a multiple of 32 values, no NaN), in x's order.
[[gnu::target(SPMD_AVX512_TARGET)]] std::vector<std::uint16_t> round_bf16_avx512(const std::vector<float>& x) {
  namespace d = spmd::host::avx512::detail;
  std::vector<std::uint16_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); i += 32) {
    d::f32v a, b;
    std::memcpy(&a, x.data() + i, sizeof a);
    std::memcpy(&b, x.data() + i + 16, sizeof b);
    const d::u32v joined = d::join_high(d::round_bf16(a), d::round_bf16(b));
    for (int l = 0; l < 16; ++l)  // lane l: value l in its low half, value 16 + l in its high half
      for (int h = 0; h < 2; ++h)
        out[i + static_cast<std::size_t>(16 * h + l)] = static_cast<std::uint16_t>(joined[l] >> (16 * h));
  }
  return out;
}

/// Values of x whose pattern in `got` is not bfloat16::round_bits', with the first reported.
std::size_t bf16_mismatches(const std::vector<float>& x, const std::vector<std::uint16_t>& got) {
  std::size_t bad = 0;
  for (std::size_t i = 0; i < x.size(); ++i)
    if (got[i] != bfloat16::round_bits(x[i]) && bad++ == 0)
      UNSCOPED_INFO("first mismatch: " << x[i] << " gives " << got[i] << ", round_bits " << bfloat16::round_bits(x[i]));
  return bad;
}
#endif

}  // namespace

TEST_CASE("vector Box-Muller: log over every 24-bit input, cos and sin over every angle", "[vector]") {
#if SPMD_HOST_AVX2
  constexpr std::uint32_t all = std::uint32_t{1} << 24;
  std::vector<std::uint32_t> every(all), fixed(all);
  for (std::uint32_t i = 0; i < all; ++i) every[i] = i;
  for (const random_isa isa : vector_paths()) {
    for (const std::uint32_t other : {0u, 0x5a5a5au, all - 1}) {
      INFO(to_string(isa) << ", the other input " << other);
      std::fill(fixed.begin(), fixed.end(), other);
      CHECK(box_muller_mismatches(every, fixed, isa) == 0);  // every radius
      CHECK(box_muller_mismatches(fixed, every, isa) == 0);  // every angle
    }
  }
#else
  SUCCEED("no vector path on this target");
#endif
}

TEST_CASE("vector bf16 rounding: every low half under high halves of each kind", "[vector]") {
#if SPMD_HOST_AVX2
  // high halves: zeros, subnormals, odd and even mantissas, the largest finite values (which
  // round to infinity), infinities, both signs
  const std::uint32_t highs[] = {0x0000, 0x0001, 0x0002, 0x007f, 0x0080, 0x3f80, 0x3f81, 0x4049, 0x7f7e,
                                 0x7f7f, 0x7f80, 0x8000, 0x8001, 0xbf80, 0xbf81, 0xff7f, 0xff80};
  std::vector<float> x;
  for (const std::uint32_t h : highs)
    for (std::uint32_t l = 0; l < 0x10000; ++l)
      if (const float v = spmd::detail::bf16_bit_cast<float>((h << 16) | l); !std::isnan(v)) x.push_back(v);
  x.resize((x.size() + 31) / 32 * 32, 0.0f);  // (NaNs left out: the fast paths never see one)
  for (const random_isa isa : vector_paths()) {
    INFO(to_string(isa));
    CHECK(bf16_mismatches(x, isa == random_isa::avx512 ? round_bf16_avx512(x) : round_bf16_avx2(x)) == 0);
  }
#else
  SUCCEED("no vector path on this target");
#endif
}

TEST_CASE("limit_draw_isa: draws take the path asked for, or the best below it", "[vector]") {
  const random_isa best = spmd::host::best_draw_isa();
  CHECK(spmd::host::draw_isa() == best);
  {
    const isa_limit at_most(random_isa::avx2);
    CHECK(spmd::host::draw_isa() == (best == random_isa::scalar ? random_isa::scalar : random_isa::avx2));
  }
  {
    const isa_limit at_most(random_isa::scalar);
    CHECK(spmd::host::draw_isa() == random_isa::scalar);
  }
  CHECK(spmd::host::draw_isa() == best);
}

/// check_draws<T> on each path: AVX-512, AVX2 and the scalar lock step.
template <class T>
void check_every_path(const char* type) {
  std::vector<random_isa> paths = vector_paths();
  paths.push_back(random_isa::scalar);
  for (const random_isa isa : paths) {
    INFO("the " << to_string(isa) << " path");
    const isa_limit at_most(isa);
    check_draws<T>(type);
  }
}

TEST_CASE("vector draws equal draw_at bit for bit: f32", "[vector]") { check_every_path<float>("f32"); }
TEST_CASE("vector draws equal draw_at bit for bit: bf16", "[vector]") { check_every_path<bfloat16>("bf16"); }
TEST_CASE("vector draws equal draw_at bit for bit: f16", "[vector]") { check_every_path<float16>("f16"); }

TEST_CASE("the fast uniform path is taken only where it is exact", "[vector]") {
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
  if (spmd::host::avx512::available()) {  // the AVX-512 path's own check of the same
    using spmd::host::avx512::detail::uniform_exact_bf16;
    const auto exact = [](float from, float to) { return uniform_exact_bf16({from, (to - from) / 256, false}); };
    CHECK(exact(0.f, 1.f));
    CHECK(exact(-1.f, 1.f));
    CHECK(exact(0.f, 256.f));
    CHECK_FALSE(exact(-0.1f, 0.1f));
    CHECK_FALSE(exact(-2.f, 3.f));
    CHECK_FALSE(exact(0.f, 0.75f));
  }
#else
  SUCCEED("no AVX2 path on this target");
#endif
}
