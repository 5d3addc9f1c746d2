// spmd/runtime/ops/elementwise.hpp — elementwise operators on dtensors: unary functions, binary
// functions with numpy/torch broadcasting, and a dtensor with a scalar.
//
//   auto y = spmd::sim::relu(x);            // x P(max) -> P(max): no communication
//   auto z = x + b;                         // x (4, 8) S(1) + b (8) R -> S(1)
//   auto w = spmd::sim::maximum(x, 0.f);    // a scalar on either side
//   auto r = spmd::sim::add<spmd::placements<spmd::replicate>>(x, y);   // forced output
//
// The sharding is chosen by the compiler (spmd/ops/elementwise.hpp has the rules). Locally
// every rank runs one loop over its contiguous block; a broadcast input is read with stride 0
// on the stretched dims. gelu is the exact (erf) form, torch's default approximate='none'.
// Element types: float, double, bfloat16 and float16 (computed in float, rounded once per element), and
// int32/int64 for neg, abs, relu, add, sub, mul, maximum, minimum (signed integers wrap on
// overflow, as the reductions do). exp, log, sqrt, gelu, tanh, sigmoid and every division
// need a floating-point element type (a static_assert says so): integer division truncates,
// which does not distribute over a Partial(sum) and is not torch's true division either.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "spmd/core/numerics.hpp"
#include "spmd/host/vector_math.hpp"
#include "spmd/ops/elementwise.hpp"
#include "spmd/runtime/ops/apply.hpp"

