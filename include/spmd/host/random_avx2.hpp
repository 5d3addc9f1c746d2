// spmd/host/random_avx2.hpp — uniform and normal draws eight Philox blocks at a time in AVX2
// registers, the same bits as random/draw.hpp's scalar functions (and so as the device).
//
//   if (spmd::host::avx2::available())
//     spmd::host::avx2::fill_blocks<float, distribution::normal>(d, b0, blocks, out);
//
// fill_blocks writes the 4 * blocks elements of the Philox blocks b0 .. b0 + blocks - 1
// (blocks a multiple of 8) of an f32, bf16 or f16 draw: lane i of a register holds one
// block, so the ten rounds, the uniform's scaling and Box-Muller's log, sin, cos and sqrt run
// on eight blocks in lock step, and a 4 x 8 transpose puts the values in element order.
//
// Why it matches the scalar path bit for bit: every floating-point step is the same IEEE
// operation (add, sub, mul, div, sqrt: each correctly rounded, vector or not) on the same
// operands in the same order, with the same constants (random::detail::fp<float>'s named
// coefficients); selects replace the scalar code's ?:, and the bit manipulations are integer
// operations. No product is fused with an add into an FMA (which GCC does wherever the
// target has FMA, e.g. under -march=native): each goes through an empty asm (mul).
// tests/random/vector_paths.cpp compares log, cos and sin over every 24-bit input and whole
// draws.
//
// Chosen at run time (`available()`: the CPU has AVX2 and F16C), so a default x86-64 build
// uses it on the machines that have it; elsewhere, and for f64 and bernoulli, the scalar
// batch path of host/random.hpp runs.
#pragma once

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define SPMD_HOST_AVX2 1
#else
#define SPMD_HOST_AVX2 0
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/float16.hpp"
#include "spmd/core/config.hpp"
#include "spmd/random/draw.hpp"

#if SPMD_HOST_AVX2
#include <cpuid.h>

#include "spmd/host/x86_avx2_intrinsics.hpp"  // not <immintrin.h>: 0.55 s less per unit
#endif

namespace spmd::host::avx2 {

#if SPMD_HOST_AVX2

/// Whether this CPU runs the AVX2 path (checked once).
inline bool available() {
  static const bool yes = [] {
    __builtin_cpu_init();
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;  // F16C: CPUID leaf 1, ECX bit 29 (clang's
    const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29)) != 0;  // builtin lacks it)
    return __builtin_cpu_supports("avx2") && f16c;  // (avx2 includes the OS's YMM state)
  }();
  return yes;
}

#define SPMD_AVX2_FN [[gnu::target("avx2,f16c"), gnu::always_inline]] inline

namespace detail {

using random::detail::fp;

SPMD_AVX2_FN __m256i splat(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }
SPMD_AVX2_FN __m256 splat(float v) { return _mm256_set1_ps(v); }

/// (hi, lo) of the 32x32-bit products a * m per lane: vpmuludq multiplies the even lanes, the
/// odd ones are shifted down for a second multiply.
SPMD_AVX2_FN void mul_hi_lo(__m256i a, __m256i m, __m256i& hi, __m256i& lo) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_mullo_epi32(a, m);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

/// The ten round keys of a seed, splatted (kept in memory: they are operands of the xors,
/// which leaves the registers to the counters).
struct round_keys {
  __m256i k[10][2];
  SPMD_AVX2_FN explicit round_keys(std::uint64_t seed) {
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      k[r][0] = splat(k0);
      k[r][1] = splat(k1);
      k0 += random::detail::philox_w0;
      k1 += random::detail::philox_w1;
    }
  }
};

