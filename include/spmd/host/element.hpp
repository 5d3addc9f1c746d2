// spmd/host/element.hpp — element types of the simulation and their reductions.
//
// An element is any arithmetic type, spmd::bfloat16 or spmd::float16 (tested: float, double,
// int32_t, int64_t, bfloat16, float16). Reductions combine two values in the element type (the
// 16-bit floats: through float, rounded after every combine, as a device reduction in them
// would).
#pragma once

#include <concepts>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/float16.hpp"
#include "spmd/core/numerics.hpp"
#include "spmd/core/placement.hpp"

namespace spmd::host {

template <class T>
concept element = (std::is_arithmetic_v<T> && !std::is_same_v<T, bool>) || is_narrow_float<T>;

/// The element type of a contiguous range: what std::data points to.
template <class R>
using range_element_t = std::remove_cv_t<std::remove_pointer_t<decltype(std::data(std::declval<const R&>()))>>;

/// A contiguous range of elements: anything std::data and std::size (declared by <string>)
/// take: a C array, std::vector, std::array, std::span, an initializer list. Not
/// std::ranges::contiguous_range: <ranges> (and <iterator>, with its stream iterators) cost
/// a quarter of a second in every unit that includes a backend.
template <class R>
concept element_range = requires(const R& r) {
  { std::data(r) } -> std::convertible_to<const void*>;
  { std::size(r) } -> std::convertible_to<std::size_t>;
} && element<range_element_t<R>>;

/// A short name of an element type ("f32", "bf16", "i64", ...), for messages.
template <element T>
constexpr const char* element_name() {
  if constexpr (std::is_same_v<T, bfloat16>) return "bf16";
  else if constexpr (std::is_same_v<T, float16>) return "f16";
  else if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, double>) return "f64";
  else if constexpr (std::is_floating_point_v<T>) return "float";
  else if constexpr (std::is_signed_v<T>)
    return sizeof(T) == 1 ? "i8" : sizeof(T) == 2 ? "i16" : sizeof(T) == 4 ? "i32" : "i64";
  else
    return sizeof(T) == 1 ? "u8" : sizeof(T) == 2 ? "u16" : sizeof(T) == 4 ? "u32" : "u64";
}

/// The identity of `op` for T: what a rank holds for "no contribution" when a redistribute
/// fills or partitions. -0 for a floating-point sum (x + -0 is x for every x, -0 included,
/// so a round trip through P(sum) keeps every bit; +0 would turn a -0 into +0), 0 for
/// integers and avg, 1 for product, -inf (lowest for integers) for max, +inf (max) for min.
template <element T>
SPMD_HD constexpr T identity(reduce_op op) {
  using L = std::numeric_limits<T>;
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg: return std::is_integral_v<T> ? T(0) : T(-0.0f);
    case reduce_op::product: return T(1);
    case reduce_op::max: return L::has_infinity ? -L::infinity() : L::lowest();
    case reduce_op::min: return L::has_infinity ? L::infinity() : L::max();
  }
  return T(0);
}

/// Where a local reduction over a tensor's elements starts: as identity(), but +0 for a sum
/// (ATen's sum starts from +0: torch.sum of an empty tensor or of [-0.0] is +0.0).
template <element T>
constexpr T reduction_start(reduce_op op) {
  return op == reduce_op::sum || op == reduce_op::avg ? T(0) : identity<T>(op);
}

/// One combine of `op` (avg combines as sum; the division comes last). Integers wrap;
/// max and min propagate NaN and order signed zeros (core/numerics.hpp), so the result is
/// the same bits whatever order the ranks come in.
template <reduce_op Op, element T>
SPMD_HD constexpr T combine(T a, T b) {
  if constexpr (Op == reduce_op::sum || Op == reduce_op::avg) {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return spmd::wrap_add(a, b);
    else return static_cast<T>(a + b);
  } else if constexpr (Op == reduce_op::product) {
    if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return spmd::wrap_mul(a, b);
    else return static_cast<T>(a * b);
  } else if constexpr (Op == reduce_op::max) {
    return spmd::maximum(a, b);
  } else {
    return spmd::minimum(a, b);
  }
}

/// Throws std::invalid_argument, naming `where` and T, when `op` is avg and T an integer
/// type: spmd has no integer average (the compile-time paths static_assert the same).
template <element T>
void check_reduce_op(reduce_op op, const char* where) {
  if (std::is_integral_v<T> && op == reduce_op::avg)
    throw std::invalid_argument(std::string(where) + ": P(avg) needs a floating-point element type, not " +
                                element_name<T>() + " (the average of integers is not an integer; "
                                "torch.mean refuses integer tensors)");
}

/// a / n, the last step of avg (integers truncate).
template <element T>
SPMD_HD constexpr T divide(T a, index_t n) {
  if constexpr (is_narrow_float<T>) return T{float(a) / static_cast<float>(n)};
  else return static_cast<T>(a / static_cast<T>(n));
}

/// a * n, what fill stores for avg so that the average is a.
template <element T>
SPMD_HD constexpr T times(T a, index_t n) {
  if constexpr (is_narrow_float<T>) return T{float(a) * static_cast<float>(n)};
  else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) return spmd::wrap_mul(a, static_cast<T>(n));
  else return static_cast<T>(a * static_cast<T>(n));
}

/// Element conversion for forward_dtype (the 16-bit floats in and out through float).
template <element To, element From>
constexpr To convert(From v) {
  if constexpr (std::is_same_v<To, From>) return v;
  else if constexpr (is_narrow_float<From>) return static_cast<To>(float(v));
  else return static_cast<To>(v);
}

}  // namespace spmd::host