namespace spmd::runtime {

namespace ew_detail {

template <class T>
using calc_t = element_math::calc_t<T>;

/// The arithmetic is core/element_math.hpp's, shared with the device kernels.
template <class Fn, class T>
constexpr T unary_elem(T x) {
  return element_math::unary_elem<Fn::id>(x);
}
template <class Fn, class T>
constexpr T binary_elem(T a, T b) {
  return element_math::binary_elem<Fn::id>(a, b);
}

/// The strides to read `in` at the output's indices: right-aligned, 0 on a dim the input
/// lacks or stretches (its local extent 1 against a larger one).
template <class T>
shape_vec broadcast_strides(const strided_view<const T>& in, const shape_vec& out) {
  shape_vec s{};
  s.n = out.size();
  for (int d = 0; d < out.size(); ++d) {
    const int k = d - (out.size() - in.rank());
    s[d] = (k < 0 || (in.extent(k) == 1 && out[d] != 1)) ? 0 : in.stride(k);
  }
  return s;
}

/// The block of the elementwise loops: a loop of this fixed trip count needs no epilogue and
/// no alias check, so GCC vectorises it even under -O2's "very cheap" cost model (which
/// leaves a plain loop of unknown count scalar: 4-8x the instructions per element). The
/// elements are computed as before, one by one in the vector lanes: the same bits.
inline constexpr index_t vector_block = 16;

/// One row of map2: n outputs from a and b read with strides ia and ib (0: broadcast). The
/// output is a fresh block that neither input aliases; saying so (restrict parameters) lets
/// the compiler vectorise without a run-time alias check. (The blocked loops are written
/// out, not passed as a lambda: GCC drops the restrict of a captured pointer.)
template <class T, class F>
void row2(T* SPMD_RESTRICT o, const T* SPMD_RESTRICT pa, const T* SPMD_RESTRICT pb, index_t n,
          index_t ia, index_t ib, F& f) {
  constexpr index_t w = vector_block;
  index_t j = 0;
  if (ia == 1 && ib == 1) {
    for (; j + w <= n; j += w)
      for (index_t q = 0; q < w; ++q) o[j + q] = f(pa[j + q], pb[j + q]);
    for (; j < n; ++j) o[j] = f(pa[j], pb[j]);
  } else if (ia == 1 && ib == 0) {
    const T vb = *pb;
    for (; j + w <= n; j += w)
      for (index_t q = 0; q < w; ++q) o[j + q] = f(pa[j + q], vb);
    for (; j < n; ++j) o[j] = f(pa[j], vb);
  } else if (ia == 0 && ib == 1) {
    const T va = *pa;
    for (; j + w <= n; j += w)
      for (index_t q = 0; q < w; ++q) o[j + q] = f(va, pb[j + q]);
    for (; j < n; ++j) o[j] = f(va, pb[j]);
  } else {
    for (; j < n; ++j) o[j] = f(pa[j * ia], pb[j * ib]);
  }
}

/// out[i] = f(x[i]) over n elements (restrict and blocks: as row2).
template <class T, class F>
void row1(T* SPMD_RESTRICT o, const T* SPMD_RESTRICT x, index_t n, F& f) {
  constexpr index_t w = vector_block;
  index_t i = 0;
  for (; i + w <= n; i += w)
    for (index_t q = 0; q < w; ++q) o[i + q] = f(x[i + q]);
  for (; i < n; ++i) o[i] = f(x[i]);
}

/// out[i] = f(a[i], b[i]) over the output's (contiguous) block, a and b read through their
/// broadcast strides. Adjacent dims that all three walk contiguously are merged, so a
/// same-shape add is one flat loop; the innermost loop has a version for each stride
/// pattern so that the compiler vectorises the common ones (same shape, a bias row).
template <class T, class F>
void map2(strided_view<T> out, strided_view<const T> a, strided_view<const T> b, F f) {
  if (out.size() == 0) return;
  // Same shapes (the common case): one flat loop, none of the stride set-up below, which
  // is most of the time of a small block.
  if (a.extents() == out.extents() && b.extents() == out.extents()) {
    row2(out.data(), a.data(), b.data(), out.size(), index_t{1}, index_t{1}, f);
    return;
  }
  shape_vec ext = out.extents(), sa = broadcast_strides(a, ext), sb = broadcast_strides(b, ext);
  shape_vec so = out.strides();
  // Merge dim d into d + 1 where every operand's stride at d is stride(d + 1) * extent(d + 1).
  shape_vec e2{}, a2{}, b2{}, o2{};
  for (int d = 0; d < ext.size(); ++d) {
    if (ext[d] == 1) continue;  // a unit dim moves nothing
    if (e2.size() > 0) {
      const int l = e2.size() - 1;
      if (a2[l] == sa[d] * ext[d] && b2[l] == sb[d] * ext[d] && o2[l] == so[d] * ext[d]) {
        e2[l] *= ext[d];
        a2[l] = sa[d];
        b2[l] = sb[d];
        o2[l] = so[d];
        continue;
      }
    }
    e2.push_back(ext[d]);
    a2.push_back(sa[d]);
    b2.push_back(sb[d]);
    o2.push_back(so[d]);
  }
  if (e2.size() == 0) {  // a single element (rank 0, or all extents 1)
    out.data()[0] = f(a.data()[0], b.data()[0]);
    return;
  }
  const int r = e2.size();
  const index_t n = e2[r - 1], ia = a2[r - 1], ib = b2[r - 1];
  shape_vec idx{};
  idx.n = r;
  for (int d = 0; d < r; ++d) idx[d] = 0;
  index_t oa = 0, ob = 0, oo = 0;
  for (;;) {
    row2(out.data() + oo, a.data() + oa, b.data() + ob, n, ia, ib, f);
    // Next row: odometer over the outer dims.
    int d = r - 2;
    for (; d >= 0; --d) {
      oa += a2[d];
      ob += b2[d];
      oo += o2[d];
      if (++idx[d] < e2[d]) break;
      oa -= a2[d] * e2[d];
      ob -= b2[d] * e2[d];
      oo -= o2[d] * e2[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

/// out[i] = f(in[i]) over two blocks of one shape (both contiguous: one flat loop).
template <class T, class F>
void map1(strided_view<T> out, strided_view<const T> in, F f) {
  row1(out.data(), in.data(), out.size(), f);
}

/// The element type of a scalar operand: a floating scalar with an integer dtensor would
/// need type promotion, which the simulation does not do.
template <class T, class S>
constexpr T scalar_as(S c) {
  static_assert(!(std::is_integral_v<T> && !std::is_integral_v<S>),
                "spmd::sim: a floating-point scalar with an integer dtensor would need type "
                "promotion; convert the scalar (or the dtensor) first.");
  if constexpr (is_narrow_float<S> && !std::is_same_v<S, T>) return static_cast<T>(float(c));
  else return static_cast<T>(c);
}

/// Both inputs' static extents, right-aligned: where neither is a static 1 the rule made
/// them one factor, so their run-time values must be equal (a dynamic extent broadcasts
/// only when the other input's extent is a static 1).
template <class LX, class LY, class SX, class SY>
void check_dynamic_extents(const SX& x, const SY& y, const char* op) {
  using EX = typename LX::extents_type;
  using EY = typename LY::extents_type;
  constexpr int rx = static_cast<int>(EX::rank()), ry = static_cast<int>(EY::rank());
  constexpr int r = rx > ry ? rx : ry;
  for (int d = 0; d < r; ++d) {
    const int kx = d - (r - rx), ky = d - (r - ry);
    if (kx < 0 || ky < 0) continue;
    const index_t sx = EX::static_extent(static_cast<std::size_t>(kx)),
                  sy = EY::static_extent(static_cast<std::size_t>(ky));
    if (sx == 1 || sy == 1 || (sx != dyn && sy != dyn)) continue;
    const index_t vx = x[static_cast<std::size_t>(kx)], vy = y[static_cast<std::size_t>(ky)];
    if (vx != vy)
      throw std::invalid_argument(std::string("spmd::sim::") + op + ": dim " + std::to_string(r - 1 - d) +
                                  " (from the right) is " + std::to_string(vx) + " in the first input and " +
                                  std::to_string(vy) +
                                  " in the second; a dynamic extent must equal the other input's "
                                  "(it broadcasts only against a static extent 1)");
  }
}

template <class T>
inline constexpr bool is_floating = is_floating_element<T>;

}  // namespace ew_detail

// ---------------------------------------------------------------------------------------
// Kernels
// ---------------------------------------------------------------------------------------

template <class Fn>
struct op_kernel<ops::unary<Fn>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::unary<Fn>&, strided_view<T> out, const op_rank_info&, strided_view<const T> x) {
    // float's transcendental functions: host/vector_math.hpp's (docs/numerics.md)
    if constexpr (std::is_same_v<T, float> && host::vector_math::has_vector_form<Fn::id>)
      host::vector_math::map<Fn::id>(x.data(), out.data(), out.size());
    else
      ew_detail::map1(out, x, [](T v) { return ew_detail::unary_elem<Fn>(v); });
  }
};

template <class Fn>
struct op_kernel<ops::binary<Fn>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::binary<Fn>&, strided_view<T> out, const op_rank_info&, strided_view<const T> a,
                  strided_view<const T> b) {
    if constexpr (std::is_same_v<T, float> && Fn::id == binary_fn::gelu_tanh_backward) {
      if (a.extents() == out.extents() && b.extents() == out.extents()) {  // (contiguous blocks)
        host::vector_math::gelu_tanh_backward(a.data(), b.data(), out.data(), out.size());
        return;
      }
    }
    ew_detail::map2(out, a, b, [](T u, T v) { return ew_detail::binary_elem<Fn>(u, v); });
  }
};

template <class Fn, bool ScalarLeft, class S>
struct op_kernel<ops::with_scalar<Fn, ScalarLeft, S>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::with_scalar<Fn, ScalarLeft, S>& op, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> x) {
    const T c = op.value;
    if constexpr (ScalarLeft)
      ew_detail::map1(out, x, [c](T v) { return ew_detail::binary_elem<Fn>(c, v); });
    else
      ew_detail::map1(out, x, [c](T v) { return ew_detail::binary_elem<Fn>(v, c); });
  }
};

