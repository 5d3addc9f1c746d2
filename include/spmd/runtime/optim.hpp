// spmd/runtime/optim.hpp — optimizers on sharded parameters: SGD (momentum, dampening,
// Nesterov, weight decay) and AdamW, with torch.optim's update rules and defaults.
//
//   auto w = spmd::sim::requires_grad(spmd::sim::distribute_tensor<L>(w0), "w");
//   spmd::runtime::adamw opt({.lr = 1e-3}, w, b);     // torch.optim.AdamW(lr=1e-3)
//   loss.backward(); opt.step(); opt.zero_grad();
//
// Each rank updates its own block: the update is elementwise, so a parameter's state
// (momentum_buffer, exp_avg, exp_avg_sq) is a dtensor of the parameter's own layout, and a
// step communicates nothing when the gradient has the parameter's placements. A gradient in
// another layout (a Partial(sum) one left for data parallelism) is first redistributed into
// the parameter's by a compile-time plan: that is the all_reduce DDP would make.
//
// The arithmetic is torch's single-tensor (for-loop) implementation, operation by operation,
// each rounded to the element type: SGD's d_p = g + wd·p, buf = momentum·buf + (1−dampening)·d_p
// (buf = d_p at the first step), d_p = d_p + momentum·buf (Nesterov) or buf, p = p − lr·d_p;
// AdamW's p = p·(1 − lr·wd), m = m + (1−β1)(g − m) (torch's lerp), v = β2·v + (1−β2)·g²,
// p = p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + eps). Every step is a few elementwise
// operators of the runtime, so it runs on every backend.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>

#include "spmd/runtime/autograd/node.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/ops/elementwise.hpp"

namespace spmd::runtime {

namespace optim_detail {

/// g (a gradient of p, any layout of p's shape) in p's layout.
template <class V, class G>
typename V::value_type in_param_layout(const G& g) {
  return autograd_detail::to_layout<typename V::layout_type>(G(g));
}

/// The elementwise result r in layout L (the operators keep it; the extents' spelling may
/// differ for dynamic extents).
template <class L, class D>
auto as_layout(D&& r) {
  return autograd_detail::relabel<L>(std::forward<D>(r));
}

template <class V>
void check_trainable(const V& p, const char* who) {
  if (!p.requires_grad())
    throw std::invalid_argument(std::string("spmd::") + who + ": '" + p.name() +
                                "' does not require a gradient; pass parameters made by requires_grad");
}

/// What every optimizer does with its parameters (CRTP: Derived supplies update<I>()): check
/// them, step each in turn, drop their gradients.
template <class Derived, class... Ps>
class param_group {
 public:
  explicit param_group(const char* who, Ps... params) : params_(std::move(params)...) {
    std::apply([&](const auto&... p) { (check_trainable(p, who), ...); }, params_);
  }
  /// One update of every parameter that has a gradient (one without is skipped, as torch does).
  void step() {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (static_cast<Derived&>(*this).template update<I>(), ...);
    }(std::index_sequence_for<Ps...>{});
  }
  void zero_grad() {
    std::apply([](auto&... p) { (p.zero_grad(), ...); }, params_);
  }
  /// The parameters (variables: their values are the tensors the steps update).
  const std::tuple<Ps...>& parameters() const { return params_; }
  std::tuple<Ps...>& parameters() { return params_; }
  static constexpr std::size_t size = sizeof...(Ps);

 protected:
  std::tuple<Ps...> params_;
};

}  // namespace optim_detail

/// torch.optim.SGD's arguments and defaults.
struct sgd_options {
  double lr = 1e-3;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

/// SGD over the parameters Ps (variables that require gradients).
template <class... Ps>
class sgd : public optim_detail::param_group<sgd<Ps...>, Ps...> {
  using base = optim_detail::param_group<sgd<Ps...>, Ps...>;
  friend base;

 public:
  explicit sgd(sgd_options o, Ps... params) : base("sgd", std::move(params)...), opt_(o) {
    if (o.lr < 0) throw std::invalid_argument("spmd::sgd: lr " + std::to_string(o.lr) + " is negative");
    if (o.momentum < 0)
      throw std::invalid_argument("spmd::sgd: momentum " + std::to_string(o.momentum) + " is negative");
    if (o.nesterov && (o.momentum <= 0 || o.dampening != 0))
      throw std::invalid_argument("spmd::sgd: nesterov needs a momentum > 0 and dampening 0");
  }
  /// Parameter I's momentum_buffer (empty before the first step or without momentum).
  template <std::size_t I>
  const auto& momentum_buffer() const { return std::get<I>(buffers_); }
  /// (Writable: a checkpoint's load sets it.)
  template <std::size_t I>
  auto& momentum_buffer() { return std::get<I>(buffers_); }
  const sgd_options& options() const { return opt_; }
  /// The name checkpoints record (torch's class name, lower case).
  static constexpr const char* name = "sgd";

