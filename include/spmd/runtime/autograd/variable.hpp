// spmd/runtime/autograd/variable.hpp — a dtensor that records what is done to it, and the
// type of its gradient.
//
//   auto w = spmd::sim::requires_grad(spmd::sim::distribute_tensor<LW>(w0), "W");
//   auto loss = sum<>(relu(matmul(x, w)));            // recorded: x, w are variables
//   loss.backward();                                  // w.grad() is a dtensor
//   static_assert(std::is_same_v<decltype(w)::grad_type,
//                                spmd::sim::dtensor<float, decltype(w)::grad_layout>>);
//
// A variable<T, L, B, GP> is a dtensor<T, L, B> (shared: copies of a variable are the same
// tensor, as torch tensors are) and, when it requires a gradient, a node of the tape. Its
// gradient is a dtensor<T, layout<Mesh, GP, Extents>, B>: GP defaults to L's placements with
// every Partial replaced by Replicate (DTensor's normalisation: a gradient is never left
// Partial unless asked), and can be given (grad_placements: requires_grad<GP>(x), or the
// output placements' gradient of redistribute / from_local). Plain dtensors are never
// recorded: code that does not differentiate pays nothing.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "spmd/core/layout.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/runtime/autograd/grad_mode.hpp"
#include "spmd/runtime/autograd/node.hpp"
#include "spmd/runtime/autograd/shared.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd::runtime {

// ---------------------------------------------------------------------------------------
// Gradient placements
// ---------------------------------------------------------------------------------------

namespace autograd_detail {
template <class P>
struct normalised_placement {
  using type = P;
};
template <reduce_op Op>
struct normalised_placement<partial<Op>> {
  using type = replicate;
};
template <class Ps>
struct normalised_placements;
template <class... P>
struct normalised_placements<placements<P...>> {
  using type = placements<typename normalised_placement<P>::type...>;
};
}  // namespace autograd_detail

/// The default placements of a gradient: Ps with every Partial replaced by Replicate.
template <class Ps>
using default_grad_placements_t = typename autograd_detail::normalised_placements<Ps>::type;

/// The layout of a gradient of a tensor in layout L, held with placements GP.
template <class L, class GP = default_grad_placements_t<typename L::placements_type>>
using grad_layout_t = spmd::layout<typename L::mesh_type, GP, typename L::extents_type>;

namespace autograd_detail {
/// True when GP is a valid placement list for L's mesh and rank (checked before the
/// gradient's layout is formed, so the error names grad_placements).
template <class L, class GP>
constexpr bool grad_placements_fit() {
  return make_spec(L::mesh_type::nominal_shape_vec(), GP::value(), static_cast<int>(L::rank)).error ==
         layout_error::none;
}
}  // namespace autograd_detail

template <element T, class L, class B, class GP = default_grad_placements_t<typename L::placements_type>>
class variable;

template <class V>
inline constexpr bool is_variable = false;
template <element T, class L, class B, class GP>
inline constexpr bool is_variable<variable<T, L, B, GP>> = true;

// ---------------------------------------------------------------------------------------
// variable
// ---------------------------------------------------------------------------------------

/// A dtensor with (optionally) a place on the tape. See the header comment.
template <element T, class L, class B, class GP>
class variable {
  static_assert(autograd_detail::grad_placements_fit<L, GP>(),
                "spmd::autograd: the grad_placements do not fit the tensor: give one placement "
                "per mesh dim, with shard dims inside the tensor's dims and one Partial op.");

 public:
  using value_type = dtensor<T, L, B>;
  using element_type = T;
  using layout_type = L;
  using backend_type = B;
  using mesh_type = typename L::mesh_type;
  using placements_type = typename L::placements_type;
  using extents_type = typename L::extents_type;
  using grad_placements = GP;
  using grad_layout = grad_layout_t<L, GP>;
  /// The type of grad(): known when the variable is declared, whatever is computed from it.
  using grad_type = dtensor<T, grad_layout, B>;
  using node_type = grad_node<T, grad_layout, B>;
  static constexpr std::size_t rank = L::rank;

