// spmd/ops/elementwise.hpp — the sharding rules of elementwise operators (einsum factors plus
// the Partial placements each passes through). Kernels and the dtensor API are in
// spmd/runtime/ops/elementwise.hpp.
//
//   unary<relu_fn>           x (a, b)            "ab->ab"     P(max)->P(max), P(min)->P(min)
//   binary<add_fn>           x (a, b) + y (b)    "ab,b->ab"   numpy/torch broadcasting
//   binary<add_fn>           x (a, b) + y (1, b) "ab,.b->ab"  a size-1 dim is a '.' (replicated)
//   with_scalar<mul_fn, false, float>   x * c    "ab->ab"     the scalar is a run-time member
//
// Every dim of the output is a factor, so any dim may be sharded; an input's dim is a '.'
// (replicated) where broadcasting stretches it, and absent where the input has fewer dims.
// What each op does with a Partial input is a fact about its function (linear, monotone,
// decreasing) and is listed with the function tags below; anything not listed needs the
// input replicated on that mesh dim first (abs of a P(sum) is computed from the sum).
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

#include "spmd/core/element_math.hpp"
#include "spmd/core/extents.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/rule.hpp"

namespace spmd::ops {

// ---------------------------------------------------------------------------------------
// Function tags. `partials` says how the function treats a Partial input:
//   linear      f(Σ x_r) = Σ f(x_r), and for avg likewise   P(sum)->P(sum), P(avg)->P(avg)
//   increasing  f(max x_r) = max f(x_r), min likewise       P(max)->P(max), P(min)->P(min)
//   decreasing  f(max x_r) = min f(x_r)                     P(max)->P(min), P(min)->P(max)
// ---------------------------------------------------------------------------------------

//
// A P(max) may hold any value below the maximum on the other ranks, down to the identity
// -inf (a max over a dim of which a rank has no elements). A function defined only on part
// of the line (log, sqrt: x >= 0) would turn those into NaN, so it passes P(min) (the other
// ranks hold larger values, inside the domain whenever the minimum is) but not P(max).
struct partial_traits {
  bool linear = false;
  bool increasing = false;
  bool decreasing = false;
  bool transcendental = false;  // no integer result: float, double, bfloat16 only
  bool bounded_below = false;   // defined only above some value: P(max) does not pass
};

// neg is linear and decreasing (both, so every Partial but product passes).
struct neg_fn { static constexpr const char* name = "neg"; static constexpr unary_fn id = unary_fn::neg; static constexpr partial_traits traits{true, false, true, false}; };
struct abs_fn { static constexpr const char* name = "abs"; static constexpr unary_fn id = unary_fn::abs; static constexpr partial_traits traits{}; };
struct exp_fn { static constexpr const char* name = "exp"; static constexpr unary_fn id = unary_fn::exp; static constexpr partial_traits traits{false, true, false, true}; };
struct log_fn { static constexpr const char* name = "log"; static constexpr unary_fn id = unary_fn::log; static constexpr partial_traits traits{false, true, false, true, true}; };
struct sqrt_fn { static constexpr const char* name = "sqrt"; static constexpr unary_fn id = unary_fn::sqrt; static constexpr partial_traits traits{false, true, false, true, true}; };
struct relu_fn { static constexpr const char* name = "relu"; static constexpr unary_fn id = unary_fn::relu; static constexpr partial_traits traits{false, true, false, false}; };
// gelu is not monotone (it dips below 0 near x = -0.75): no Partial passes.
struct gelu_fn { static constexpr const char* name = "gelu"; static constexpr unary_fn id = unary_fn::gelu; static constexpr partial_traits traits{false, false, false, true}; };
struct gelu_tanh_fn { static constexpr const char* name = "gelu_tanh"; static constexpr unary_fn id = unary_fn::gelu_tanh; static constexpr partial_traits traits{false, false, false, true}; };
struct tanh_fn { static constexpr const char* name = "tanh"; static constexpr unary_fn id = unary_fn::tanh; static constexpr partial_traits traits{false, true, false, true}; };
struct sigmoid_fn { static constexpr const char* name = "sigmoid"; static constexpr unary_fn id = unary_fn::sigmoid; static constexpr partial_traits traits{false, true, false, true}; };

// Binary functions (two dtensors, or a dtensor and a scalar).
struct add_fn { static constexpr const char* name = "add"; static constexpr binary_fn id = binary_fn::add; };
struct sub_fn { static constexpr const char* name = "sub"; static constexpr binary_fn id = binary_fn::sub; };
struct mul_fn { static constexpr const char* name = "mul"; static constexpr binary_fn id = binary_fn::mul; };
struct div_fn { static constexpr const char* name = "div"; static constexpr binary_fn id = binary_fn::div; };
struct maximum_fn { static constexpr const char* name = "maximum"; static constexpr binary_fn id = binary_fn::maximum; };
struct minimum_fn { static constexpr const char* name = "minimum"; static constexpr binary_fn id = binary_fn::minimum; };
// Derivatives for the autograd layer (core/element_math.hpp): f(g, x) = g · f'(x) is linear in
// g, so a Partial(sum) gradient passes when x is replicated (as the numerator of div).
struct relu_backward_fn { static constexpr const char* name = "relu_backward"; static constexpr binary_fn id = binary_fn::relu_backward; };
struct gelu_backward_fn { static constexpr const char* name = "gelu_backward"; static constexpr binary_fn id = binary_fn::gelu_backward; };
struct gelu_tanh_backward_fn { static constexpr const char* name = "gelu_tanh_backward"; static constexpr binary_fn id = binary_fn::gelu_tanh_backward; };
struct sign_mul_fn { static constexpr const char* name = "sign_mul"; static constexpr binary_fn id = binary_fn::sign_mul; };
// b broadcast to the shape of a, whose values are not read (a sum's or mean's backward spreads
// the gradient over the input's layout with it): every Partial of b passes when a is replicated.
struct expand_as_fn { static constexpr const char* name = "expand_as"; static constexpr binary_fn id = binary_fn::expand_as; };
// 1 where a == b, else 0: no Partial passes.
struct equal_fn { static constexpr const char* name = "equal"; static constexpr binary_fn id = binary_fn::equal; };

template <class Fn>
inline constexpr bool linear_in_first =
    std::is_same_v<Fn, relu_backward_fn> || std::is_same_v<Fn, gelu_backward_fn> ||
    std::is_same_v<Fn, gelu_tanh_backward_fn> || std::is_same_v<Fn, sign_mul_fn>;

namespace elementwise_detail {

/// The einsum text of an elementwise op: each input's dims right-aligned against the output's
/// letters, a '.' where the input's static extent is 1 and the output's is not 1 (broadcast).
/// A dynamic extent is taken as equal to the other (checked at run time), except against a
/// static 1, which broadcasts whatever the dynamic value turns out to be.
constexpr einsum_writer broadcast_einsum(const svec<shape_vec, max_op_inputs>& in, const shape_vec& out) {
  einsum_writer t{};
  const int r = out.size();
  for (int i = 0; i < in.size(); ++i) {
    if (i > 0) t.put(',');
    const int ri = in[i].size();
    for (int k = 0; k < ri; ++k) {
      const int d = k + (r - ri);
      const bool stretched = in[i][k] == 1 && out[d] != 1;
      t.put(stretched ? '.' : factor_letter(d));
    }
  }
  return t.put('-').put('>').dims(0, r);
}

/// Broadcast extent of two dims (right-aligned); throws naming both when they cannot be.
constexpr index_t broadcast_extent(index_t a, index_t b, int dim, const char* op) {
  if (a == 1) return b;
  if (b == 1) return a;
  if (a == dyn) return b;  // equal-or-error: the run-time shapes are checked again
  if (b == dyn) return a;
  if (a != b)
    throw std::invalid_argument(std::string("spmd::") + op + ": the shapes do not broadcast: dim " +
                                std::to_string(dim) + " (from the right) is " + std::to_string(a) +
                                " in the first input and " + std::to_string(b) + " in the second");
  return a;
}

/// The broadcast shape of two shapes (numpy/torch rules: right-aligned, size 1 stretches).
constexpr shape_vec broadcast_shape(const shape_vec& a, const shape_vec& b, const char* op) {
  const int r = a.size() > b.size() ? a.size() : b.size();
  shape_vec out{};
  out.n = r;
  for (int d = 0; d < r; ++d) {
    const int ka = d - (r - a.size()), kb = d - (r - b.size());
    const index_t ea = ka >= 0 ? a[ka] : 1, eb = kb >= 0 ? b[kb] : 1;
    out[d] = broadcast_extent(ea, eb, r - 1 - d, op);
  }
  return out;
}

constexpr partial_rule two(placement a, placement b, reduce_op out) {
  partial_rule p{};
  p.in.push_back(a);
  p.in.push_back(b);
  p.out = make_partial(out);
  return p;
}

/// A unary function's Partial pass-throughs (see partial_traits). For integer elements a
/// decreasing function is -x, which maps the identity lowest() of P(max) to itself (it wraps),
/// not to the max() that P(min) needs: no decreasing pass-through there, and no P(avg) at all.
constexpr op_rule with_traits(op_rule r, const partial_traits& t, bool integral) {
  if (t.linear) r = r.passes_partial(reduce_op::sum, reduce_op::sum);
  if (t.linear && !integral) r = r.passes_partial(reduce_op::avg, reduce_op::avg);
  if (t.increasing && !t.bounded_below) r = r.passes_partial(reduce_op::max, reduce_op::max);
  if (t.increasing) r = r.passes_partial(reduce_op::min, reduce_op::min);
  if (t.decreasing && !integral)
    r = r.passes_partial(reduce_op::max, reduce_op::min).passes_partial(reduce_op::min, reduce_op::max);
  return r;
}

/// The Partial pass-throughs of a binary function on two dtensors (input 0 ∘ input 1). For
/// integer elements x + c wraps, so it is not monotone: P(max)/P(min) do not pass add/sub.
template <class Fn>
constexpr op_rule binary_partials(op_rule r, bool integral) {
  const placement R = make_replicate();
  const placement pmax = make_partial(reduce_op::max), pmin = make_partial(reduce_op::min);
  if constexpr (std::is_same_v<Fn, add_fn> || std::is_same_v<Fn, sub_fn>) {
    r = r.passes_partial(reduce_op::sum, reduce_op::sum);
    if (integral) return r;
    r = r.passes_partial(reduce_op::avg, reduce_op::avg);
    // Adding (subtracting) a replicated value is monotone in the partial input.
    const bool sub = std::is_same_v<Fn, sub_fn>;
    r = r.with_partial(two(pmax, R, reduce_op::max)).with_partial(two(pmin, R, reduce_op::min));
    r = r.with_partial(two(R, pmax, sub ? reduce_op::min : reduce_op::max))
            .with_partial(two(R, pmin, sub ? reduce_op::max : reduce_op::min));
  } else if constexpr (std::is_same_v<Fn, mul_fn>) {  // bilinear
    r = r.passes_partial_of(0, reduce_op::sum, reduce_op::sum).passes_partial_of(1, reduce_op::sum, reduce_op::sum);
    if (!integral)
      r = r.passes_partial_of(0, reduce_op::avg, reduce_op::avg).passes_partial_of(1, reduce_op::avg, reduce_op::avg);
  } else if constexpr (std::is_same_v<Fn, div_fn> || linear_in_first<Fn>) {  // linear in input 0 only
    r = r.passes_partial_of(0, reduce_op::sum, reduce_op::sum).passes_partial_of(0, reduce_op::avg, reduce_op::avg);
  } else if constexpr (std::is_same_v<Fn, expand_as_fn>) {  // the identity of input 1
    r = r.passes_partial_of(1, reduce_op::sum, reduce_op::sum).passes_partial_of(1, reduce_op::max, reduce_op::max)
            .passes_partial_of(1, reduce_op::min, reduce_op::min);
    if (!integral) r = r.passes_partial_of(1, reduce_op::avg, reduce_op::avg);
  } else if constexpr (std::is_same_v<Fn, maximum_fn> || std::is_same_v<Fn, minimum_fn>) {
    const reduce_op op = std::is_same_v<Fn, maximum_fn> ? reduce_op::max : reduce_op::min;
    const placement p = make_partial(op);
    r = r.passes_partial(op, op).with_partial(two(p, R, op)).with_partial(two(R, p, op));
  }
  return r;
}

/// The Partial pass-throughs of `x ∘ c` (or `c ∘ x` when ScalarLeft) with a run-time scalar
/// c: the rule cannot know c's sign, so x * c keeps P(sum)/P(avg) but not P(max)/P(min).
/// Integer x ± c wraps (not monotone): P(max)/P(min) do not pass it.
template <class Fn, bool ScalarLeft>
constexpr op_rule scalar_partials(op_rule r, bool integral) {
  if constexpr (std::is_same_v<Fn, add_fn> || std::is_same_v<Fn, sub_fn>) {
    // x ± c shifts every rank's value: P(sum) would add c once per rank, so it never passes.
    if (integral) return r;
    const bool flips = std::is_same_v<Fn, sub_fn> && ScalarLeft;  // c − x is decreasing
    r = r.passes_partial(reduce_op::avg, reduce_op::avg);
    r = r.passes_partial(reduce_op::max, flips ? reduce_op::min : reduce_op::max);
    r = r.passes_partial(reduce_op::min, flips ? reduce_op::max : reduce_op::min);
  } else if constexpr (std::is_same_v<Fn, mul_fn> || (std::is_same_v<Fn, div_fn> && !ScalarLeft)) {
    r = r.passes_partial(reduce_op::sum, reduce_op::sum);
    if (!integral) r = r.passes_partial(reduce_op::avg, reduce_op::avg);
  } else if constexpr (std::is_same_v<Fn, maximum_fn> || std::is_same_v<Fn, minimum_fn>) {
    // max(x, c) and min(x, c) are increasing in x.
    r = r.passes_partial(reduce_op::max, reduce_op::max).passes_partial(reduce_op::min, reduce_op::min);
  }
  // c / x: no Partial passes.
  return r;
}

}  // namespace elementwise_detail

/// f(x), elementwise, for a function tag Fn (neg_fn, exp_fn, ...).
template <class Fn>
struct unary {
  static constexpr const char* name = Fn::name;
  static constexpr op_rule rule(const op_context& c) {
    using namespace elementwise_detail;
    const einsum_writer t = broadcast_einsum(c.in_shape, c.out_shape);
    return with_traits(einsum(t.text), Fn::traits, c.integral);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) { return in[0]; }
};

/// x ∘ y, elementwise with broadcasting, for a binary function tag Fn (add_fn, ...).
template <class Fn>
struct binary {
  static constexpr const char* name = Fn::name;
  static constexpr op_rule rule(const op_context& c) {
    using namespace elementwise_detail;
    const einsum_writer t = broadcast_einsum(c.in_shape, c.out_shape);
    return binary_partials<Fn>(einsum(t.text), c.integral);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    return elementwise_detail::broadcast_shape(in[0], in[1], Fn::name);
  }
};

/// x ∘ c (or c ∘ x when ScalarLeft) with a run-time scalar c of the element type S.
template <class Fn, bool ScalarLeft, class S>
struct with_scalar {
  static constexpr const char* name = Fn::name;
  S value{};
  static constexpr op_rule rule(const op_context& c) {
    using namespace elementwise_detail;
    const einsum_writer t = broadcast_einsum(c.in_shape, c.out_shape);
    return scalar_partials<Fn, ScalarLeft>(einsum(t.text), c.integral);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) { return in[0]; }
};

}  // namespace spmd::ops
