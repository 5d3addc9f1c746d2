// spmd/core/float16.hpp — IEEE 754 binary16 ("half", torch.float16).
//
//   spmd::float16 h{0.1f};               // round to nearest, ties to even (subnormals kept)
//   float f = h;                          // exact (every float16 is a float)
//   h = h + spmd::float16{2.0f};           // arithmetic through float, rounded once
//
// Like spmd::bfloat16 (core/bfloat16.hpp): one std::uint16_t, trivially copyable, constexpr
// conversions usable on host and device. From double the rounding is exact too (round to odd
// at float precision first: float keeps 13 more bits than binary16). NaN stays NaN (quiet,
// sign kept); values from 65520 up round to infinity, as IEEE does.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/config.hpp"

namespace spmd {

struct float16 : detail::through_float<float16> {
  std::uint16_t bits;  // no initializer: trivial, like float (`float16{}` is +0)

  float16() = default;
  /// From float, round to nearest even.
  SPMD_HD constexpr explicit float16(float f) : bits(round_bits(f)) {}
  /// From double, correctly rounded (no double rounding through float).
  SPMD_HD constexpr explicit float16(double d) : bits(round_bits(bfloat16::to_odd_float(d))) {}
  /// From an integer, through double.
  template <std::integral I>
  SPMD_HD constexpr explicit float16(I v) : float16(static_cast<double>(v)) {}

  SPMD_HD static constexpr float16 from_bits(std::uint16_t b) {
    float16 h{};
    h.bits = b;
    return h;
  }

  /// Exact.
  SPMD_HD constexpr operator float() const {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t e = (bits >> 10) & 0x1fu, m = bits & 0x3ffu;
    if (e == 0x1f) return detail::bf16_bit_cast<float>(sign | 0x7f800000u | (m << 13));  // inf, NaN
    if (e == 0) {  // zero or subnormal: m * 2^-24, exact in float
      const float v = static_cast<float>(m) * 5.9604644775390625e-8f;
      return sign != 0 ? -v : v;
    }
    return detail::bf16_bit_cast<float>(sign | ((e + 112u) << 23) | (m << 13));
  }

  /// Round-to-nearest-even of a float to binary16.
  SPMD_HD static constexpr std::uint16_t round_bits(float f) {
    const std::uint32_t u = detail::bf16_bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
    if (a > 0x7f800000u)  // NaN: keep the sign and the payload's top bits, force quiet
      return static_cast<std::uint16_t>(sign | 0x7e00u | ((a >> 13) & 0x3ffu));
    if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: inf
    if (a >= 0x38800000u) {  // normal: rebias the exponent, round away 13 bits
      std::uint32_t r = a - 0x38000000u;
      r += 0x0fffu + ((r >> 13) & 1u);
      return static_cast<std::uint16_t>(sign | (r >> 13));
    }
    if (a <= 0x33000000u) return static_cast<std::uint16_t>(sign);  // <= 2^-25: to (signed) zero
    // Subnormal: the value in units of 2^-24, rounded to nearest even.
    const std::uint32_t exp = a >> 23, mant = (a & 0x7fffffu) | 0x800000u;
    const std::uint32_t shift = 126u - exp;  // 14 .. 24
    std::uint32_t q = mant >> shift;
    const std::uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u) != 0)) ++q;
    return static_cast<std::uint16_t>(sign | q);
  }

  // Arithmetic and comparisons: detail::through_float (core/bfloat16.hpp).
};

static_assert(sizeof(float16) == 2 && std::is_trivially_copyable_v<float16>);

/// The 16-bit floats (bfloat16, float16): stored narrow, computed in float.
template <class T>
inline constexpr bool is_narrow_float = std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

/// Floating-point element types: float, double and the 16-bit floats.
template <class T>
inline constexpr bool is_floating_element = std::is_floating_point_v<T> || is_narrow_float<T>;

}  // namespace spmd

/// numeric_limits for float16: IEEE binary16.
template <>
class std::numeric_limits<spmd::float16> {
  using T = spmd::float16;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr bool is_iec559 = true;
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 11;
  static constexpr int digits10 = 3;
  static constexpr int max_digits10 = 5;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -13;
  static constexpr int min_exponent10 = -4;
  static constexpr int max_exponent = 16;
  static constexpr int max_exponent10 = 4;
  static constexpr std::float_round_style round_style = std::round_to_nearest;

  static constexpr T min() noexcept { return T::from_bits(0x0400); }          // 2^-14
  static constexpr T lowest() noexcept { return T::from_bits(0xfbff); }       // -65504
  static constexpr T max() noexcept { return T::from_bits(0x7bff); }          // 65504
  static constexpr T epsilon() noexcept { return T::from_bits(0x1400); }      // 2^-10
  static constexpr T round_error() noexcept { return T::from_bits(0x3800); }  // 0.5
  static constexpr T infinity() noexcept { return T::from_bits(0x7c00); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7e00); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7d00); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }   // 2^-24
};