  /// A constant: no gradient is computed for it.
  variable(value_type v) : value_(std::move(v)) {}  // NOLINT
  /// (Internal) a value and its node (null: a constant).
  variable(detail::internal_t, shared_value<value_type> v, counted_ref<node_type> n)
      : value_(std::move(v)), node_(std::move(n)) {}

  /// The tensor. Shared by every copy of this variable.
  const value_type& value() const { return *value_; }
  /// The tensor, writable (an optimizer's update). Writing a tensor that a recorded
  /// operation saved changes what its backward computes, as in PyTorch without the
  /// version check: update parameters after backward, under no_grad.
  value_type& value() { return *value_; }
  const shared_value<value_type>& value_ptr() const { return value_; }

  const L& layout() const { return value_->layout(); }
  dims<rank> shape() const { return value_->shape(); }
  std::vector<T> full_tensor() const { return value_->full_tensor(); }

  bool requires_grad() const { return node_ != nullptr; }
  /// A leaf: made by requires_grad (or a constant); its gradient is kept after backward.
  bool is_leaf() const { return node_ == nullptr || node_->is_leaf(); }
  /// The name in messages: the leaf's, or the op that made it.
  std::string name() const { return node_ ? node_->name() : std::string("a constant"); }
  const counted_ref<node_type>& node() const { return node_; }

  /// True when a backward has left a gradient here.
  bool has_grad() const { return node_ && node_->grad().has_value(); }
  /// The accumulated gradient. Throws std::logic_error naming the tensor when there is none
  /// (no backward reached it yet, or it was zeroed; a non-leaf keeps one only after
  /// retain_grad()).
  const grad_type& grad() const {
    if (!has_grad())
      throw std::logic_error("spmd::autograd: '" + name() + "' has no gradient" +
                             (node_ ? std::string(node_->is_leaf()
                                                      ? " (no backward has reached it since it was "
                                                        "created or zeroed)"
                                                      : " (a non-leaf keeps its gradient only "
                                                        "after retain_grad())")
                                    : std::string(" (it does not require one)")));
    return *node_->grad();
  }
  /// The gradient, writable (gradient clipping, averaging).
  grad_type& grad() {
    (void)static_cast<const variable&>(*this).grad();
    return *node_->grad();
  }
  /// Drops the gradient (torch's zero_grad(set_to_none=True)): the next backward starts anew.
  void zero_grad() {
    if (node_) node_->grad().reset();
  }
  /// Keep this non-leaf's gradient after backward.
  void retain_grad() {
    if (!node_)
      throw std::logic_error("spmd::autograd: retain_grad on '" + name() +
                             "', which does not require a gradient");
    node_->retain_grad();
  }
  /// The same tensor (shared), outside the tape.
  variable detach() const { return variable(detail::internal_t{}, value_, nullptr); }

  /// Backward from this scalar (0-d) loss: d loss / d loss = 1.
  void backward(bool retain_graph = false) const {
    static_assert(rank == 0,
                  "spmd::backward: the tensor is not a scalar; call backward(grad_output) with a "
                  "gradient of its shape (or reduce it to a scalar first).");
    backward(factories<B>::template full<T>(T(1), grad_layout{value_->layout().extents()}),
             retain_graph);
  }
  /// Backward from this tensor with the given gradient of it (any layout of its shape).
  template <class GL2>
  void backward(const dtensor<T, GL2, B>& grad_output, bool retain_graph = false) const {
    if (!node_)
      throw std::logic_error("spmd::backward: '" + name() +
                             "' does not require a gradient (nothing recorded leads to it)");
    if (!node_->is_leaf() && node_->freed())
      throw std::logic_error("spmd::backward: the graph through '" + name() +
                             "' was already freed by an earlier backward; pass retain_graph = "
                             "true to the first backward to run backward through it again");
    node_->accumulate(grad_output);
    autograd_detail::run_backward(node_.get(), retain_graph);
  }

