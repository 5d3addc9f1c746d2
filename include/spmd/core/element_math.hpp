// spmd/core/element_math.hpp — the elementwise functions' arithmetic, one definition for the
// host kernels (runtime/ops/elementwise.hpp) and the device kernels (backends/cuda/kernels/):
// host-and-device functions, no exceptions, no allocation. The operator tags of
// spmd/ops/elementwise.hpp name their function here (`id`).
//
// bfloat16 and float16 compute in float and round once; signed integers wrap (as the reductions do);
// maximum/minimum propagate NaN (core/numerics.hpp); gelu is the erf form (torch's
// approximate='none'). On the device, exp, log, tanh, erf and sqrt are CUDA's, whose results
// may differ from the host C library's in the last place (docs/backends.md).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/float16.hpp"
#include "spmd/core/config.hpp"
#include "spmd/core/numerics.hpp"

namespace spmd {

enum class unary_fn : std::uint8_t { neg, abs, exp, log, sqrt, relu, gelu, tanh, sigmoid, gelu_tanh };
// The *_backward functions are the derivatives the autograd layer needs that no composition
// of the others gives in one pass (runtime/autograd/): f(g, x) = g · f'(x), with PyTorch's
// formulas (threshold_backward, GeluBackward); `equal` is 1 where a == b, else 0 (the
// tie mask of max/min's backward); `sign_mul` is g · sign(x) (abs's backward, 0 at 0).
enum class binary_fn : std::uint8_t {
  add, sub, mul, div, maximum, minimum,
  relu_backward, gelu_backward, gelu_tanh_backward, equal, sign_mul, expand_as
};

namespace element_math {

/// Where the arithmetic happens: the 16-bit floats in float (rounded once at the end), others as is.
template <class T>
using calc_t = std::conditional_t<is_narrow_float<T>, float, T>;

template <class T>
inline constexpr bool is_signed_int = std::is_integral_v<T> && std::is_signed_v<T>;

/// f(x) in the calculation type C.
template <unary_fn F, class C>
SPMD_HD constexpr C unary_value(C x) {
  if constexpr (F == unary_fn::neg) {
    if constexpr (is_signed_int<C>) return spmd::wrap_sub(C(0), x);
    else return -x;
  } else if constexpr (F == unary_fn::abs) {
    if constexpr (is_signed_int<C>) return x < 0 ? spmd::wrap_sub(C(0), x) : x;
    else return std::fabs(x);
  } else if constexpr (F == unary_fn::relu) {
    return x < C(0) ? C(0) : x;  // NaN stays NaN (x < 0 is false)
  } else if constexpr (F == unary_fn::exp) {
    return std::exp(x);
  } else if constexpr (F == unary_fn::log) {
    return std::log(x);
  } else if constexpr (F == unary_fn::sqrt) {
    return std::sqrt(x);
  } else if constexpr (F == unary_fn::tanh) {
    return std::tanh(x);
  } else if constexpr (F == unary_fn::sigmoid) {
    return C(1) / (C(1) + std::exp(-x));
  } else if constexpr (F == unary_fn::gelu_tanh) {
    // torch's gelu(approximate='tanh'): 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))).
    const C inner = C(0.79788456080286535588) * (x + C(0.044715) * x * x * x);
    return C(0.5) * x * (C(1) + std::tanh(inner));
  } else {
    static_assert(F == unary_fn::gelu);
    // x Φ(x), Φ the normal CDF through erf.
    return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
  }
}

/// a ∘ b in the calculation type C.
template <binary_fn F, class C>
SPMD_HD constexpr C binary_value(C a, C b) {
  if constexpr (F == binary_fn::add) {
    if constexpr (is_signed_int<C>) return spmd::wrap_add(a, b);
    else return a + b;
  } else if constexpr (F == binary_fn::sub) {
    if constexpr (is_signed_int<C>) return spmd::wrap_sub(a, b);
    else return a - b;
  } else if constexpr (F == binary_fn::mul) {
    if constexpr (is_signed_int<C>) return spmd::wrap_mul(a, b);
    else return a * b;
  } else if constexpr (F == binary_fn::div) {
    return a / b;
  } else if constexpr (F == binary_fn::maximum) {
    return spmd::maximum(a, b);
  } else if constexpr (F == binary_fn::minimum) {
    return spmd::minimum(a, b);
  } else if constexpr (F == binary_fn::relu_backward) {
    return b > C(0) ? a : C(0);  // torch's threshold_backward: 0 at x == 0 and for NaN x
  } else if constexpr (F == binary_fn::gelu_backward) {
    // torch's GeluBackward (approximate='none'): g (Φ(x) + x φ(x)).
    const C cdf = C(0.5) * (C(1) + std::erf(b * C(0.70710678118654752440)));
    const C pdf = std::exp(C(-0.5) * b * b) * C(0.39894228040143267794);
    return a * (cdf + b * pdf);
  } else if constexpr (F == binary_fn::gelu_tanh_backward) {
    // torch's GeluBackward (approximate='tanh'), in its order of operations.
    const C beta = C(0.79788456080286535588), kappa = C(0.044715);
    const C x_sq = b * b, x_cube = x_sq * b;
    const C t = std::tanh(beta * (b + kappa * x_cube));
    const C left = C(0.5) * b, right = C(1) + t;
    const C left_d = C(0.5) * right, right_d = C(1) - t * t;
    const C inner_d = beta * (C(1) + C(3) * kappa * x_sq);
    return a * (left_d + left * right_d * inner_d);
  } else if constexpr (F == binary_fn::equal) {
    return a == b ? C(1) : C(0);
  } else if constexpr (F == binary_fn::expand_as) {
    return b;  // b spread over a's shape; a's values are not read
  } else {
    static_assert(F == binary_fn::sign_mul);
    return b > C(0) ? a : (b < C(0) ? -a : C(0));
  }
}

template <unary_fn F, class T>
SPMD_HD constexpr T unary_elem(T x) {
  return static_cast<T>(unary_value<F, calc_t<T>>(static_cast<calc_t<T>>(x)));
}
template <binary_fn F, class T>
SPMD_HD constexpr T binary_elem(T a, T b) {
  return static_cast<T>(binary_value<F, calc_t<T>>(static_cast<calc_t<T>>(a), static_cast<calc_t<T>>(b)));
}

}  // namespace element_math
}  // namespace spmd
