// spmd/host/partial_split.hpp — the value each member of a Partial group gets when a global
// value is split over it (host/distribute.hpp's table says which), element by element.
//
// Host and device: distribute_tensor splits on the host, distribute_device_tensor on the
// device (backends/cuda/block_body.hpp), with these same functions and so the same bits.
#pragma once

#include <limits>
#include <type_traits>

#include "spmd/core/config.hpp"
#include "spmd/host/element.hpp"

namespace spmd::host::detail {

template <class T>
SPMD_HD constexpr double as_double(T v) {
  if constexpr (is_narrow_float<T>) return static_cast<double>(float(v));
  else return static_cast<double>(v);
}

template <class T>
SPMD_HD constexpr T scaled(T x, int c) {  // x * c, exact when it fits (c = +-1, +-2, 4)
  if constexpr (is_narrow_float<T>) return T{float(x) * static_cast<float>(c)};
  else if constexpr (std::is_integral_v<T>) return static_cast<T>(x * c);
  else return static_cast<T>(x * static_cast<T>(c));
}

/// Coefficient of member j of n in the sum split (host/distribute.hpp's table).
SPMD_HD constexpr int sum_coefficient(index_t j, index_t n) {
  if (n % 2 == 0) {
    if (j == 0) return 2;
    if (j == 1) return -1;
    return j % 2 == 0 ? -2 : 2;
  }
  if (j == 0) return 4;
  if (j == 1) return -2;
  if (j == 2) return -1;
  return j % 2 == 1 ? -2 : 2;
}
SPMD_HD constexpr int zero_coefficient(index_t j, index_t n) {
  if (n % 2 == 0) return j % 2 == 0 ? 1 : -1;
  if (j == 0 || j == 1) return 1;
  if (j == 2) return -2;
  return j % 2 == 1 ? 1 : -1;
}

template <class T>
SPMD_HD constexpr bool fits(T x, double factor) {  // |x * factor| representable, x finite
  const double d = as_double(x);
  if (!(d == d) || d == std::numeric_limits<double>::infinity() ||
      d == -std::numeric_limits<double>::infinity())
    return false;
  return (d < 0 ? -d : d) * factor <= as_double(std::numeric_limits<T>::max());
}

template <class T>
SPMD_HD constexpr T sum_part(T x, index_t j, index_t n) {
  if (n == 1) return x;
  // -0 is a sum only of -0s (any other split rounds to +0): every rank holds it.
  if (x == T(0) && sign_bit(x)) return x;
  if (x == T(0)) return T(zero_coefficient(j, n));
  if (!fits(x, 4.0)) return j == 0 ? x : T(0);
  return scaled(x, sum_coefficient(j, n));
}

template <class T>
SPMD_HD constexpr T partial_part(reduce_op op, T x, index_t j, index_t n, index_t i) {
  if (n == 1) return x;
  switch (op) {
    case reduce_op::sum: return sum_part(x, j, n);
    case reduce_op::avg:
      if (!fits(x, static_cast<double>(n) * 4.0)) return j == 0 ? times(x, n) : T(0);
      return sum_part(times(x, n), j, n);
    case reduce_op::max:
    case reduce_op::min: {
      const index_t holder = i % n;
      if (j == holder) return x;
      const index_t k = (j - holder + n) % n;  // 1 .. n-1
      const bool up = op == reduce_op::min;
      if constexpr (std::is_integral_v<T>) {
        using L = std::numeric_limits<T>;
        if (up) return x <= L::max() - static_cast<T>(k) ? static_cast<T>(x + k) : L::max();
        return x >= L::lowest() + static_cast<T>(k) ? static_cast<T>(x - k) : L::lowest();
      } else {
        const double d = as_double(x);
        if (!fits(x, 1.0)) return identity<T>(op);  // +-inf, NaN: the identity is <= / >= x
        const double step = ((d < 0 ? -d : d) + 1.0) * static_cast<double>(k);
        return static_cast<T>(up ? d + step : d - step);
      }
    }
    case reduce_op::product:
      if (x == T(0)) return j == 0 ? T(2) : j == 1 ? x : T(1);  // 2 * ±0 * 1: the sign kept
      if constexpr (std::is_integral_v<T>) {
        if (x == std::numeric_limits<T>::lowest()) return j == 0 ? x : T(1);
        return j == 0 ? static_cast<T>(-x) : j == 1 ? T(-1) : T(1);
      } else {
        if (!fits(x, 2.0)) return j == 0 ? x : T(1);
        return j == 0 ? scaled(x, 2) : j == 1 ? static_cast<T>(0.5) : T(1);
      }
  }
  return x;
}

}  // namespace spmd::host::detail
