// spmd/core/bfloat16.hpp — a 16-bit brain float: the upper half of an IEEE binary32.
//
//   spmd::bfloat16 h{3.14159f};          // round to nearest, ties to even
//   float f = h;                          // exact (every bfloat16 is a float)
//   h = h * spmd::bfloat16{2.0f};          // arithmetic through float, rounded once
//   std::numeric_limits<spmd::bfloat16>::lowest();
//
// Storage is one std::uint16_t (trivially copyable; memcpy'd by the backends). Conversions
// are constexpr through __builtin_bit_cast (host, device and constant evaluation). From
// float the rounding is exact RNE; from double it is exact too (round to odd at float
// precision first, so there is no double rounding). NaN stays NaN (quiet, sign kept);
// overflow rounds to infinity as IEEE does.
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "spmd/core/config.hpp"

namespace spmd {

namespace detail {
/// std::bit_cast, callable in device code (nvcc treats std::bit_cast as host-only).
template <class To, class From>
SPMD_HD constexpr To bf16_bit_cast(const From& v) {
  static_assert(sizeof(To) == sizeof(From));
  return __builtin_bit_cast(To, v);
}
/// The arithmetic of a 16-bit float D (bfloat16, float16): through float, rounded once to D;
/// negation flips the sign bit; comparisons as floats (NaN unordered, -0 == +0). D has a
/// `bits` member, `from_bits`, an explicit constructor from float and a conversion to float.
template <class D>
struct through_float {
  SPMD_HD friend constexpr D operator+(D a, D b) { return D{float(a) + float(b)}; }
  SPMD_HD friend constexpr D operator-(D a, D b) { return D{float(a) - float(b)}; }
  SPMD_HD friend constexpr D operator*(D a, D b) { return D{float(a) * float(b)}; }
  SPMD_HD friend constexpr D operator/(D a, D b) { return D{float(a) / float(b)}; }
  SPMD_HD friend constexpr D operator-(D a) { return D::from_bits(static_cast<std::uint16_t>(a.bits ^ 0x8000u)); }
  SPMD_HD friend constexpr D operator+(D a) { return a; }
  SPMD_HD friend constexpr D& operator+=(D& a, D b) { return a = a + b; }
  SPMD_HD friend constexpr D& operator-=(D& a, D b) { return a = a - b; }
  SPMD_HD friend constexpr D& operator*=(D& a, D b) { return a = a * b; }
  SPMD_HD friend constexpr D& operator/=(D& a, D b) { return a = a / b; }
  SPMD_HD friend constexpr bool operator==(D a, D b) { return float(a) == float(b); }
  SPMD_HD friend constexpr bool operator<(D a, D b) { return float(a) < float(b); }
  SPMD_HD friend constexpr bool operator>(D a, D b) { return float(a) > float(b); }
  SPMD_HD friend constexpr bool operator<=(D a, D b) { return float(a) <= float(b); }
  SPMD_HD friend constexpr bool operator>=(D a, D b) { return float(a) >= float(b); }
};
}  // namespace detail

struct bfloat16 : detail::through_float<bfloat16> {
  std::uint16_t bits;  // no initializer: trivial, like float (`bfloat16{}` is +0)

  bfloat16() = default;
  /// From float, round to nearest even.
  SPMD_HD constexpr explicit bfloat16(float f) : bits(round_bits(f)) {}
  /// From double, correctly rounded (no double rounding through float).
  SPMD_HD constexpr explicit bfloat16(double d) : bits(round_bits(to_odd_float(d))) {}
  /// From an integer, through double (exact for |v| <= 2^53).
  template <std::integral I>
  SPMD_HD constexpr explicit bfloat16(I v) : bfloat16(static_cast<double>(v)) {}

  SPMD_HD static constexpr bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h{};
    h.bits = b;
    return h;
  }

  /// Exact: a bfloat16 is a float whose low 16 bits are zero.
  SPMD_HD constexpr operator float() const {
    return detail::bf16_bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }

  /// Round-to-nearest-even of a float's upper half. NaN stays a quiet NaN.
  SPMD_HD static constexpr std::uint16_t round_bits(float f) {
    const std::uint32_t u = detail::bf16_bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)  // NaN: keep sign and payload top, force quiet
      return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    const std::uint32_t bias = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>((u + bias) >> 16);
  }

  /// The float nearest to d, except that an inexact result has its last bit set (round
  /// to odd): rounding that to bfloat16 then equals rounding d directly, because float
  /// keeps 16 more bits than bfloat16.
  SPMD_HD static constexpr float to_odd_float(double d) {
    const float f = static_cast<float>(d);
    const double back = static_cast<double>(f);
    if (back == d || d != d) return f;  // exact, or NaN
    std::uint32_t u = detail::bf16_bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) == 0x7f800000u) return f;  // overflowed to infinity
    if ((u & 1u) == 0) {
      const bool rounded_away = (back < 0 ? -back : back) > (d < 0 ? -d : d);
      u = rounded_away ? u - 1 : u + 1;  // the odd neighbour on d's side
    }
    return detail::bf16_bit_cast<float>(u);
  }

  // Arithmetic and comparisons: detail::through_float (through float, rounded once).
};

static_assert(sizeof(bfloat16) == 2 && std::is_trivially_copyable_v<bfloat16>);

}  // namespace spmd

/// numeric_limits for bfloat16: 8 significant bits, float's exponent range.
template <>
class std::numeric_limits<spmd::bfloat16> {
  using T = spmd::bfloat16;

 public:
  static constexpr bool is_specialized = true;
  static constexpr bool is_signed = true;
  static constexpr bool is_integer = false;
  static constexpr bool is_exact = false;
  static constexpr bool has_infinity = true;
  static constexpr bool has_quiet_NaN = true;
  static constexpr bool has_signaling_NaN = true;
  static constexpr bool is_iec559 = false;  // not an IEEE 754 interchange format
  static constexpr bool is_bounded = true;
  static constexpr bool is_modulo = false;
  static constexpr int digits = 8;
  static constexpr int digits10 = 2;
  static constexpr int max_digits10 = 4;
  static constexpr int radix = 2;
  static constexpr int min_exponent = -125;
  static constexpr int min_exponent10 = -37;
  static constexpr int max_exponent = 128;
  static constexpr int max_exponent10 = 38;
  static constexpr std::float_round_style round_style = std::round_to_nearest;

  static constexpr T min() noexcept { return T::from_bits(0x0080); }         // 2^-126
  static constexpr T lowest() noexcept { return T::from_bits(0xff7f); }      // -max()
  static constexpr T max() noexcept { return T::from_bits(0x7f7f); }         // (2 - 2^-7) 2^127
  static constexpr T epsilon() noexcept { return T::from_bits(0x3c00); }     // 2^-7
  static constexpr T round_error() noexcept { return T::from_bits(0x3f00); } // 0.5
  static constexpr T infinity() noexcept { return T::from_bits(0x7f80); }
  static constexpr T quiet_NaN() noexcept { return T::from_bits(0x7fc0); }
  static constexpr T signaling_NaN() noexcept { return T::from_bits(0x7fa0); }
  static constexpr T denorm_min() noexcept { return T::from_bits(0x0001); }   // 2^-133
};