// ---------------------------------------------------------------------------------------
// Unary functions
// ---------------------------------------------------------------------------------------

namespace ew_detail {
template <class Fn, class Forced, class T, class L, class Bk>
auto unary_apply(const dtensor<T, L, Bk>& x) {
  return apply<Forced>(ops::unary<Fn>{}, x);
}
}  // namespace ew_detail

/// -x (linear and decreasing: P(sum)/P(avg) pass, P(max) <-> P(min) swap).
template <class Forced = void, element T, class L, class Bk>
auto neg(const dtensor<T, L, Bk>& x) {
  return ew_detail::unary_apply<ops::neg_fn, Forced>(x);
}
/// |x| (no Partial passes: a P(sum) input is summed first).
template <class Forced = void, element T, class L, class Bk>
auto abs(const dtensor<T, L, Bk>& x) {
  return ew_detail::unary_apply<ops::abs_fn, Forced>(x);
}
/// max(x, 0) (increasing: P(max), P(min) pass).
template <class Forced = void, element T, class L, class Bk>
auto relu(const dtensor<T, L, Bk>& x) {
  return ew_detail::unary_apply<ops::relu_fn, Forced>(x);
}
template <class Forced = void, element T, class L, class Bk>
auto exp(const dtensor<T, L, Bk>& x) {
  static_assert(ew_detail::is_floating<T>,
                "spmd::sim::exp: exp of an integer dtensor has no integer result; convert it to "
                "float or double first.");
  return ew_detail::unary_apply<ops::exp_fn, Forced>(x);
}
template <class Forced = void, element T, class L, class Bk>
auto log(const dtensor<T, L, Bk>& x) {
  static_assert(ew_detail::is_floating<T>,
                "spmd::sim::log: log of an integer dtensor has no integer result; convert it to "
                "float or double first.");
  return ew_detail::unary_apply<ops::log_fn, Forced>(x);
}
template <class Forced = void, element T, class L, class Bk>
auto sqrt(const dtensor<T, L, Bk>& x) {
  static_assert(ew_detail::is_floating<T>,
                "spmd::sim::sqrt: sqrt of an integer dtensor has no integer result; convert it to "
                "float or double first.");
  return ew_detail::unary_apply<ops::sqrt_fn, Forced>(x);
}
/// x Φ(x) with the exact normal CDF (erf), torch's gelu(approximate='none').
template <class Forced = void, element T, class L, class Bk>
auto gelu(const dtensor<T, L, Bk>& x) {
  static_assert(ew_detail::is_floating<T>,
                "spmd::sim::gelu: gelu of an integer dtensor has no integer result; convert it to "
                "float or double first.");
  return ew_detail::unary_apply<ops::gelu_fn, Forced>(x);
}
/// torch's gelu(approximate='tanh'): 0.5 x (1 + tanh(√(2/π) (x + 0.044715 x³))).
template <class Forced = void, element T, class L, class Bk>
auto gelu_tanh(const dtensor<T, L, Bk>& x) {
  static_assert(ew_detail::is_floating<T>,
                "spmd::sim::gelu_tanh: gelu of an integer dtensor has no integer result; convert "
                "it to float or double first.");
  return ew_detail::unary_apply<ops::gelu_tanh_fn, Forced>(x);
}
template <class Forced = void, element T, class L, class Bk>
auto tanh(const dtensor<T, L, Bk>& x) {
  static_assert(ew_detail::is_floating<T>,
                "spmd::sim::tanh: tanh of an integer dtensor has no integer result; convert it to "
                "float or double first.");
  return ew_detail::unary_apply<ops::tanh_fn, Forced>(x);
}
template <class Forced = void, element T, class L, class Bk>
auto sigmoid(const dtensor<T, L, Bk>& x) {
  static_assert(ew_detail::is_floating<T>,
                "spmd::sim::sigmoid: sigmoid of an integer dtensor has no integer result; convert "
                "it to float or double first.");
  return ew_detail::unary_apply<ops::sigmoid_fn, Forced>(x);
}

