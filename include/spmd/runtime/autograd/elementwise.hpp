// spmd/runtime/autograd/elementwise.hpp — the elementwise family on variables: unary
// functions, binary functions with broadcasting (each operand's gradient summed back to its
// shape), a variable with a scalar, and linear with a bias.
//
// Derivatives follow PyTorch: relu' is 0 at 0 (threshold_backward); gelu' in both forms is
// GeluBackward's formula; maximum/minimum give each operand half the gradient where they tie
// (torch.maximum's backward); abs' is sign(x) (0 at 0).
#pragma once

#include <type_traits>

#include "spmd/runtime/autograd/matmul.hpp"
#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/autograd/shape_grad.hpp"
#include "spmd/runtime/ops/elementwise.hpp"

namespace spmd::runtime {

// ---------------------------------------------------------------------------------------
// Unary
// ---------------------------------------------------------------------------------------

// Each: the forward op, and the gradient of x from (g, x, y = f(x)).
#define SPMD_AUTOGRAD_UNARY(fname, grad_expr)                                                  \
  template <class Forced = void, element T, class L, class B, class GP>                       \
  auto fname(const variable<T, L, B, GP>& x) {                                                \
    auto y = runtime::fname<Forced>(x.value());                                               \
    auto saved = share(y);                                                              \
    return autograd_detail::make_result(                                                       \
        std::move(y), #fname,                                                                  \
        [x, saved](const auto& g) {                                                            \
          [[maybe_unused]] const auto& xv = x.value();                                         \
          [[maybe_unused]] const auto& yv = *saved;                                            \
          autograd_detail::send(x, grad_expr);                                                 \
        },                                                                                     \
        x);                                                                                    \
  }

SPMD_AUTOGRAD_UNARY(neg, runtime::neg(g))
SPMD_AUTOGRAD_UNARY(abs, runtime::sign_mul(g, xv))
SPMD_AUTOGRAD_UNARY(relu, runtime::relu_backward(g, xv))
SPMD_AUTOGRAD_UNARY(gelu, runtime::gelu_backward(g, xv))
SPMD_AUTOGRAD_UNARY(gelu_tanh, runtime::gelu_tanh_backward(g, xv))
SPMD_AUTOGRAD_UNARY(exp, runtime::mul(g, yv))
SPMD_AUTOGRAD_UNARY(log, runtime::div(g, xv))
SPMD_AUTOGRAD_UNARY(sqrt, runtime::div(runtime::mul(g, 0.5), yv))
SPMD_AUTOGRAD_UNARY(tanh, runtime::mul(g, runtime::sub(1, runtime::mul(yv, yv))))
SPMD_AUTOGRAD_UNARY(sigmoid, runtime::mul(runtime::mul(g, yv), runtime::sub(1, yv)))
#undef SPMD_AUTOGRAD_UNARY

template <element T, class L, class B, class GP>
auto operator-(const variable<T, L, B, GP>& x) {
  return neg(x);
}

/// x converted to element type U (torch's x.to(dtype)): the gradient is converted back to T.
/// A bf16 model's logits go to float before the loss this way (torchtitan's loss does).
template <element U, element T, class L, class B, class GP>
auto cast(const variable<T, L, B, GP>& x) {
  auto y = detail::cast_dtensor<U>(x.value());
  return autograd_detail::make_result(
      std::move(y), "cast", [x](const auto& g) { autograd_detail::send(x, detail::cast_dtensor<T>(g)); }, x);
}

// ---------------------------------------------------------------------------------------
// Binary: two operands (a variable and a variable or dtensor), broadcasting
// ---------------------------------------------------------------------------------------

namespace autograd_detail {

/// The gradients of x ∘ y for Fn, before they are summed back to the operands' shapes.
template <class Fn>
struct binary_grad;
template <>
struct binary_grad<ops::add_fn> {
  template <class G, class X, class Y, class O>
  static auto dx(const G& g, const X&, const Y&, const O&) { return g; }
  template <class G, class X, class Y, class O>
  static auto dy(const G& g, const X&, const Y&, const O&) { return g; }
};
template <>
struct binary_grad<ops::sub_fn> {
  template <class G, class X, class Y, class O>
  static auto dx(const G& g, const X&, const Y&, const O&) { return g; }
  template <class G, class X, class Y, class O>
  static auto dy(const G& g, const X&, const Y&, const O&) { return runtime::neg(g); }
};
template <>
struct binary_grad<ops::mul_fn> {
  template <class G, class X, class Y, class O>
  static auto dx(const G& g, const X&, const Y& y, const O&) { return runtime::mul(g, y); }
  template <class G, class X, class Y, class O>
  static auto dy(const G& g, const X& x, const Y&, const O&) { return runtime::mul(g, x); }
};
template <>
struct binary_grad<ops::div_fn> {
  template <class G, class X, class Y, class O>
  static auto dx(const G& g, const X&, const Y& y, const O&) { return runtime::div(g, y); }
  // d(x/y)/dy = -x/y² = -(x/y)/y: torch's -grad * out / y.
  template <class G, class X, class Y, class O>
  static auto dy(const G& g, const X&, const Y& y, const O& out) {
    return runtime::div(runtime::neg(runtime::mul(g, out)), y);
  }
};
/// maximum/minimum: the operand that wins takes g, ties split it in halves (torch).
template <class Fn>
struct extremum_grad {
  // mask_x = 1 where x == out (x won or tied); where both tie each gets g/2.
  template <class G, class X, class Y, class O>
  static auto dx(const G& g, const X& x, const Y& y, const O& out) {
    return runtime::div(runtime::mul(g, runtime::equal(x, out)),
                        runtime::add(1, runtime::equal(x, y)));
  }
  template <class G, class X, class Y, class O>
  static auto dy(const G& g, const X& x, const Y& y, const O& out) {
    return runtime::div(runtime::mul(g, runtime::equal(y, out)),
                        runtime::add(1, runtime::equal(x, y)));
  }
};
template <>
struct binary_grad<ops::maximum_fn> : extremum_grad<ops::maximum_fn> {};
template <>
struct binary_grad<ops::minimum_fn> : extremum_grad<ops::minimum_fn> {};

template <class Fn, class Forced, class X, class Y>
auto binary_record(const X& x, const Y& y, const char* name) {
  auto out = ew_detail::binary_apply<Fn, Forced>(value_of(x), value_of(y));
  auto saved = share(out);
  return make_result(
      std::move(out), name,
      [x = keep(x), y = keep(y), saved](const auto& g) {
        using LX = typename std::remove_cvref_t<decltype(x)>::layout_type;
        using LY = typename std::remove_cvref_t<decltype(y)>::layout_type;
        if (wants(x)) send(x, sum_to<LX>(binary_grad<Fn>::dx(g, x.value(), y.value(), *saved)));
        if (wants(y)) send(y, sum_to<LY>(binary_grad<Fn>::dy(g, x.value(), y.value(), *saved)));
      },
      x, y);
}

/// x ∘ c or c ∘ x with a scalar c.
template <class Fn, bool ScalarLeft, class Forced, element T, class L, class B, class GP, class S>
auto scalar_record(const variable<T, L, B, GP>& x, S c, const char* name) {
  auto out = ew_detail::scalar_apply<Fn, ScalarLeft, Forced>(x.value(), c);
  auto saved = share(out);
  const T cv = ew_detail::scalar_as<T>(c);
  return make_result(
      std::move(out), name,
      [x, cv, saved](const auto& g) {
        const auto& xv = x.value();
        if constexpr (std::is_same_v<Fn, ops::add_fn>) {
          send(x, g);
        } else if constexpr (std::is_same_v<Fn, ops::sub_fn>) {
          if constexpr (ScalarLeft) send(x, runtime::neg(g));
          else send(x, g);
        } else if constexpr (std::is_same_v<Fn, ops::mul_fn>) {
          send(x, runtime::mul(g, cv));
        } else if constexpr (std::is_same_v<Fn, ops::div_fn>) {
          if constexpr (ScalarLeft) send(x, runtime::div(runtime::neg(runtime::mul(g, *saved)), xv));
          else send(x, runtime::div(g, cv));
        } else {  // maximum/minimum with a scalar: x takes g where it is the result, half on ties
          send(x, runtime::div(runtime::mul(g, runtime::equal(xv, *saved)),
                               runtime::add(1, runtime::equal(xv, cv))));
        }
      },
      x);
}

}  // namespace autograd_detail

#define SPMD_AUTOGRAD_BINARY(fname, Fn)                                                        \
  template <class Forced = void, class X, class Y>                                            \
    requires grad_operands<X, Y>                                                               \
  auto fname(const X& x, const Y& y) {                                                         \
    return autograd_detail::binary_record<Fn, Forced>(x, y, #fname);                           \
  }                                                                                            \
  template <class Forced = void, element T, class L, class B, class GP, scalar_operand S>     \
  auto fname(const variable<T, L, B, GP>& x, S c) {                                            \
    return autograd_detail::scalar_record<Fn, false, Forced>(x, c, #fname);                    \
  }                                                                                            \
  template <class Forced = void, scalar_operand S, element T, class L, class B, class GP>     \
  auto fname(S c, const variable<T, L, B, GP>& x) {                                            \
    return autograd_detail::scalar_record<Fn, true, Forced>(x, c, #fname);                     \
  }

SPMD_AUTOGRAD_BINARY(add, ops::add_fn)
SPMD_AUTOGRAD_BINARY(sub, ops::sub_fn)
SPMD_AUTOGRAD_BINARY(mul, ops::mul_fn)
SPMD_AUTOGRAD_BINARY(div, ops::div_fn)
SPMD_AUTOGRAD_BINARY(maximum, ops::maximum_fn)
SPMD_AUTOGRAD_BINARY(minimum, ops::minimum_fn)
#undef SPMD_AUTOGRAD_BINARY

#define SPMD_AUTOGRAD_OPERATOR(sym, fname)                                                     \
  template <class X, class Y>                                                                  \
    requires grad_operands<X, Y>                                                               \
  auto operator sym(const X& x, const Y& y) {                                                  \
    return fname(x, y);                                                                        \
  }                                                                                            \
  template <element T, class L, class B, class GP, scalar_operand S>                           \
  auto operator sym(const variable<T, L, B, GP>& x, S c) {                                     \
    return fname(x, c);                                                                        \
  }                                                                                            \
  template <scalar_operand S, element T, class L, class B, class GP>                           \
  auto operator sym(S c, const variable<T, L, B, GP>& x) {                                     \
    return fname(c, x);                                                                        \
  }

SPMD_AUTOGRAD_OPERATOR(+, add)
SPMD_AUTOGRAD_OPERATOR(-, sub)
SPMD_AUTOGRAD_OPERATOR(*, mul)
SPMD_AUTOGRAD_OPERATOR(/, div)
#undef SPMD_AUTOGRAD_OPERATOR

/// x · Wᵀ + b.
template <class Forced = void, class X, class W, class Bias>
  requires grad_operands<X, W, Bias>
auto linear(const X& x, const W& w, const Bias& b) {
  return add<Forced>(matmul_t(as_variable(x), as_variable(w)), b);
}

}  // namespace spmd::runtime