/// Philox4x32-10 of G registers of counters (words 0 and 1; words 2 and 3 are 0, as in every
/// stream block) in lock step: G independent chains overlap. c[j][g] is word
/// j of register g; on return the output words.
template <int G>
SPMD_AVX2_FN void philox(__m256i (&c)[4][G], const round_keys& keys) {
  const __m256i m0 = splat(random::detail::philox_m0), m1 = splat(random::detail::philox_m1);
  // Round 0 with words 2 and 3 zero: m1 * 0 has no high or low part.
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    __m256i hi0, lo0;
    mul_hi_lo(c[0][g], m0, hi0, lo0);
    c[0][g] = _mm256_xor_si256(c[1][g], keys.k[0][0]);
    c[2][g] = _mm256_xor_si256(hi0, keys.k[0][1]);
    c[1][g] = _mm256_setzero_si256();
    c[3][g] = lo0;
  }
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      __m256i hi0, lo0, hi1, lo1;
      mul_hi_lo(c[0][g], m0, hi0, lo0);
      mul_hi_lo(c[2][g], m1, hi1, lo1);
      c[0][g] = _mm256_xor_si256(_mm256_xor_si256(hi1, c[1][g]), keys.k[r][0]);
      c[2][g] = _mm256_xor_si256(_mm256_xor_si256(hi0, c[3][g]), keys.k[r][1]);
      c[1][g] = lo1;
      c[3][g] = lo0;
    }
  }
}

/// Counters of blocks b0 .. b0 + 7 in the lane order the store wants: lane l holds block
/// b0 + Order[l]. (Lanes 0 .. 3 and 4 .. 7 are the two 128-bit halves, which most shuffles
/// keep apart.)
template <int... Order>
SPMD_AVX2_FN void counters(std::uint64_t b0, __m256i& lo, __m256i& hi) {
  const __m256i base = splat(static_cast<std::uint32_t>(b0));
  lo = _mm256_add_epi32(base, _mm256_setr_epi32(Order...));
  // A lane whose low word wrapped (lo < base, unsigned: compared with the sign bits flipped)
  // carries one into the high word: the mask is -1 there.
  const __m256i sign = splat(0x80000000u);
  const __m256i carry = _mm256_cmpgt_epi32(_mm256_xor_si256(base, sign), _mm256_xor_si256(lo, sign));
  hi = _mm256_sub_epi32(splat(static_cast<std::uint32_t>(b0 >> 32)), carry);
}

/// Values v[j] (word j of each lane's block) to element order, for lanes in the order
/// 0 2 4 6 1 3 5 7: out[0] is blocks 0 and 1 (lanes 0 and 4), out[1] blocks 2 and 3, ...,
/// all within 128-bit halves.
SPMD_AVX2_FN void transpose(const __m256 (&v)[4], __m256 (&out)[4]) {
  const __m256 t0 = _mm256_unpacklo_ps(v[0], v[1]), t1 = _mm256_unpackhi_ps(v[0], v[1]);
  const __m256 t2 = _mm256_unpacklo_ps(v[2], v[3]), t3 = _mm256_unpackhi_ps(v[2], v[3]);
  out[0] = _mm256_shuffle_ps(t0, t2, 0x44);
  out[1] = _mm256_shuffle_ps(t0, t2, 0xEE);
  out[2] = _mm256_shuffle_ps(t1, t3, 0x44);
  out[3] = _mm256_shuffle_ps(t1, t3, 0xEE);
}

// The scalar functions' arithmetic, lane by lane (random/draw.hpp names each step).
SPMD_AVX2_FN __m256 add(__m256 a, __m256 b) { return _mm256_add_ps(a, b); }
SPMD_AVX2_FN __m256 sub(__m256 a, __m256 b) { return _mm256_sub_ps(a, b); }
SPMD_AVX2_FN __m256 mul(__m256 a, __m256 b) {  // (the empty asm: random/draw.hpp's mul)
  __m256 p = _mm256_mul_ps(a, b);
  asm("" : "+x"(p));
  return p;
}
SPMD_AVX2_FN __m256 select(__m256i mask, __m256 yes, __m256 no) {
  return _mm256_blendv_ps(no, yes, _mm256_castsi256_ps(mask));
}

