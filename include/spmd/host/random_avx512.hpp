// spmd/host/random_avx512.hpp — uniform and normal draws sixteen Philox blocks at a time in
// AVX-512 registers, the same bits as random/draw.hpp's scalar functions (and so as the device
// and the AVX2 path).
//
//   if (spmd::host::avx512::available())
//     spmd::host::avx512::fill_blocks<float, distribution::normal>(d, b0, blocks, out);
//
// fill_blocks writes the 4 * blocks elements of the Philox blocks b0 .. b0 + blocks - 1
// (blocks a multiple of 16) of an f32, bf16 or f16 draw. It is host/random_avx2.hpp's scheme
// at twice the width: lane i of a register holds one block, the ten rounds, the uniform's
// scaling and Box-Muller run on sixteen blocks in lock step, and a few shuffles put the values
// in element order. Twice the lanes per instruction and twice the registers (32: the Philox
// state of four registers in flight no longer spills) draw uniform f32 1.85 times as fast as
// AVX2 and normal f32 1.5 times (bench/RESULTS.md, issue 27).
//
// Bit for bit: the same IEEE operations on the same operands in the same order as the scalar
// functions, with no product fused into an FMA (x86_avx512_vectors.hpp's mul). The draws whose
// range needs the general path's checks (a value that rounds to `to`, NaNs) are left to the
// AVX2 path, which has them. tests/random/vector_paths.cpp compares log, cos and sin over every
// 24-bit input and whole draws against draw_at.
//
// Chosen at run time (`available()`: AVX-512 F, BW, DQ and VL, which every AVX-512 CPU since
// Skylake-SP has), before the AVX2 path.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/config.hpp"
#include "spmd/core/float16.hpp"
#include "spmd/host/random_avx2.hpp"
#include "spmd/random/draw.hpp"

#if SPMD_HOST_AVX2
#include "spmd/host/x86_avx512_vectors.hpp"
#endif

namespace spmd::host::avx512 {

#if SPMD_HOST_AVX2

/// Whether this CPU runs the AVX-512 path (checked once; the checks include the OS's ZMM state).
inline bool available() {
  static const bool yes = [] {
    __builtin_cpu_init();
    return avx2::available() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  }();
  return yes;
}

namespace detail {

using namespace vec;
using random::detail::fp;

/// The ten round keys of a seed, splatted (in memory: operands of the xors).
struct round_keys {
  u32v k[10][2];
  SPMD_AVX512_FN explicit round_keys(std::uint64_t seed) {
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    for (int r = 0; r < 10; ++r) {
      k[r][0] = splat(k0);
      k[r][1] = splat(k1);
      k0 += random::detail::philox_w0;
      k1 += random::detail::philox_w1;
    }
  }
};

/// (hi, lo) of the 32x32-bit products a * m per lane: two vpmuludq (even lanes, then the odd
/// ones shifted down) and two two-source permutes that take the halves apart. (Measured
/// against shifts and bitwise selects, which load the port of the multiplies: 0.77 of this
/// rate; and against a shuffle in place of the shift: 0.95.)
SPMD_AVX512_FN void mul_hi_lo(u32v a, u32v m, u32v& hi, u32v& lo) {
  const u32v even = as<u32v>(mul_even(a, m));
  const u32v odd = as<u32v>(mul_even(as<u32v>(as<u64v>(a) >> 32), m));
  lo = __builtin_shufflevector(even, odd, 0, 16, 2, 18, 4, 20, 6, 22, 8, 24, 10, 26, 12, 28, 14, 30);
  hi = __builtin_shufflevector(even, odd, 1, 17, 3, 19, 5, 21, 7, 23, 9, 25, 11, 27, 13, 29, 15, 31);
}

/// Philox4x32-10 of G registers of counters (words 0 and 1; words 2 and 3 are 0 in every
/// stream block) in lock step; c[j][g] is word j of register g, on return the output words.
template <int G>
SPMD_AVX512_FN void philox(u32v (&c)[4][G], const round_keys& keys) {
  const u32v m0 = splat(random::detail::philox_m0), m1 = splat(random::detail::philox_m1);
#pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {  // round 0: m1 * 0 has no high or low part
    u32v hi0, lo0;
    mul_hi_lo(c[0][g], m0, hi0, lo0);
    c[0][g] = c[1][g] ^ keys.k[0][0];
    c[2][g] = hi0 ^ keys.k[0][1];
    c[1][g] = u32v{};
    c[3][g] = lo0;
  }
#pragma GCC unroll 9
  for (int r = 1; r < 10; ++r) {
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      u32v hi0, lo0, hi1, lo1;
      mul_hi_lo(c[0][g], m0, hi0, lo0);
      mul_hi_lo(c[2][g], m1, hi1, lo1);
      c[0][g] = hi1 ^ c[1][g] ^ keys.k[r][0];
      c[2][g] = hi0 ^ c[3][g] ^ keys.k[r][1];
      c[1][g] = lo1;
      c[3][g] = lo0;
    }
  }
}

