// spmd/random/draw.hpp — the value of element i of a random tensor: a fixed function of the
// generator's (seed, offset), the operator and i, the same on every rank, host and device.
//
//   spmd::random::draw d = spmd::random::make_draw(distribution::normal, gen_state, 0.0, 1.0);
//   float x = spmd::random::draw_at<float>(d, i);        // element i of the global tensor
//
// ## The stream
// A generator's stream is the sequence of 32-bit words of Philox4x32-10 blocks
// philox_stream_block(seed, 0), (seed, 1), ...; the offset counts words (always a multiple of
// 4, so an operator starts on a block). An operator on a tensor of n elements reads the words
// [offset, offset + words(n)) and element i (global row-major index) reads only its own:
//
// | operator      | words per element    | element i from                                        |
// |---------------|----------------------|-------------------------------------------------------|
// | uniform       | 1 (f64: 2)           | the low `digits` bits (24 f32, 53 f64, 11 f16, 8 bf16) |
// |               |                      | as k * 2^-digits in [0, 1), then from + x (to - from)  |
// | normal        | 1 (f64: 2)           | Box-Muller on the pair (i & ~1, i | 1): cos for even i, |
// |               |                      | sin for odd; f16/bf16 round the f32 value              |
// | bernoulli     | 1                    | 1 if word < floor(p 2^32), else 0                      |
// | dropout       | 1                    | kept if word >= floor(p 2^32): x / (1 - p), else x * 0 |
//
// So the global tensor does not depend on the mesh, the placements, the backend or the rank,
// and no rank computes an element it does not hold.
//
// ## Bit for bit on the host and the device
// Box-Muller needs log, sin and cos. The libraries' versions differ between glibc and CUDA
// in the last bit, so spmd evaluates its own: exact integer range reduction (the uniforms
// are integers, so the octant and the exponent are bit operations), then fixed polynomials
// in + - * / and sqrt, which IEEE rounds the same everywhere. On the device every operation
// is an explicit round-to-nearest intrinsic (__fmul_rn, ...), which nvcc never fuses into an
// FMA; on the host the compiler must not contract a * b + c either, which GCC does in C++
// wherever the target has FMA (-march=native, x86-64-v3), so every host product goes through
// an empty asm the optimiser cannot see into (detail::mul; docs/random.md).
#pragma once

#include <cstdint>
#include <type_traits>

#if !defined(__CUDA_ARCH__)
#include <cmath>
#endif

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/config.hpp"
#include "spmd/core/float16.hpp"
#include "spmd/random/philox.hpp"

