// spmd/sim/element.hpp — element types of the simulation and their reductions.
//
// An element is any arithmetic type or spmd::bfloat16 (tested: float, double, int32_t,
// int64_t, bfloat16). Reductions combine two values in the element type (bfloat16: through
// float, rounded after every combine, as a device reduction in bfloat16 would).
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/placement.hpp"

namespace spmd::sim {

template <class T>
concept element = (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) ||
                  std::is_same_v<T, bfloat16>;

/// A short name of an element type ("f32", "bf16", "i64", ...), for messages.
template <element T>
constexpr const char* element_name() {
  if constexpr (std::is_same_v<T, bfloat16>) return "bf16";
  else if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, double>) return "f64";
  else if constexpr (std::is_floating_point_v<T>) return "float";
  else if constexpr (std::is_signed_v<T>)
    return sizeof(T) == 1 ? "i8" : sizeof(T) == 2 ? "i16" : sizeof(T) == 4 ? "i32" : "i64";
  else
    return sizeof(T) == 1 ? "u8" : sizeof(T) == 2 ? "u16" : sizeof(T) == 4 ? "u32" : "u64";
}

/// The identity of `op` for T: 0 for sum and avg, 1 for product, -inf (or lowest, for
/// types without infinity) for max, +inf (or max) for min.
template <element T>
constexpr T identity(reduce_op op) {
  using L = std::numeric_limits<T>;
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg: return T(0);
    case reduce_op::product: return T(1);
    case reduce_op::max: return L::has_infinity ? -L::infinity() : L::lowest();
    case reduce_op::min: return L::has_infinity ? L::infinity() : L::max();
  }
  return T(0);
}

/// One combine of `op` (avg combines as sum; the division comes last).
template <reduce_op Op, element T>
constexpr T combine(T a, T b) {
  if constexpr (Op == reduce_op::sum || Op == reduce_op::avg) {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)  // wrap, never UB
      return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) +
                            static_cast<std::make_unsigned_t<T>>(b));
    else
      return static_cast<T>(a + b);
  } else if constexpr (Op == reduce_op::product) {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
      return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) *
                            static_cast<std::make_unsigned_t<T>>(b));
    else
      return static_cast<T>(a * b);
  } else if constexpr (Op == reduce_op::max) {
    return b > a ? b : a;  // keeps a on ties and when b is NaN
  } else {
    return b < a ? b : a;
  }
}

/// a / n, the last step of avg (integers truncate).
template <element T>
constexpr T divide(T a, index_t n) {
  if constexpr (std::is_same_v<T, bfloat16>) return bfloat16{float(a) / static_cast<float>(n)};
  else return static_cast<T>(a / static_cast<T>(n));
}

/// a * n, what fill stores for avg so that the average is a.
template <element T>
constexpr T times(T a, index_t n) {
  if constexpr (std::is_same_v<T, bfloat16>) return bfloat16{float(a) * static_cast<float>(n)};
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) *
                          static_cast<std::make_unsigned_t<T>>(n));
  else return static_cast<T>(a * static_cast<T>(n));
}

/// Element conversion for forward_dtype (bfloat16 in and out through float/double).
template <element To, element From>
constexpr To convert(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (std::is_same_v<From, bfloat16>) return static_cast<To>(float(v));
  else return static_cast<To>(v);
}

}  // namespace spmd::sim