/// log_scaled<float>(n), n in [1, 2^24].
SPMD_AVX2_FN __m256 log_scaled(__m256i n) {
  using F = fp<float>;
  const __m256i bits = _mm256_castps_si256(_mm256_cvtepi32_ps(n));  // exact: n fits
  __m256i e = _mm256_sub_epi32(_mm256_srli_epi32(bits, F::mantissa), splat(std::uint32_t{F::bias}));
  __m256i m_bits = _mm256_or_si256(_mm256_and_si256(bits, splat((1u << F::mantissa) - 1)),
                                   splat(std::uint32_t{F::bias} << F::mantissa));
  const __m256i half = _mm256_cmpgt_epi32(m_bits, splat(F::sqrt2_bits));  // -1 where m > sqrt 2
  m_bits = _mm256_add_epi32(m_bits, _mm256_slli_epi32(half, F::mantissa));
  e = _mm256_sub_epi32(e, half);
  const __m256 m = _mm256_castsi256_ps(m_bits);
  const __m256 f = sub(m, splat(1.0f));
  const __m256 s = _mm256_div_ps(f, add(splat(2.0f), f));
  const __m256 z = mul(s, s);
  const __m256 p = add(splat(F::log_c0),
                       mul(z, add(splat(F::log_c1), mul(z, add(splat(F::log_c2), mul(z, splat(F::log_c3)))))));
  const __m256 ln_m = add(mul(splat(2.0f), s), mul(s, mul(z, p)));
  const __m256 k = _mm256_cvtepi32_ps(_mm256_sub_epi32(e, splat(std::uint32_t{F::uniform_bits})));
  return add(mul(k, splat(F::ln2_hi)), add(mul(k, splat(F::ln2_lo)), ln_m));
}

/// cos_sin_turn<float>(k), k in [0, 2^24).
SPMD_AVX2_FN void cos_sin_turn(__m256i k, __m256& c, __m256& s) {
  using F = fp<float>;
  constexpr int b = F::uniform_bits;
  const __m256i rest = _mm256_and_si256(k, splat((1u << (b - 2)) - 1));
  const __m256i past = _mm256_cmpgt_epi32(rest, splat((1u << (b - 3)) - 1));  // -1: next quadrant
  const __m256i next = _mm256_sub_epi32(_mm256_setzero_si256(), past);       // 1 or 0
  const __m256i q = _mm256_and_si256(_mm256_add_epi32(_mm256_srli_epi32(k, b - 2), next), splat(3u));
  const __m256i r = _mm256_sub_epi32(rest, _mm256_slli_epi32(next, b - 2));
  const __m256 x = mul(_mm256_cvtepi32_ps(r), splat(F::inv_scale));
  const __m256 t = mul(x, splat(F::two_pi));
  const __m256 u = mul(t, t);
  const __m256 sp = add(splat(F::sin_c0), mul(u, add(splat(F::sin_c1), mul(u, add(splat(F::sin_c2),
                                                                                 mul(u, splat(F::sin_c3)))))));
  const __m256 cp = add(splat(F::cos_c0),
                        mul(u, add(splat(F::cos_c1),
                                   mul(u, add(splat(F::cos_c2), mul(u, add(splat(F::cos_c3), mul(u, splat(F::cos_c4)))))))));
  const __m256 sn = add(t, mul(t, mul(u, sp)));
  const __m256 cs = add(splat(1.0f), mul(u, cp));
  const __m256i odd = _mm256_cmpeq_epi32(_mm256_and_si256(q, splat(1u)), splat(1u));
  const __m256 c0 = select(odd, sn, cs), s0 = select(odd, cs, sn);
  const __m256i neg_c = _mm256_cmpeq_epi32(_mm256_and_si256(_mm256_add_epi32(q, splat(1u)), splat(2u)), splat(2u));
  const __m256i neg_s = _mm256_cmpeq_epi32(_mm256_and_si256(q, splat(2u)), splat(2u));
  c = mul(c0, select(neg_c, splat(-1.0f), splat(1.0f)));
  s = mul(s0, select(neg_s, splat(-1.0f), splat(1.0f)));
}

/// box_muller<float>(a, b) for 24-bit a, b.
SPMD_AVX2_FN void box_muller(__m256i a, __m256i b, __m256& c, __m256& s) {
  const __m256 ln = log_scaled(_mm256_add_epi32(a, splat(1u)));
  const __m256 rho = _mm256_sqrt_ps(sub(splat(0.0f), mul(splat(2.0f), ln)));
  cos_sin_turn(b, c, s);
  c = mul(rho, c);
  s = mul(rho, s);
}