// ---------------------------------------------------------------------------------------
// Binary functions: two dtensors (broadcasting) or a dtensor and a scalar (either side)
// ---------------------------------------------------------------------------------------

namespace ew_detail {

template <class Fn, class Forced, class T, class LX, class LY, class Bk>
auto binary_apply(const dtensor<T, LX, Bk>& x, const dtensor<T, LY, Bk>& y) {
  static_assert(std::is_same_v<typename LX::mesh_type, typename LY::mesh_type>,
                "spmd::sim: the two dtensors of an elementwise op are on different meshes; "
                "redistribute one onto the other's mesh first.");
  static_assert(!std::is_same_v<Fn, ops::div_fn> || is_floating<T>,
                "spmd::sim::div: integer division truncates, which does not distribute over a "
                "Partial(sum); convert to float or double first.");
  static_assert(!ops::linear_in_first<Fn> || is_floating<T>,
                "spmd: a derivative function (relu_backward, gelu_backward, sign_mul) needs a "
                "floating-point element type.");
  if constexpr (!(LX::extents_type::is_static() && LY::extents_type::is_static()))
    check_dynamic_extents<LX, LY>(x.shape(), y.shape(), Fn::name);  // nothing to check else
  return apply<Forced>(ops::binary<Fn>{}, x, y);
}

template <class Fn, bool ScalarLeft, class Forced, class T, class L, class S, class Bk>
auto scalar_apply(const dtensor<T, L, Bk>& x, S c) {
  static_assert(!std::is_same_v<Fn, ops::div_fn> || is_floating<T>,
                "spmd::sim::div: integer division truncates, which does not distribute over a "
                "Partial(sum); convert to float or double first.");
  return apply<Forced>(ops::with_scalar<Fn, ScalarLeft, T>{scalar_as<T>(c)}, x);
}

}  // namespace ew_detail