/// Lane l's block, for the store of each type: f32's transpose wants lane 4c + k to hold block
/// 4k + c; bf16's (store_pairs) lanes 0, 1, 4, 5, 8, 9, 12, 13 to hold blocks 0-7 and the
/// rest 8-15; f16's (store_halves) lanes 0-3, 8-11, 4-7, 12-15 to hold blocks 0-3, 4-7, 8-11,
/// 12-15.
template <class T>
inline constexpr u32v lane_blocks =
    std::is_same_v<T, float>      ? u32v{0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15}
    : std::is_same_v<T, bfloat16> ? u32v{0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15}
                                  : u32v{0, 1, 2, 3, 8, 9, 10, 11, 4, 5, 6, 7, 12, 13, 14, 15};

/// Counters (low and high word) of blocks b0 + lane_blocks<T>; a lane whose low word wrapped
/// carries one into the high word (the comparison's -1).
template <class T>
SPMD_AVX512_FN void counters(std::uint64_t b0, u32v& lo, u32v& hi) {
  const u32v base = splat(static_cast<std::uint32_t>(b0));
  lo = base + lane_blocks<T>;
  hi = splat(static_cast<std::uint32_t>(b0 >> 32)) - as<u32v>(lo < base);
}

/// log_scaled<float>(n), n in [1, 2^24].
SPMD_AVX512_FN f32v log_scaled(u32v n) {
  using F = fp<float>;
  const u32v b = bits(to_float(n));  // exact: n fits
  i32v e = as<i32v>(b >> F::mantissa) - F::bias;
  u32v m_bits = (b & ((1u << F::mantissa) - 1)) | (std::uint32_t{F::bias} << F::mantissa);
  const i32v half = m_bits > F::sqrt2_bits;  // -1 where m > sqrt 2: m / 2, e + 1
  m_bits += as<u32v>(half) << F::mantissa;
  e -= half;
  const f32v m = as_float(m_bits);
  const f32v f = sub(m, splat(1.0f));
  const f32v s = div(f, add(splat(2.0f), f));
  const f32v z = mul(s, s);
  const f32v p = add(splat(F::log_c0),
                     mul(z, add(splat(F::log_c1), mul(z, add(splat(F::log_c2), mul(z, splat(F::log_c3)))))));
  const f32v ln_m = add(mul(splat(2.0f), s), mul(s, mul(z, p)));
  const f32v k = __builtin_convertvector(e - F::uniform_bits, f32v);
  return add(mul(k, splat(F::ln2_hi)), add(mul(k, splat(F::ln2_lo)), ln_m));
}

/// cos_sin_turn<float>(k), k in [0, 2^24).
SPMD_AVX512_FN void cos_sin_turn(u32v k, f32v& c, f32v& s) {
  using F = fp<float>;
  constexpr int b = F::uniform_bits;
  const u32v rest = k & ((1u << (b - 2)) - 1);
  const i32v past = rest > (1u << (b - 3)) - 1;  // -1: the next quadrant
  const u32v next = -as<u32v>(past);    // 1 or 0
  const u32v q = ((k >> (b - 2)) + next) & 3u;
  const i32v r = as<i32v>(rest - (next << (b - 2)));
  const f32v x = mul(__builtin_convertvector(r, f32v), splat(F::inv_scale));
  const f32v t = mul(x, splat(F::two_pi));
  const f32v u = mul(t, t);
  const f32v sp = add(splat(F::sin_c0),
                      mul(u, add(splat(F::sin_c1), mul(u, add(splat(F::sin_c2), mul(u, splat(F::sin_c3)))))));
  const f32v cp = add(splat(F::cos_c0),
                      mul(u, add(splat(F::cos_c1),
                                 mul(u, add(splat(F::cos_c2), mul(u, add(splat(F::cos_c3), mul(u, splat(F::cos_c4)))))))));
  const f32v sn = add(t, mul(t, mul(u, sp)));
  const f32v cs = add(splat(1.0f), mul(u, cp));
  const i32v odd = (q & 1u) != 0u;
  const f32v c0 = select(odd, sn, cs), s0 = select(odd, cs, sn);
  c = mul(c0, select(((q + 1u) & 2u) != 0u, splat(-1.0f), splat(1.0f)));
  s = mul(s0, select((q & 2u) != 0u, splat(-1.0f), splat(1.0f)));
}