/// Eight float values rounded to bfloat16 (bfloat16::round_bits lane by lane), the 16-bit
/// pattern in the low half of each 32-bit lane. Without `Nan` the inputs must not be NaN:
/// the quieting select is left out.
template <bool Nan>
SPMD_AVX2_FN __m256i round_bf16(__m256 v) {
  const __m256i u = _mm256_castps_si256(v);
  const __m256i bias = _mm256_add_epi32(splat(0x7fffu), _mm256_and_si256(_mm256_srli_epi32(u, 16), splat(1u)));
  const __m256i near = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  if constexpr (!Nan) {
    return near;
  } else {
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(u, splat(0x7fffffffu)), splat(0x7f800000u));
    const __m256i quiet = _mm256_or_si256(_mm256_srli_epi32(u, 16), splat(0x0040u));
    return _mm256_blendv_epi8(near, quiet, nan);
  }
}
/// Eight 16-bit patterns from 32-bit lanes holding 0 .. 0xffff.
SPMD_AVX2_FN __m128i narrow(__m256i r) {
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/// What one draw needs in registers.
struct params {
  __m256 a, b;     // uniform: from, to - from (times 2^-digits on the fast path); normal: mean, std
  __m256 to;       // uniform: to (the value that becomes from)
  __m256i from16;  // uniform, 16-bit T: from's pattern in each 32-bit lane
  __m256 to16;     // uniform, 16-bit T: T(to) as float
  bool stream;     // non-temporal stores (a large, aligned output: no read for ownership)
};

// The last step of eight values of T (computed as floats). The general path checks what the
// fast path has proven cannot happen: a uniform value that rounds to `to` (it becomes `from`)
// and, for bfloat16, a NaN (quieted as bfloat16::round_bits does).

/// f32: the values themselves.
template <random::distribution Dist, bool General>
SPMD_AVX2_FN __m256 finish_f32(const params& p, __m256 v) {
  if constexpr (General && Dist == random::distribution::uniform)
    v = _mm256_blendv_ps(v, p.a, _mm256_cmp_ps(v, p.to, _CMP_EQ_OQ));
  return v;
}
/// bf16: the patterns in the low half of each 32-bit lane.
template <random::distribution Dist, bool General>
SPMD_AVX2_FN __m256i finish_bf16(const params& p, __m256 v) {
  __m256i r = round_bf16<General>(v);
  if constexpr (General && Dist == random::distribution::uniform) {  // T(v) == T(to) as floats
    const __m256 back = _mm256_castsi256_ps(_mm256_slli_epi32(r, 16));
    r = _mm256_blendv_epi8(r, p.from16, _mm256_castps_si256(_mm256_cmp_ps(back, p.to16, _CMP_EQ_OQ)));
  }
  return r;
}
/// f16: eight packed patterns. F16C rounds to nearest even and quiets a NaN keeping its sign
/// and payload top, as float16::round_bits does.
template <random::distribution Dist, bool General>
SPMD_AVX2_FN __m128i finish_f16(const params& p, __m256 v) {
  __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  if constexpr (General && Dist == random::distribution::uniform) {
    const __m256i eq = _mm256_castps_si256(_mm256_cmp_ps(_mm256_cvtph_ps(h), p.to16, _CMP_EQ_OQ));
    h = _mm_blendv_epi8(h, narrow(p.from16), _mm_packs_epi32(_mm256_castsi256_si128(eq), _mm256_extracti128_si256(eq, 1)));
  }
  return h;
}
/// Which arithmetic a draw's last step needs, chosen per draw by fill_blocks.
enum class path {
  general,  // any range: the checks of a value that rounds to `to`, and bf16's NaNs
  fast,     // uniform_fast's ranges (and every finite normal): neither can happen
  exact,    // bf16 uniform whose every value is a bf16 (uniform_exact_bf16): no rounding
};

/// bf16 patterns of two registers, joined: lane l holds lo's value in its low half and hi's
/// in its high half. The fast path (no NaN) rounds both at once in 16-bit lanes: a high half
/// h goes up by one when its low half l is past the midpoint, or at it with h odd, i.e.
/// when l + (h & 1) > 0x8000 (saturating: l = 0xffff stays above); that is round_bits'
/// (u + 0x7fff + lsb) >> 16 for every non-NaN u. On the exact path every low half is 0, so
/// the high halves are the patterns.
template <random::distribution Dist, path P>
SPMD_AVX2_FN __m256i join_bf16(const params& p, __m256 lo, __m256 hi) {
  if constexpr (P == path::general) {
    return _mm256_or_si256(finish_bf16<Dist, true>(p, lo), _mm256_slli_epi32(finish_bf16<Dist, true>(p, hi), 16));
  } else {
    const __m256i a = _mm256_castps_si256(lo), b = _mm256_castps_si256(hi);
    const __m256i high = _mm256_blend_epi16(_mm256_srli_epi32(a, 16), b, 0xAA);
    if constexpr (P == path::exact) return high;
    const __m256i low = _mm256_blend_epi16(a, _mm256_slli_epi32(b, 16), 0xAA);
    const __m256i x = _mm256_adds_epu16(low, _mm256_and_si256(high, _mm256_set1_epi16(1)));
    const __m256i up = _mm256_cmpgt_epi16(_mm256_xor_si256(x, _mm256_set1_epi16(short(0x8000))),
                                          _mm256_setzero_si256());  // x > 0x8000, unsigned
    return _mm256_sub_epi16(high, up);
  }
}

/// 32 bytes at dst: streaming (p.stream: dst is then 32-byte aligned) or not.
SPMD_AVX2_FN void store(const params& p, void* dst, __m256i v) {
  if (p.stream) _mm256_stream_si256(static_cast<__m256i*>(dst), v);
  else _mm256_storeu_si256(static_cast<__m256i*>(dst), v);
}

/// [lo | hi]: two 128-bit registers as the halves of one.
SPMD_AVX2_FN __m256i halves(__m128i lo, __m128i hi) {
  return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/// Stores one group: v[j] holds word j's values of the eight blocks, lanes in the order
/// counters_for<T> gives, so that each type's store needs few shuffles.
template <class T, random::distribution Dist, path P>
SPMD_AVX2_FN void store_group(const params& p, const __m256 (&v)[4], T* SPMD_RESTRICT dst) {
  constexpr bool general = P == path::general;
  if constexpr (std::is_same_v<T, float>) {  // lanes 0 2 4 6 1 3 5 7: the 4 x 8 transpose
    __m256 o[4];
    transpose(v, o);
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) {
      store(p, dst + 8 * q, _mm256_castps_si256(finish_f32<Dist, general>(p, o[q])));
    }
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    // lanes 0 1 4 5 2 3 6 7: words 0, 1 (and 2, 3) of a block joined in one 32-bit lane, then
    // a block's four values are 64 bits, which unpack puts in order.
    const __m256i w01 = join_bf16<Dist, P>(p, v[0], v[1]), w23 = join_bf16<Dist, P>(p, v[2], v[3]);
    const __m256i first = _mm256_unpacklo_epi32(w01, w23), second = _mm256_unpackhi_epi32(w01, w23);
    store(p, dst, first);
    store(p, dst + 16, second);
  } else {
    // f16, lanes in block order: F16C packs each register; halves [h0 | h2] and [h1 | h3]
    // unpack to words 0, 1 (low half) and 2, 3 (high half) of blocks 0-3 (then 4-7) in 32-bit
    // lanes, and one cross-half permute puts each block's pair of pairs together.
    const __m256i y = halves(finish_f16<Dist, general>(p, v[0]), finish_f16<Dist, general>(p, v[2]));
    const __m256i z = halves(finish_f16<Dist, general>(p, v[1]), finish_f16<Dist, general>(p, v[3]));
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    store(p, dst, _mm256_permutevar8x32_epi32(_mm256_unpacklo_epi16(y, z), order));
    store(p, dst + 16, _mm256_permutevar8x32_epi32(_mm256_unpackhi_epi16(y, z), order));
  }
}

/// The counters of blocks b .. b + 7 in the lane order store_group<T> takes.
template <class T>
SPMD_AVX2_FN void counters_for(std::uint64_t b, __m256i& lo, __m256i& hi) {
  if constexpr (std::is_same_v<T, float>) counters<0, 2, 4, 6, 1, 3, 5, 7>(b, lo, hi);
  else if constexpr (std::is_same_v<T, bfloat16>) counters<0, 1, 4, 5, 2, 3, 6, 7>(b, lo, hi);
  else counters<0, 1, 2, 3, 4, 5, 6, 7>(b, lo, hi);
}

/// Blocks b .. b + 8G - 1 into out (32 G elements).
template <class T, random::distribution Dist, path P, int G>
SPMD_AVX2_FN void fill_groups(const params& p, const round_keys& keys, std::uint64_t b, T* SPMD_RESTRICT out) {
  __m256i c[4][G];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) counters_for<T>(b + 8 * static_cast<std::uint64_t>(g), c[0][g], c[1][g]);
  philox<G>(c, keys);
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    __m256 v[4];
    if constexpr (Dist == random::distribution::uniform) {
      constexpr int bits = random::detail::digits<T>;
      const __m256i mask = splat((1u << bits) - 1);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256 k = _mm256_cvtepi32_ps(_mm256_and_si256(c[j][g], mask));
        if constexpr (P == path::general) {  // x = k 2^-bits, then x (to - from) + from
          const __m256 x = mul(k, splat(1.0f / static_cast<float>(std::uint32_t{1} << bits)));
          v[j] = add(mul(x, p.b), p.a);
        } else {  // k ((to - from) 2^-bits): the same real number, so the same rounding
          v[j] = add(mul(k, p.b), p.a);
        }
      }
    } else {
      const __m256i low24 = splat((1u << 24) - 1);
#pragma GCC unroll 2
      for (int j = 0; j < 4; j += 2) {
        __m256 zc, zs;
        box_muller(_mm256_and_si256(c[j][g], low24), _mm256_and_si256(c[j + 1][g], low24), zc, zs);
        v[j] = add(mul(zc, p.b), p.a);
        v[j + 1] = add(mul(zs, p.b), p.a);
      }
    }
    store_group<T, Dist, P>(p, v, out + 32 * g);
  }
}

