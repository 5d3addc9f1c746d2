// spmd/runtime/autograd/operand.hpp — what the autograd overloads of the operators accept:
// variables, and dtensors beside them as constants.
#pragma once

#include <type_traits>

#include "spmd/runtime/autograd/variable.hpp"

namespace spmd::runtime {

template <class X>
inline constexpr bool is_dtensor_v = detail::is_dtensor<std::remove_cvref_t<X>>::value;

/// Operands of an autograd overload: each a variable or a dtensor, at least one a variable
/// (two dtensors take the plain, unrecorded operator).
template <class... X>
concept grad_operands = ((is_variable<std::remove_cvref_t<X>> || is_dtensor_v<X>) && ...) &&
                        (is_variable<std::remove_cvref_t<X>> || ...);

namespace autograd_detail {
/// An operand as a variable (a dtensor becomes a constant): what a backward closure keeps.
template <class X>
auto keep(const X& x) {
  return as_variable(x);
}
}  // namespace autograd_detail

}  // namespace spmd::runtime
