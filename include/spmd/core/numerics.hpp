// spmd/core/numerics.hpp — the arithmetic every backend shares: NaN-propagating max/min,
// wrapping signed integer arithmetic, sign bits. Host, device and constant evaluation.
//
//   spmd::maximum(1.f, NAN)     // NaN (torch.maximum), whichever side it is on
//   spmd::maximum(-0.f, +0.f)   // +0 (IEEE 754-2019 maximum), whichever order
//   spmd::wrap_add(INT32_MAX, 1) // INT32_MIN (PyTorch's CPU integers wrap)
//
// Why one header: a reduction must give the same bits in the simulation, in a CUDA kernel
// and in an MPI_Op, whatever order the ranks come in. docs/numerics.md states the rules.
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/float16.hpp"
#include "spmd/core/config.hpp"

namespace spmd {

/// Signed integer arithmetic through an unsigned type at least as wide as `unsigned`: wraps
/// modulo 2^bits instead of overflowing (UB). Narrow types are widened first, since their
/// unsigned forms promote to (signed) int, where a product can overflow.
template <class T>
using wrap_unsigned_t =
    std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

template <class T>
SPMD_HD constexpr T wrap_add(T a, T b) {
  using U = wrap_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
}
template <class T>
SPMD_HD constexpr T wrap_sub(T a, T b) {
  using U = wrap_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) - static_cast<U>(b));
}
template <class T>
SPMD_HD constexpr T wrap_mul(T a, T b) {
  using U = wrap_unsigned_t<T>;
  return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
}

/// True for NaN (of float, double, bfloat16); false for every integer.
template <class T>
SPMD_HD constexpr bool is_nan(T x) {
  if constexpr (std::is_integral_v<T>) return false;
  else return !(x == x);
}

/// The sign bit (true for -0.0, -inf, negative numbers and NaNs with the bit set).
template <class T>
SPMD_HD constexpr bool sign_bit(T x) {
  if constexpr (is_narrow_float<T>) return (x.bits >> 15) != 0;
  else if constexpr (std::is_same_v<T, float>) return (detail::bf16_bit_cast<std::uint32_t>(x) >> 31) != 0;
  else if constexpr (std::is_same_v<T, double>) return (detail::bf16_bit_cast<std::uint64_t>(x) >> 63) != 0;
  else return x < T(0);
}

/// max(a, b) as torch.maximum: NaN if either is NaN (the canonical quiet NaN, so the bits do
/// not depend on which side held it), +0 over -0 (IEEE 754-2019 maximum; torch leaves the
/// sign of max(-0, +0) to its kernel). Commutative and associative, bit for bit, so any
/// order of ranks gives the same result.
template <class T>
SPMD_HD constexpr T maximum(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return a < b ? b : a;
  } else {
    if (is_nan(a) || is_nan(b)) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return sign_bit(a) ? b : a;  // equal: differ only in a zero's sign
    return a < b ? b : a;
  }
}

/// min(a, b) as torch.minimum: NaN if either is NaN, -0 under +0.
template <class T>
SPMD_HD constexpr T minimum(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return b < a ? b : a;
  } else {
    if (is_nan(a) || is_nan(b)) return std::numeric_limits<T>::quiet_NaN();
    if (a == b) return sign_bit(a) ? a : b;
    return b < a ? b : a;
  }
}

}  // namespace spmd