/// G, the registers of eight blocks in flight. The rounds are a chain of dependent
/// multiplies, so independent registers keep the multiplier busy, but each holds four words
/// across the rounds and the conversion, and AVX2 has 16 registers, so past some G the
/// spills cost more than the overlap gains. Measured per type and distribution (one core,
/// in cache, G = 1 .. 4 in turns: bench/RESULTS.md, issue 27): 4, except f16's uniform,
/// whose F16C conversions want the registers (3).
template <class T, random::distribution Dist>
inline constexpr int in_flight = Dist == random::distribution::uniform && std::is_same_v<T, float16> ? 3 : 4;

/// Every group of eight blocks: G at a time, then one at a time.
template <class T, random::distribution Dist, path P, int G = in_flight<T, Dist>>
SPMD_AVX2_FN void fill_all(const params& p, std::uint64_t seed, std::uint64_t b0, index_t blocks,
                           T* SPMD_RESTRICT out) {
  const round_keys keys(seed);
  const std::uint64_t groups = static_cast<std::uint64_t>(blocks) / 8;
  std::uint64_t g = 0;
  for (; g + G <= groups; g += G) fill_groups<T, Dist, P, G>(p, keys, b0 + 8 * g, out + 32 * g);
  for (; g < groups; ++g) fill_groups<T, Dist, P, 1>(p, keys, b0 + 8 * g, out + 32 * g);
}