 private:
  shared_value<value_type> value_;
  counted_ref<node_type> node_;
};

/// x as a leaf that requires a gradient (torch's x.requires_grad_()); `name` appears in
/// error messages. GradPlacements, when given, are the placements of x.grad() (by default
/// x's with Partial replaced by Replicate).
template <class GradPlacements = void, element T, class L, class B>
auto requires_grad(dtensor<T, L, B> x, std::string name = "a leaf") {
  static_assert(is_floating_element<T>,
                "spmd::requires_grad: only floating-point tensors have gradients (an integer "
                "tensor is not differentiable; torch refuses it too).");
  using GP = std::conditional_t<std::is_void_v<GradPlacements>,
                                default_grad_placements_t<typename L::placements_type>, GradPlacements>;
  using V = variable<T, L, B, GP>;
  return V(detail::internal_t{}, shared_value<dtensor<T, L, B>>(std::move(x)),
           make_counted<typename V::node_type>(std::move(name)));
}

/// A dtensor as a constant variable (no gradient), or a variable as it is.
template <element T, class L, class B>
variable<T, L, B> as_variable(const dtensor<T, L, B>& x) {
  return variable<T, L, B>(x);
}
template <element T, class L, class B, class GP>
const variable<T, L, B, GP>& as_variable(const variable<T, L, B, GP>& x) {
  return x;
}

/// The dtensor of a variable or dtensor.
template <element T, class L, class B>
const dtensor<T, L, B>& value_of(const dtensor<T, L, B>& x) {
  return x;
}
template <element T, class L, class B, class GP>
const dtensor<T, L, B>& value_of(const variable<T, L, B, GP>& x) {
  return x.value();
}

namespace autograd_detail {

/// The node of an input (null for a dtensor or a constant).
template <class X>
counted_ref<node_base> node_of(const X& x) {
  if constexpr (is_variable<X>) return x.node();
  else return nullptr;
}

/// True when operand x needs a gradient (its backward terms are worth computing): it has a
/// node, and the running pass of a split backward (split_backward.hpp) computes it.
template <class X>
bool wants(const X& x) {
  if constexpr (is_variable<X>) return x.node() != nullptr && pass_allows(x.node().get());
  else return false;
}

/// True when an op on these operands must be recorded: grad mode on and one needs a gradient.
template <class... X>
bool recording(const X&... x) {
  return is_grad_enabled() && (wants(x) || ...);
}

/// The result of a recorded op: `y` with a node named `name` whose backward is `fn`
/// (called with the result's gradient), wired to the operands that need gradients.
/// Unrecorded: a constant variable.
template <class GP = void, element T, class L, class B, class Fn, class... X>
auto make_result(dtensor<T, L, B>&& y, const char* name, Fn&& fn, const X&... operands) {
  using P = std::conditional_t<std::is_void_v<GP>, default_grad_placements_t<typename L::placements_type>, GP>;
  using V = variable<T, L, B, P>;
  shared_value<dtensor<T, L, B>> value(std::move(y));
  if (!recording(operands...)) return V(detail::internal_t{}, std::move(value), nullptr);
  node_inputs inputs;
  inputs.reserve(sizeof...(X));
  (
      [&] {
        if (auto n = node_of(operands)) inputs.push_back(std::move(n));
      }(),
      ...);
  using N = op_node<T, typename V::grad_layout, B, std::decay_t<Fn>>;
  counted_ref<typename V::node_type> node = make_counted<N>(name, std::move(inputs), std::forward<Fn>(fn));
  return V(detail::internal_t{}, std::move(value), std::move(node));
}

/// Sends gradient g to operand x when x needs one (and the running pass of a split backward
/// computes it).
template <class X, class G>
void send(const X& x, G&& g) {
  if constexpr (is_variable<X>) {
    if (x.node() && pass_allows(x.node().get())) x.node()->accumulate(std::forward<G>(g));
  }
}

}  // namespace autograd_detail

}  // namespace spmd::runtime