namespace spmd::random {

enum class distribution : std::uint8_t { uniform, normal, bernoulli, dropout };

/// One random operator as every rank and device sees it: a trivially copyable value, passed to
/// kernels as is.
struct draw {
  distribution dist = distribution::uniform;
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;     // the generator's offset when the operator started (words)
  double a = 0, b = 1;          // uniform: from, to; normal: mean, std; dropout: p
  std::uint64_t threshold = 0;  // bernoulli, dropout: floor(p * 2^32), at most 2^32
};

/// A floating-point element type random operators fill (f32, f64, f16, bf16).
template <class T>
inline constexpr bool random_element =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, bfloat16> ||
    std::is_same_v<T, float16>;

/// Words of the stream one element reads.
SPMD_HD constexpr int words_per_element(distribution d, int element_bytes) {
  return (d == distribution::uniform || d == distribution::normal) && element_bytes == 8 ? 2 : 1;
}
/// Words an operator on n elements reads: what the generator's offset advances by (rounded
/// up to whole blocks, so the next operator starts on one).
SPMD_HD constexpr std::uint64_t words_for(distribution d, int element_bytes, std::uint64_t n) {
  const std::uint64_t w = n * static_cast<std::uint64_t>(words_per_element(d, element_bytes));
  return (w + 3) / 4 * 4;
}

namespace detail {

// Round-to-nearest arithmetic that no compiler fuses (see the header comment).
#if defined(__CUDA_ARCH__)
SPMD_HD inline float add(float a, float b) { return __fadd_rn(a, b); }
SPMD_HD inline float sub(float a, float b) { return __fsub_rn(a, b); }
SPMD_HD inline float mul(float a, float b) { return __fmul_rn(a, b); }
SPMD_HD inline float div(float a, float b) { return __fdiv_rn(a, b); }
SPMD_HD inline float sqrt_rn(float a) { return __fsqrt_rn(a); }
SPMD_HD inline double add(double a, double b) { return __dadd_rn(a, b); }
SPMD_HD inline double sub(double a, double b) { return __dsub_rn(a, b); }
SPMD_HD inline double mul(double a, double b) { return __dmul_rn(a, b); }
SPMD_HD inline double div(double a, double b) { return __ddiv_rn(a, b); }
SPMD_HD inline double sqrt_rn(double a) { return __dsqrt_rn(a); }
#else
template <class C>
SPMD_HD inline C add(C a, C b) { return a + b; }
template <class C>
SPMD_HD inline C sub(C a, C b) { return a - b; }
/// a * b, rounded: the empty asm hides the product from the compiler, so it cannot fuse it
/// with an add into an FMA (GCC does in C++ wherever the target has FMA, whatever the -std,
/// e.g. under -march=native; the device rounds twice). The asm emits no instruction.
template <class C>
SPMD_HD inline C mul(C a, C b) {
  C p = a * b;
#if defined(__x86_64__) || defined(__SSE2__)  // ("x": an SSE register)
  asm("" : "+x"(p));
#elif defined(__aarch64__)
  asm("" : "+w"(p));
#endif
  return p;
}
template <class C>
SPMD_HD inline C div(C a, C b) { return a / b; }
template <class C>
SPMD_HD inline C sqrt_rn(C a) { return std::sqrt(a); }
#endif

/// Compute type: double for f64, float for the rest.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, double>, double, float>;

/// Significant bits of T: how many bits of a word a uniform value keeps.
template <class T>
inline constexpr int digits = std::is_same_v<T, double> ? 53 : std::is_same_v<T, float> ? 24
                              : std::is_same_v<T, float16> ? 11 : 8;

/// c0 + x (c1 + x (c2 + ...)): Horner's rule, each step rounded.
template <class C>
SPMD_HD inline C poly(C, C c0) {
  return c0;
}
template <class C, class... R>
SPMD_HD inline C poly(C x, C c0, R... rest) {
  return add(c0, mul(x, poly<C>(x, static_cast<C>(rest)...)));
}

/// Per compute type: its integer, exponent layout and the polynomials (scalars and literals
/// only: nvcc cannot index a constexpr array in device code).
template <class C>
struct fp;
template <>
struct fp<float> {
  using bits_t = std::uint32_t;
  static constexpr int uniform_bits = 24;
  static constexpr float inv_scale = 0x1p-24f;  // 2^-uniform_bits
  static constexpr int mantissa = 23, bias = 127;
  static constexpr bits_t sqrt2_bits = 0x3FB504F3u;  // sqrt(2) rounded down
  static constexpr float ln2_hi = 0.693145751953125f, ln2_lo = 1.428606765330187045e-06f;
  static constexpr float two_pi = 6.28318530717958647692f;
  // ln m = 2s + s z P(z), z = s^2, |s| <= 0.1716: the atanh series' 2 / (2k + 1), k >= 1.
  static constexpr float log_c0 = 2.0f / 3, log_c1 = 2.0f / 5, log_c2 = 2.0f / 7, log_c3 = 2.0f / 9;
  // sin t = t + t u S(u), cos t = 1 + u K(u), u = t^2, |t| <= pi/4: Taylor's coefficients.
  static constexpr float sin_c0 = float(-1.0 / 6), sin_c1 = float(1.0 / 120),
                         sin_c2 = float(-1.0 / 5040), sin_c3 = float(1.0 / 362880);
  static constexpr float cos_c0 = float(-1.0 / 2), cos_c1 = float(1.0 / 24), cos_c2 = float(-1.0 / 720),
                         cos_c3 = float(1.0 / 40320), cos_c4 = float(-1.0 / 3628800);
  // (named, so that the host's vector path, host/random_avx2.hpp, evaluates the same numbers)
  SPMD_HD static float log_poly(float z) { return poly<float>(z, log_c0, log_c1, log_c2, log_c3); }
  SPMD_HD static float sin_poly(float u) { return poly<float>(u, sin_c0, sin_c1, sin_c2, sin_c3); }
  SPMD_HD static float cos_poly(float u) {
    return poly<float>(u, cos_c0, cos_c1, cos_c2, cos_c3, cos_c4);
  }
};
template <>
struct fp<double> {
  using bits_t = std::uint64_t;
  static constexpr int uniform_bits = 53;
  static constexpr double inv_scale = 0x1p-53;
  static constexpr int mantissa = 52, bias = 1023;
  static constexpr bits_t sqrt2_bits = 0x3FF6A09E667F3BCDull;
  static constexpr double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
  static constexpr double two_pi = 6.28318530717958647692;
  SPMD_HD static double log_poly(double z) {
    return poly<double>(z, 2.0 / 3, 2.0 / 5, 2.0 / 7, 2.0 / 9, 2.0 / 11, 2.0 / 13, 2.0 / 15,
                        2.0 / 17, 2.0 / 19, 2.0 / 21);
  }
  SPMD_HD static double sin_poly(double u) {
    return poly<double>(u, -1.0 / 6, 1.0 / 120, -1.0 / 5040, 1.0 / 362880, -1.0 / 39916800,
                        1.0 / 6227020800.0, -1.0 / 1307674368000.0, 1.0 / 355687428096000.0,
                        -1.0 / 121645100408832000.0);
  }
  SPMD_HD static double cos_poly(double u) {
    return poly<double>(u, -1.0 / 2, 1.0 / 24, -1.0 / 720, 1.0 / 40320, -1.0 / 3628800,
                        1.0 / 479001600, -1.0 / 87178291200.0, 1.0 / 20922789888000.0,
                        -1.0 / 6402373705728000.0);
  }
};

/// ln(n * 2^-bits) for an integer n in [1, 2^bits] (bits = fp<C>::uniform_bits): exact
/// exponent from n's bits, then the atanh series on the mantissa in [sqrt(1/2), sqrt(2)).
template <class C>
SPMD_HD inline C log_scaled(typename fp<C>::bits_t n) {
  using F = fp<C>;
  using U = typename F::bits_t;
  const U bits = spmd::detail::bf16_bit_cast<U>(static_cast<C>(n));  // exact: n fits
  int e = static_cast<int>(bits >> F::mantissa) - F::bias;
  U m_bits = (bits & ((U{1} << F::mantissa) - 1)) | (static_cast<U>(F::bias) << F::mantissa);
  // m / 2 when m > sqrt(2), so m is in [sqrt(1/2), sqrt(2)) (no branch: it is a coin flip).
  const U half = m_bits > F::sqrt2_bits ? U{1} : U{0};
  m_bits -= half << F::mantissa;
  e += static_cast<int>(half);
  const C m = spmd::detail::bf16_bit_cast<C>(m_bits);
  const C f = sub(m, C(1));                  // exact (Sterbenz)
  const C s = div(f, add(C(2), f));          // (m - 1) / (m + 1)
  const C z = mul(s, s);
  const C ln_m = add(mul(C(2), s), mul(s, mul(z, F::log_poly(z))));
  const C k = static_cast<C>(e - F::uniform_bits);
  return add(mul(k, F::ln2_hi), add(mul(k, F::ln2_lo), ln_m));
}

/// cos and sin of 2 pi k 2^-bits for an integer k in [0, 2^bits): the quadrant from k's top
/// two bits (exact), the rest centred to [-1/8, 1/8) of a turn, then the Taylor polynomials.
template <class C>
struct cos_sin {
  C c, s;
};
template <class C>
SPMD_HD inline cos_sin<C> cos_sin_turn(typename fp<C>::bits_t k) {
  using F = fp<C>;
  using U = typename F::bits_t;
  constexpr int b = F::uniform_bits;
  const U rest = k & ((U{1} << (b - 2)) - 1);
  using S = std::make_signed_t<U>;
  // Past 1/8 of a turn: -1/8.. of the next quadrant (selects, not branches: random data).
  const U next = rest >= (U{1} << (b - 3)) ? U{1} : U{0};
  const unsigned q = static_cast<unsigned>((k >> (b - 2)) + next) & 3u;
  const S r = static_cast<S>(rest) - static_cast<S>(next << (b - 2));
  const C x = mul(static_cast<C>(r), F::inv_scale);  // r 2^-b, exact
  const C t = mul(x, F::two_pi);
  const C u = mul(t, t);
  const C sn = add(t, mul(t, mul(u, F::sin_poly(u))));
  const C cs = add(C(1), mul(u, F::cos_poly(u)));
  // Quadrant q turns (cos, sin) by q quarter turns: (c, s), (-s, c), (-c, -s), (s, -c).
  // Multiplying by +-1 is exact, so this equals negation bit for bit.
  const C c = (q & 1u) ? sn : cs, s = (q & 1u) ? cs : sn;
  return {mul(c, ((q + 1u) & 2u) ? C(-1) : C(1)), mul(s, (q & 2u) ? C(-1) : C(1))};
}

/// Box-Muller on two integers of `bits` bits: (rho cos phi, rho sin phi), rho =
/// sqrt(-2 ln u1), u1 = (a + 1) 2^-bits in (0, 1], phi = 2 pi b 2^-bits.
template <class C>
SPMD_HD inline cos_sin<C> box_muller(typename fp<C>::bits_t a, typename fp<C>::bits_t b) {
  const C rho = sqrt_rn(sub(C(0), mul(C(2), log_scaled<C>(a + 1))));  // 0 - 0 is +0
  const cos_sin<C> cs = cos_sin_turn<C>(b);
  return {mul(rho, cs.c), mul(rho, cs.s)};
}

/// The `bits`-bit integer of one (f32) or two (f64: low word first) words.
SPMD_HD inline std::uint32_t low_bits(std::uint32_t w, int bits) {
  return w & ((std::uint32_t{1} << bits) - 1u);
}
SPMD_HD inline std::uint64_t low_bits53(std::uint32_t lo, std::uint32_t hi) {
  return ((std::uint64_t{hi} << 32) | lo) & ((std::uint64_t{1} << 53) - 1u);
}

/// C to T (RNE for the 16-bit types).
template <class T, class C>
SPMD_HD inline T to_element(C v) {
  if constexpr (std::is_same_v<T, C>) return v;
  else return T(v);
}

/// from + x (to - from) in C, kept below `to` (a value that rounds up to `to` becomes
/// `from`, as PyTorch's CUDA kernels do).
template <class T>
SPMD_HD inline T uniform_value(const draw& d, compute_t<T> x01) {
  using C = compute_t<T>;
  const C from = static_cast<C>(d.a), to = static_cast<C>(d.b);
  const T v = to_element<T>(add(mul(x01, sub(to, from)), from));
  return v == to_element<T>(to) ? to_element<T>(from) : v;
}
template <class T>
SPMD_HD inline T normal_value(const draw& d, compute_t<T> z) {
  using C = compute_t<T>;
  return to_element<T>(add(mul(z, static_cast<C>(d.b)), static_cast<C>(d.a)));
}

}  // namespace detail

/// Word `lane` of a block, by constant indices (a device array indexed at run time would be
/// copied to local memory).
SPMD_HD inline std::uint32_t word_of(const philox_block& w, int lane) {
  return lane == 0 ? w[0] : lane == 1 ? w[1] : lane == 2 ? w[2] : w[3];
}

/// Elements one Philox block fills: 4 / words_per_element.
template <class T>
SPMD_HD constexpr int elements_per_block(distribution d) {
  return 4 / words_per_element(d, sizeof(T));
}

namespace detail {
/// A bernoulli element from its word: 1 below the threshold, else 0.
template <class T>
SPMD_HD inline T bernoulli_of(const draw& d, std::uint32_t word) {
  return T(word < d.threshold ? 1.0f : 0.0f);
}
/// A uniform element of a one-word type (f32, f16, bf16) from its word: its low `digits`
/// bits as k 2^-digits, then uniform_value.
/// Unit: the caller knows the range is [0, 1) (from 0, to 1), where uniform_value is the
/// identity (x * 1 + 0 is exact, and x, a multiple of 2^-digits below 1, is a T below `to`).
template <class T, bool Unit = false>
SPMD_HD inline T uniform_of(const draw& d, std::uint32_t word) {
  constexpr int bits = digits<T>;
  const float x01 = mul(static_cast<float>(low_bits(word, bits)), 1.0f / static_cast<float>(std::uint32_t{1} << bits));
  if constexpr (Unit) return to_element<T>(x01);
  else return uniform_value<T>(d, x01);
}
}  // namespace detail

/// Element `lane` of the block of words `w` (uniform, normal, bernoulli).
template <class T>
SPMD_HD inline T draw_in_block(const draw& d, const philox_block& w, int lane) {
  using C = detail::compute_t<T>;
  if (d.dist == distribution::bernoulli) return detail::bernoulli_of<T>(d, word_of(w, lane));
  if constexpr (std::is_same_v<C, double>) {
    const std::uint64_t a = detail::low_bits53(w[0], w[1]), b = detail::low_bits53(w[2], w[3]);
    if (d.dist == distribution::uniform) {
      const std::uint64_t k = lane == 0 ? a : b;
      return detail::uniform_value<T>(d, detail::mul(static_cast<C>(k), detail::fp<double>::inv_scale));
    }
    const detail::cos_sin<C> z = detail::box_muller<C>(a, b);
    return detail::normal_value<T>(d, lane == 0 ? z.c : z.s);
  } else {
    if (d.dist == distribution::uniform) return detail::uniform_of<T>(d, word_of(w, lane));
    const int p = lane & ~1;
    const detail::cos_sin<C> z =
        detail::box_muller<C>(detail::low_bits(w[p], 24), detail::low_bits(w[p + 1], 24));
    return detail::normal_value<T>(d, (lane & 1) ? z.s : z.c);
  }
}

/// Every element of the block of words `w`, in lane order (elements_per_block of them):
/// draw_in_block's value for each lane, with a normal pair's Box-Muller computed once for
/// both of its lanes (the device's factories draw a whole block per thread). The
/// distribution is fixed at compile time (Dist: uniform, normal or bernoulli; Unit: a
/// uniform over [0, 1), as uniform_of), so a kernel made for one tests nothing per block.
template <distribution Dist, bool Unit, class T>
SPMD_HD inline void draw_block_as(const draw& d, const philox_block& w, T (&out)[4]) {
  static_assert(Dist != distribution::dropout, "spmd::random::draw_block_as: dropout reads its input (dropout_in_block).");
  static_assert(!Unit || Dist == distribution::uniform, "spmd::random::draw_block_as: Unit is a uniform's range.");
  using C = detail::compute_t<T>;
  if constexpr (Dist == distribution::normal) {
    if constexpr (std::is_same_v<C, double>) {
      const detail::cos_sin<C> z = detail::box_muller<C>(detail::low_bits53(w[0], w[1]), detail::low_bits53(w[2], w[3]));
      out[0] = detail::normal_value<T>(d, z.c);
      out[1] = detail::normal_value<T>(d, z.s);
    } else {
      SPMD_UNROLL
      for (int p = 0; p < 4; p += 2) {
        const detail::cos_sin<C> z =
            detail::box_muller<C>(detail::low_bits(w[p], 24), detail::low_bits(w[p + 1], 24));
        out[p] = detail::normal_value<T>(d, z.c);
        out[p + 1] = detail::normal_value<T>(d, z.s);
      }
    }
  } else if constexpr (Dist == distribution::bernoulli) {
    SPMD_UNROLL
    for (int lane = 0; lane < 4; ++lane) out[lane] = detail::bernoulli_of<T>(d, w[lane]);
  } else if constexpr (std::is_same_v<C, double>) {
    SPMD_UNROLL
    for (int lane = 0; lane < 2; ++lane) {
      const C x01 = detail::mul(static_cast<C>(detail::low_bits53(w[2 * lane], w[2 * lane + 1])), detail::fp<double>::inv_scale);
      if constexpr (Unit) out[lane] = detail::to_element<T>(x01);
      else out[lane] = detail::uniform_value<T>(d, x01);
    }
  } else {
    SPMD_UNROLL
    for (int lane = 0; lane < 4; ++lane) out[lane] = detail::uniform_of<T, Unit>(d, w[lane]);
  }
}
/// draw_block_as for the draw's own distribution (tested once for the block, not once a lane:
/// nvcc kept the test in each lane of the unrolled loop).
template <class T>
SPMD_HD inline void draw_block(const draw& d, const philox_block& w, T (&out)[4]) {
  if (d.dist == distribution::normal) draw_block_as<distribution::normal, false>(d, w, out);
  else if (d.dist == distribution::bernoulli) draw_block_as<distribution::bernoulli, false>(d, w, out);
  else draw_block_as<distribution::uniform, false>(d, w, out);
}
/// Whether a uniform draw's range is [0, 1), where uniform_of<T, true> gives its values.
SPMD_HD inline bool unit_range(const draw& d) {
  return d.dist == distribution::uniform && d.a == 0 && d.b == 1;
}

/// The Philox block element i of the operator reads.
template <class T>
SPMD_HD inline philox_block block_of(const draw& d, std::uint64_t i) {
  return philox_stream_block(d.seed, d.offset / 4 + i / static_cast<unsigned>(elements_per_block<T>(d.dist)));
}

/// Element i of the global tensor (row-major index) of a uniform, normal or bernoulli draw.
template <class T>
SPMD_HD inline T draw_at(const draw& d, std::uint64_t i) {
  return draw_in_block<T>(d, block_of<T>(d, i), static_cast<int>(i % static_cast<unsigned>(elements_per_block<T>(d.dist))));
}

/// Dropout of x, element i of the global tensor (dropout_at), or lane `lane` of the block of
/// words `w` that holds it (dropout_in_block): x * (1 / (1 - p)) where kept, x * 0 where
/// dropped (so NaN stays NaN, as in PyTorch); p = 1 gives +0 everywhere (PyTorch's zeros).
template <class T>
SPMD_HD inline T dropout_in_block(const draw& d, const philox_block& w, int lane, T x) {
  using C = detail::compute_t<T>;
  if (d.threshold >> 32) return T(0.0f);
  const bool keep = word_of(w, lane) >= d.threshold;
  const C scale = detail::div(C(1), detail::sub(C(1), static_cast<C>(d.a)));
  return detail::to_element<T>(detail::mul(static_cast<C>(x), keep ? scale : C(0)));
}
template <class T>
SPMD_HD inline T dropout_at(const draw& d, std::uint64_t i, T x) {
  return dropout_in_block<T>(d, philox_stream_block(d.seed, d.offset / 4 + i / 4), static_cast<int>(i % 4), x);
}

}  // namespace spmd::random