/// Whether the fast path gives the general path's bits for this uniform: no value can be NaN
/// or round to `to`, and (to - from) 2^-bits is exact. Values grow with k (each step rounds
/// monotonically and to - from >= 0), so checking the largest k, 2^bits - 1, suffices.
template <class T>
inline bool uniform_fast(float from, float to, float span) {
  constexpr int bits = random::detail::digits<T>;
  if (!(std::isfinite(from) && std::isfinite(span) && span >= 0)) return false;
  const float scaled = span * (1.0f / static_cast<float>(std::uint32_t{1} << bits));
  if (span != 0 && !(std::fabs(scaled) >= std::numeric_limits<float>::min())) return false;  // inexact
  const float x = random::detail::mul(static_cast<float>((std::uint32_t{1} << bits) - 1),
                                      1.0f / static_cast<float>(std::uint32_t{1} << bits));
  const T top = random::detail::to_element<T>(random::detail::add(random::detail::mul(x, span), from));
  return static_cast<float>(top) < static_cast<float>(random::detail::to_element<T>(to));
}

/// Whether every value of a fast-path bf16 uniform, k (to - from) 2^-8 + from for the 256
/// k, is a bf16 already (its low 16 bits zero): then rounding leaves it as it is, and the
/// exact path stores the high halves. [0, 1) and [-1, 1) are such ranges (k 2^-8 and
/// k 2^-7 - 1); [-0.1, 0.1) is not.
SPMD_AVX2_FN bool uniform_exact_bf16(const params& p) {
  __m256i low = _mm256_setzero_si256();
  __m256 k = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
  for (int i = 0; i < 32; ++i) {  // the arithmetic of fill_groups' fast path
    low = _mm256_or_si256(low, _mm256_castps_si256(add(mul(k, p.b), p.a)));
    k = add(k, splat(8.0f));
  }
  return _mm256_testz_si256(low, splat(0xffffu)) != 0;
}

}  // namespace detail