/// box_muller<float>(a, b) for 24-bit a, b.
SPMD_AVX512_FN void box_muller(u32v a, u32v b, f32v& c, f32v& s) {
  const f32v rho = sqrt(sub(splat(0.0f), mul(splat(2.0f), log_scaled(a + 1u))));
  cos_sin_turn(b, c, s);
  c = mul(rho, c);
  s = mul(rho, s);
}

/// Which last step a draw takes (every one without the general path's checks, which the AVX2
/// path keeps).
enum class path {
  fast,   // uniform_fast's ranges and every finite normal: no value is NaN or rounds to `to`
  exact,  // bf16 uniform whose every value is a bf16 (uniform_exact_bf16): no rounding
};

/// What one draw needs, as fill_blocks finds it.
struct draw_params {
  float a, b;   // uniform: from, (to - from) 2^-digits; normal: mean, std
  bool stream;  // streaming stores (a large output, 64-byte aligned)
};
/// The same in registers.
struct params {
  f32v a, b;
  bool stream;
  SPMD_AVX512_FN explicit params(const draw_params& d) : a(splat(d.a)), b(splat(d.b)), stream(d.stream) {}
};

/// 64 bytes at dst.
SPMD_AVX512_FN void store(const params& p, void* dst, u32v v) {
  if (p.stream) stream(dst, v);
  else std::memcpy(dst, &v, sizeof v);
}