 private:
  template <std::size_t I>
  void update() {
    auto& p = std::get<I>(this->params_);
    using V = std::remove_cvref_t<decltype(p)>;
    using L = typename V::layout_type;
    using T = typename V::element_type;
    using P = typename L::placements_type;
    if (!p.has_grad()) return;
    typename V::value_type d = optim_detail::in_param_layout<V>(p.grad());
    if (opt_.weight_decay != 0)
      d = optim_detail::as_layout<L>(runtime::add<P>(d, runtime::mul<P>(p.value(), static_cast<T>(opt_.weight_decay))));
    if (opt_.momentum != 0) {
      auto& buf = std::get<I>(buffers_);
      if (!buf) {
        buf.emplace(d);
      } else {
        auto scaled = runtime::mul<P>(*buf, static_cast<T>(opt_.momentum));
        buf.emplace(optim_detail::as_layout<L>(
            opt_.dampening == 0 ? runtime::add<P>(scaled, d)
                                : runtime::add<P>(scaled, runtime::mul<P>(d, static_cast<T>(1 - opt_.dampening)))));
      }
      if (opt_.nesterov) d = optim_detail::as_layout<L>(runtime::add<P>(d, runtime::mul<P>(*buf, static_cast<T>(opt_.momentum))));
      else d = *buf;
    }
    p.value() = optim_detail::as_layout<L>(runtime::sub<P>(p.value(), runtime::mul<P>(d, static_cast<T>(opt_.lr))));
  }

  sgd_options opt_;
  std::tuple<std::optional<typename Ps::value_type>...> buffers_;
};

/// torch.optim.AdamW's arguments and defaults.
struct adamw_options {
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 1e-2;
};

/// AdamW over the parameters Ps (variables that require gradients).
template <class... Ps>
class adamw : public optim_detail::param_group<adamw<Ps...>, Ps...> {
  using base = optim_detail::param_group<adamw<Ps...>, Ps...>;
  friend base;

 public:
  template <class V>
  struct state {
    typename V::value_type exp_avg, exp_avg_sq;
    std::int64_t step = 0;
  };

  explicit adamw(adamw_options o, Ps... params) : base("adamw", std::move(params)...), opt_(o) {
    if (o.lr < 0) throw std::invalid_argument("spmd::adamw: lr " + std::to_string(o.lr) + " is negative");
    if (!(o.beta1 >= 0 && o.beta1 < 1))
      throw std::invalid_argument("spmd::adamw: beta1 " + std::to_string(o.beta1) + " is outside [0, 1)");
    if (!(o.beta2 >= 0 && o.beta2 < 1))
      throw std::invalid_argument("spmd::adamw: beta2 " + std::to_string(o.beta2) + " is outside [0, 1)");
    if (o.eps < 0) throw std::invalid_argument("spmd::adamw: eps " + std::to_string(o.eps) + " is negative");
  }
  /// Parameter I's state (empty before its first step).
  template <std::size_t I>
  const auto& state_of() const { return std::get<I>(states_); }
  /// (Writable: a checkpoint's load sets it.)
  template <std::size_t I>
  auto& state_of() { return std::get<I>(states_); }
  const adamw_options& options() const { return opt_; }
  static constexpr const char* name = "adamw";

 private:
  template <std::size_t I>
  void update() {
    auto& p = std::get<I>(this->params_);
    using V = std::remove_cvref_t<decltype(p)>;
    using L = typename V::layout_type;
    using T = typename V::element_type;
    using P = typename L::placements_type;
    if (!p.has_grad()) return;
    const typename V::value_type g = optim_detail::in_param_layout<V>(p.grad());
    auto& s = std::get<I>(states_);
    if (!s) {
      auto zeros = factories<typename V::backend_type>::template full<T>(T(0), p.layout());
      s.emplace(state<V>{zeros, zeros, 0});
    }
    const std::int64_t t = ++s->step;
    // Decoupled weight decay first, on the parameter itself.
    if (opt_.weight_decay != 0)
      p.value() = optim_detail::as_layout<L>(runtime::mul<P>(p.value(), static_cast<T>(1 - opt_.lr * opt_.weight_decay)));
    // exp_avg.lerp_(g, 1 - β1), torch's form for a weight below 0.5: m + w·(g − m).
    const T w = static_cast<T>(1 - opt_.beta1);
    s->exp_avg = optim_detail::as_layout<L>(runtime::add<P>(s->exp_avg, runtime::mul<P>(runtime::sub<P>(g, s->exp_avg), w)));
    // exp_avg_sq.mul_(β2).addcmul_(g, g, value = 1 − β2).
    s->exp_avg_sq = optim_detail::as_layout<L>(
        runtime::add<P>(runtime::mul<P>(s->exp_avg_sq, static_cast<T>(opt_.beta2)),
                        runtime::mul<P>(runtime::mul<P>(g, static_cast<T>(1 - opt_.beta2)), g)));  // (value·g)·g, torch's order
    const double bc1 = 1 - std::pow(opt_.beta1, static_cast<double>(t));
    const double bc2 = 1 - std::pow(opt_.beta2, static_cast<double>(t));
    const double step_size = opt_.lr / bc1;
    const double bc2_sqrt = std::sqrt(bc2);
    auto denom = runtime::add<P>(runtime::div<P>(runtime::sqrt<P>(s->exp_avg_sq), static_cast<T>(bc2_sqrt)),
                                 static_cast<T>(opt_.eps));
    p.value() = optim_detail::as_layout<L>(
        runtime::sub<P>(p.value(), runtime::mul<P>(runtime::div<P>(s->exp_avg, denom), static_cast<T>(step_size))));
  }

  adamw_options opt_;
  std::tuple<std::optional<state<Ps>>...> states_;
};

}  // namespace spmd::runtime