/// The 4 * blocks elements of Philox blocks b0 .. b0 + blocks - 1 of a uniform or normal
/// draw of f32, bf16 or f16 (blocks a multiple of 8; d.dist must be Dist). Call only where
/// available().
template <class T, random::distribution Dist>
[[gnu::target("avx2,f16c")]] void fill_blocks(const random::draw& d, std::uint64_t b0, index_t blocks,
                                               T* SPMD_RESTRICT out) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>,
                "spmd::host::avx2::fill_blocks: f32, bf16 or f16 (f64 takes the scalar path).");
  static_assert(Dist == random::distribution::uniform || Dist == random::distribution::normal,
                "spmd::host::avx2::fill_blocks: uniform or normal.");
  detail::params p{};
  const float a = static_cast<float>(d.a), b = static_cast<float>(d.b);
  bool fast = true;
  if constexpr (Dist == random::distribution::uniform) {
    const float span = random::detail::sub(b, a);
    fast = detail::uniform_fast<T>(a, b, span);
    p.a = detail::splat(a);
    p.b = detail::splat(fast ? span * (1.0f / static_cast<float>(std::uint32_t{1} << random::detail::digits<T>))
                             : span);
    p.to = detail::splat(b);
    if constexpr (!std::is_same_v<T, float>) {
      p.from16 = detail::splat(std::uint32_t{T(a).bits});
      p.to16 = detail::splat(static_cast<float>(T(b)));
    }
  } else {
    // z std + mean with |z| <= 5.8 is NaN only for a non-finite mean or std (as floats)
    fast = std::isfinite(a) && std::isfinite(b);
    p.a = detail::splat(a);
    p.b = detail::splat(b);
  }
  // Streaming stores pay off past the caches; they need 32-byte alignment.
  const std::size_t bytes = static_cast<std::size_t>(blocks) * 4 * sizeof(T);
  p.stream = bytes >= (std::size_t{1} << 20) && reinterpret_cast<std::uintptr_t>(out) % 32 == 0;
  // (the normal's general path differs only for bfloat16's NaNs)
  constexpr bool general_differs = Dist == random::distribution::uniform || std::is_same_v<T, bfloat16>;
  constexpr bool exact_possible = std::is_same_v<T, bfloat16> && Dist == random::distribution::uniform;
  using detail::path;
  if (general_differs && !fast) {
    if constexpr (general_differs) detail::fill_all<T, Dist, path::general>(p, d.seed, b0, blocks, out);
  } else if (exact_possible && detail::uniform_exact_bf16(p)) {
    if constexpr (exact_possible) detail::fill_all<T, Dist, path::exact>(p, d.seed, b0, blocks, out);
  } else {
    detail::fill_all<T, Dist, path::fast>(p, d.seed, b0, blocks, out);
  }
  if (p.stream) _mm_sfence();  // order the non-temporal stores before what follows
}

#undef SPMD_AVX2_FN

#else  // no AVX2 path on this target

inline bool available() { return false; }

#endif

}  // namespace spmd::host::avx2