/// f32: v[j] holds word j of blocks lane_blocks<float>; the 4 x 4 transposes within each
/// 128-bit quarter (unpacks, then shuffles) give blocks 4q .. 4q + 3 in register q.
SPMD_AVX512_FN void store_f32(const params& p, const f32v (&v)[4], float* dst) {
  const f32v t0 = __builtin_shufflevector(v[0], v[1], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
  const f32v t1 = __builtin_shufflevector(v[0], v[1], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  const f32v t2 = __builtin_shufflevector(v[2], v[3], 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29);
  const f32v t3 = __builtin_shufflevector(v[2], v[3], 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31);
  const f32v o[4] = {
      __builtin_shufflevector(t0, t2, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
      __builtin_shufflevector(t0, t2, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31),
      __builtin_shufflevector(t1, t3, 0, 1, 16, 17, 4, 5, 20, 21, 8, 9, 24, 25, 12, 13, 28, 29),
      __builtin_shufflevector(t1, t3, 2, 3, 18, 19, 6, 7, 22, 23, 10, 11, 26, 27, 14, 15, 30, 31)};
#pragma GCC unroll 4
  for (int q = 0; q < 4; ++q) store(p, dst + 16 * q, bits(o[q]));
}

/// 16-bit values: x = [word 0 | word 2] and y = [word 1 | word 3] of the sixteen blocks
/// (lanes in lane_blocks<T>'s order). Within each 128-bit quarter, unpacking x and y pairs
/// words 0, 1 (quarters 0, 1) and 2, 3 (quarters 2, 3) of four lanes into 32-bit lanes; one
/// permute per output puts each block's two pairs together.
SPMD_AVX512_FN void store_halves(const params& p, u16v x, u16v y, void* dst) {
  const u16v lo = __builtin_shufflevector(x, y, 0, 32, 1, 33, 2, 34, 3, 35, 8, 40, 9, 41, 10, 42, 11, 43,  //
                                          16, 48, 17, 49, 18, 50, 19, 51, 24, 56, 25, 57, 26, 58, 27, 59);
  const u16v hi = __builtin_shufflevector(x, y, 4, 36, 5, 37, 6, 38, 7, 39, 12, 44, 13, 45, 14, 46, 15, 47,  //
                                          20, 52, 21, 53, 22, 54, 23, 55, 28, 60, 29, 61, 30, 62, 31, 63);
  const u32v a = as<u32v>(lo), b = as<u32v>(hi);
  store(p, dst, __builtin_shufflevector(a, a, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
  store(p, static_cast<char*>(dst) + 64,
        __builtin_shufflevector(b, b, 0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15));
}

/// bf16: p01 and p23 hold words 0, 1 and 2, 3 of each lane's block as 16-bit pairs in a
/// 32-bit lane; unpacking them within each 128-bit quarter gives lanes 4c, 4c + 1 (then
/// 4c + 2, 4c + 3) whole, which lane_blocks<bfloat16> made blocks 0-7 (then 8-15).
SPMD_AVX512_FN void store_pairs(const params& p, u32v p01, u32v p23, void* dst) {
  store(p, dst, __builtin_shufflevector(p01, p23, 0, 16, 1, 17, 4, 20, 5, 21, 8, 24, 9, 25, 12, 28, 13, 29));
  store(p, static_cast<char*>(dst) + 64,
        __builtin_shufflevector(p01, p23, 2, 18, 3, 19, 6, 22, 7, 23, 10, 26, 11, 27, 14, 30, 15, 31));
}
/// The high 16 bits of each lane of a (low half) and b (high half), in one 32-bit lane.
SPMD_AVX512_FN u32v join_high(u32v a, u32v b) { return (a >> 16) | (b & 0xffff0000u); }
/// bfloat16::round_bits of a non-NaN value, in the high half of its lane: u + 0x7fff + lsb.
SPMD_AVX512_FN u32v round_bf16(f32v v) {
  const u32v u = bits(v);
  return u + (0x7fffu + ((u >> 16) & 1u));
}

/// Stores one group of sixteen blocks, v[j] holding word j of each.
template <class T, path P>
SPMD_AVX512_FN void store_group(const params& p, const f32v (&v)[4], T* dst) {
  if constexpr (std::is_same_v<T, float>) {
    store_f32(p, v, dst);
  } else if constexpr (std::is_same_v<T, float16>) {
    const u16h h[4] = {to_f16(v[0]), to_f16(v[1]), to_f16(v[2]), to_f16(v[3])};
    store_halves(p,
                 __builtin_shufflevector(h[0], h[2], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                         18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31),
                 __builtin_shufflevector(h[1], h[3], 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17,
                                         18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31),
                 dst);
  } else if constexpr (P == path::exact) {  // bf16 whose values are bf16s: the high halves
    store_pairs(p, join_high(bits(v[0]), bits(v[1])), join_high(bits(v[2]), bits(v[3])), dst);
  } else {
    store_pairs(p, join_high(round_bf16(v[0]), round_bf16(v[1])), join_high(round_bf16(v[2]), round_bf16(v[3])),
                dst);
  }
}

/// A uniform's values from the low `digits` bits k of each lane: k ((to - from) 2^-digits) +
/// from, the scalar x (to - from) + from with x = k 2^-digits, the same real product
/// (uniform_fast checks that the scaled span is exact).
template <class T>
SPMD_AVX512_FN f32v uniform_values(const params& p, u32v words) {
  constexpr std::uint32_t mask = (1u << random::detail::digits<T>) - 1;
  return add(mul(to_float(words & mask), p.b), p.a);
}

/// Blocks b .. b + 16G - 1 into out (64 G elements).
template <class T, random::distribution Dist, path P, int G>
SPMD_AVX512_FN void fill_groups(const params& p, const round_keys& keys, std::uint64_t b, T* SPMD_RESTRICT out) {
  u32v c[4][G];
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) counters<T>(b + 16 * static_cast<std::uint64_t>(g), c[0][g], c[1][g]);
  philox<G>(c, keys);
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    f32v v[4];
    if constexpr (Dist == random::distribution::uniform) {
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) v[j] = uniform_values<T>(p, c[j][g]);
    } else {
      constexpr std::uint32_t low24 = (1u << 24) - 1;
#pragma GCC unroll 2
      for (int j = 0; j < 4; j += 2) {
        f32v zc, zs;
        box_muller(c[j][g] & low24, c[j + 1][g] & low24, zc, zs);
        v[j] = add(mul(zc, p.b), p.a);
        v[j + 1] = add(mul(zs, p.b), p.a);
      }
    }
    store_group<T, P>(p, v, out + 64 * g);
  }
}

/// G, the registers of sixteen blocks in flight: the rounds are chains of dependent
/// multiplies, so independent registers overlap them; 32 registers hold four groups' state.
template <class T, random::distribution Dist>
inline constexpr int in_flight = 4;

/// Every group of sixteen blocks: G at a time, then one at a time.
template <class T, random::distribution Dist, path P, int G = in_flight<T, Dist>>
[[gnu::target(SPMD_AVX512_TARGET)]] void fill_all(const draw_params& d, std::uint64_t seed, std::uint64_t b0,
                                                  index_t blocks, T* SPMD_RESTRICT out) {
  const params p(d);
  const round_keys keys(seed);
  for (index_t left = blocks / 16; left > 0;) {
    if (left >= G) {
      fill_groups<T, Dist, P, G>(p, keys, b0, out);
      left -= G, b0 += 16 * G, out += 64 * G;
    } else {
      fill_groups<T, Dist, P, 1>(p, keys, b0, out);
      left -= 1, b0 += 16, out += 64;
    }
  }
  if (p.stream) fence();
}

/// Whether every one of a bf16 uniform's 256 values, k (to - from) 2^-8 + from, is a bf16
/// already (low 16 bits zero), computed as fill_groups does: then rounding is the identity.
[[gnu::target(SPMD_AVX512_TARGET)]] inline bool uniform_exact_bf16(const draw_params& d) {
  const params p(d);
  u32v low{};
  for (std::uint32_t k = 0; k < 256; k += 16)
    low |= bits(uniform_values<bfloat16>(p, splat(k) + u32v{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}));
  for (int l = 0; l < 16; ++l)
    if ((low[l] & 0xffffu) != 0) return false;
  return true;
}

}  // namespace detail

/// The 4 * blocks elements of Philox blocks b0 .. b0 + blocks - 1 of a uniform or normal
/// draw of f32, bf16 or f16 (blocks a multiple of 16; d.dist must be Dist). Call only where
/// available().
template <class T, random::distribution Dist>
void fill_blocks(const random::draw& d, std::uint64_t b0, index_t blocks, T* SPMD_RESTRICT out) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>,
                "spmd::host::avx512::fill_blocks: f32, bf16 or f16 (f64 takes the scalar path).");
  static_assert(Dist == random::distribution::uniform || Dist == random::distribution::normal,
                "spmd::host::avx512::fill_blocks: uniform or normal.");
  const float a = static_cast<float>(d.a), b = static_cast<float>(d.b);
  float scale = b;
  bool fast = std::isfinite(a) && std::isfinite(b);  // normal: z std + mean, |z| <= 5.8, is then no NaN
  if constexpr (Dist == random::distribution::uniform) {
    const float span = random::detail::sub(b, a);
    fast = avx2::detail::uniform_fast<T>(a, b, span);
    scale = span * (1.0f / static_cast<float>(std::uint32_t{1} << random::detail::digits<T>));
  }
  // (the normal's general path differs only for bfloat16's NaNs)
  if (!fast && (Dist == random::distribution::uniform || std::is_same_v<T, bfloat16>))
    return avx2::fill_blocks<T, Dist>(d, b0, blocks, out);  // the general path's checks
  const std::size_t bytes = static_cast<std::size_t>(blocks) * 4 * sizeof(T);
  const bool stream = bytes >= (std::size_t{1} << 20) && reinterpret_cast<std::uintptr_t>(out) % 64 == 0;
  const detail::draw_params p{a, scale, stream};
  using detail::path;
  if constexpr (std::is_same_v<T, bfloat16> && Dist == random::distribution::uniform) {
    if (detail::uniform_exact_bf16(p)) return detail::fill_all<T, Dist, path::exact>(p, d.seed, b0, blocks, out);
  }
  detail::fill_all<T, Dist, path::fast>(p, d.seed, b0, blocks, out);
}

#else  // no AVX-512 path on this target

inline bool available() { return false; }

#endif

}  // namespace spmd::host::avx512