/// A scalar operand: any element type (converted to the dtensor's).
template <class S>
concept scalar_operand = element<S>;

#define SPMD_SIM_BINARY_FUNCTION(fname, Fn)                                                \
  template <class Forced = void, element T, class LX, class LY, class Bk>                           \
  auto fname(const dtensor<T, LX, Bk>& x, const dtensor<T, LY, Bk>& y) {                          \
    return ew_detail::binary_apply<Fn, Forced>(x, y);                                     \
  }                                                                                       \
  template <class Forced = void, element T, class L, scalar_operand S, class Bk>                    \
  auto fname(const dtensor<T, L, Bk>& x, S c) {                                               \
    return ew_detail::scalar_apply<Fn, false, Forced>(x, c);                              \
  }                                                                                       \
  template <class Forced = void, scalar_operand S, element T, class L, class Bk>                    \
  auto fname(S c, const dtensor<T, L, Bk>& x) {                                               \
    return ew_detail::scalar_apply<Fn, true, Forced>(x, c);                               \
  }

// x + y, x − y, x * y, x / y (floating point only), max(x, y), min(x, y): elementwise,
// broadcasting as numpy and torch do, or with a scalar on either side.
SPMD_SIM_BINARY_FUNCTION(add, ops::add_fn)
SPMD_SIM_BINARY_FUNCTION(sub, ops::sub_fn)
SPMD_SIM_BINARY_FUNCTION(mul, ops::mul_fn)
SPMD_SIM_BINARY_FUNCTION(div, ops::div_fn)
SPMD_SIM_BINARY_FUNCTION(maximum, ops::maximum_fn)
SPMD_SIM_BINARY_FUNCTION(minimum, ops::minimum_fn)
// The derivatives the autograd layer composes backwards from (core/element_math.hpp):
// relu_backward(g, x) = x > 0 ? g : 0; gelu_backward(g, x) = g·gelu'(x) (erf form),
// gelu_tanh_backward (tanh form); sign_mul(g, x) = g·sign(x); equal(a, b) = a == b ? 1 : 0.
SPMD_SIM_BINARY_FUNCTION(relu_backward, ops::relu_backward_fn)
SPMD_SIM_BINARY_FUNCTION(gelu_backward, ops::gelu_backward_fn)
SPMD_SIM_BINARY_FUNCTION(gelu_tanh_backward, ops::gelu_tanh_backward_fn)
SPMD_SIM_BINARY_FUNCTION(sign_mul, ops::sign_mul_fn)
SPMD_SIM_BINARY_FUNCTION(equal, ops::equal_fn)
#undef SPMD_SIM_BINARY_FUNCTION

#define SPMD_SIM_BINARY_OPERATOR(sym, fname)                                               \
  template <element T, class LX, class LY, class Bk>                                                \
  auto operator sym(const dtensor<T, LX, Bk>& x, const dtensor<T, LY, Bk>& y) {                   \
    return fname(x, y);                                                                   \
  }                                                                                       \
  template <element T, class L, scalar_operand S, class Bk>                                         \
  auto operator sym(const dtensor<T, L, Bk>& x, S c) {                                        \
    return fname(x, c);                                                                   \
  }                                                                                       \
  template <scalar_operand S, element T, class L, class Bk>                                         \
  auto operator sym(S c, const dtensor<T, L, Bk>& x) {                                        \
    return fname(c, x);                                                                   \
  }

SPMD_SIM_BINARY_OPERATOR(+, add)
SPMD_SIM_BINARY_OPERATOR(-, sub)
SPMD_SIM_BINARY_OPERATOR(*, mul)
SPMD_SIM_BINARY_OPERATOR(/, div)
#undef SPMD_SIM_BINARY_OPERATOR

template <element T, class L, class Bk>
auto operator-(const dtensor<T, L, Bk>& x) {
  return neg(x);
}

}  // namespace spmd::runtime
