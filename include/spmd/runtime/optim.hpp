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
// p = p − (lr / (1−β1^t)) · m / (√v / √(1−β2^t) + eps) (core/optim_math.hpp).
//
// A step is fused: each rank's block of a parameter is updated in one pass over its elements
// (every operation still rounded as the operator would round it, so the bits are those of
// the operation-by-operation update). On the host the ranks of the simulation whose blocks
// are replicas update once and share the result; on a device backend the blocks of every
// parameter of every rank go to one kernel launch (B::fused_update).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/host/thread_pool.hpp"
#include "spmd/host/vector_math.hpp"
#include "spmd/core/optim_math.hpp"
#include "spmd/runtime/autograd/node.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/ops/elementwise.hpp"

namespace spmd::runtime {

/// Bytes one rank holds for training (param_group::bytes_of_rank).
struct training_bytes {
  std::size_t parameters = 0, gradients = 0, state = 0;
  std::size_t total() const { return parameters + gradients + state; }
};

namespace optim_detail {

/// g (a gradient of p, any layout of p's shape) in p's layout.
template <class V, class G>
typename V::value_type in_param_layout(const G& g) {
  return autograd_detail::to_layout<typename V::layout_type>(G(g));
}

/// The device blocks of one step, launched together (B::fused_update); unused on the host.
/// Each parameter's coefficients are one entry of `coeffs`, and `next[k]` makes entry k's for
/// the following step (its step count advanced): what a captured step's replay runs on the
/// host before each launch (backends/cuda/graph.hpp), so that the graph reads this step's
/// bias corrections, computed as the eager step computes them.
template <class B, class T, class Coeffs>
struct fused_batch {
  using segment_type = optim_math::segment<T, Coeffs>;
  std::vector<segment_type> segments;
  std::vector<Coeffs> coeffs;
  std::vector<std::function<Coeffs()>> next;
  /// Parameter k's entry (k = coeffs.size() before): its blocks name it.
  index_t add(const Coeffs& c, std::function<Coeffs()> then) {
    coeffs.push_back(c);
    next.push_back(std::move(then));
    return static_cast<index_t>(coeffs.size()) - 1;
  }
  void launch() {
    if constexpr (!host_memory<B>) {
      if (segments.empty()) return;
      B::template fused_update<T, Coeffs>(segments, coeffs, [next = std::move(next)](Coeffs* out) {
        for (std::size_t k = 0; k < next.size(); ++k) out[k] = next[k]();
      });
    }
  }
};

/// One rank's blocks of a host update: read from `in`, written to `out`. A block the rank owns
/// alone is updated in place; a shared one (a replica, or the zeros two state tensors start
/// from) goes to a fresh buffer, which saves the copy that copy-on-write would make first.
template <class T>
struct host_targets {
  const T* in[3] = {nullptr, nullptr, nullptr};  // p, a, b
  T* out[3] = {nullptr, nullptr, nullptr};
  host::buffer<T> fresh[3];

  template <class LS>
  void prepare(LS& pl, LS* al, LS* bl, index_t i) {
    LS* sets[3] = {&pl, al, bl};
    for (int k = 0; k < 3; ++k) {
      LS* ls = sets[k];
      if (!ls) continue;
      if (!(*ls)[i].buf || (*ls)[i].buf.unique()) {
        out[k] = ls->data(i);
        in[k] = out[k];
      } else {
        fresh[k] = host::buffer<T>(ls->size(i));
        in[k] = ls->cdata(i);
        out[k] = fresh[k].data();
      }
    }
  }
  template <class LS>
  void install(LS& pl, LS* al, LS* bl, index_t i) {
    LS* sets[3] = {&pl, al, bl};
    for (int k = 0; k < 3; ++k)
      if (sets[k] && fresh[k]) sets[k]->adopt(i, std::move(fresh[k]), sets[k]->shape(i));
  }
};

/// The update of n elements, in blocks of 16 copied to locals: the compiler vectorises the
/// block (no aliasing to fear, no epilogue), whether the update is in place or not. Decays
/// is the coefficients' weight-decay switch as a constant, so no element tests it.
template <bool Decays, class T, class Coeffs>
void update_host_rows(host_targets<T>& t, const T* g, index_t n, Coeffs c) {
  constexpr index_t w = 16;
  constexpr bool adam = std::is_same_v<Coeffs, optim_math::adamw_coeffs<T>>;
  c.decays = Decays;
  const bool has_a = t.in[1] != nullptr;
  T p[w], a[w] = {}, b[w], root[w];
  for (index_t j = 0; j < n; j += w) {
    const index_t m = n - j < w ? n - j : w;
    for (index_t q = 0; q < m; ++q) p[q] = t.in[0][j + q];
    if (has_a)
      for (index_t q = 0; q < m; ++q) a[q] = t.in[1][j + q];
    if constexpr (adam)
      for (index_t q = 0; q < m; ++q) b[q] = t.in[2][j + q];
    if constexpr (adam) {
      // The stages one at a time: the square roots (a library call) apart from the rest.
      if (m == w) {
        for (index_t q = 0; q < w; ++q) optim_math::adamw_moments(p[q], g[j + q], a[q], b[q], c);
        for (index_t q = 0; q < w; ++q) root[q] = optim_math::adamw_root(b[q]);
        for (index_t q = 0; q < w; ++q) optim_math::adamw_apply(p[q], a[q], root[q], c);
      } else {
        for (index_t q = 0; q < m; ++q) optim_math::adamw_elem(p[q], g[j + q], a[q], b[q], c);
      }
    } else if (m == w) {
      for (index_t q = 0; q < w; ++q) optim_math::sgd_elem(p[q], g[j + q], a[q], c);
    } else {
      for (index_t q = 0; q < m; ++q) optim_math::sgd_elem(p[q], g[j + q], a[q], c);
    }
    for (index_t q = 0; q < m; ++q) t.out[0][j + q] = p[q];
    if (has_a)
      for (index_t q = 0; q < m; ++q) t.out[1][j + q] = a[q];
    if constexpr (adam)
      for (index_t q = 0; q < m; ++q) t.out[2][j + q] = b[q];
  }
}
template <class T, class Coeffs>
void update_host_block(host_targets<T>& t, const T* g, index_t n, const Coeffs& c) {
  if constexpr (std::is_same_v<Coeffs, optim_math::adamw_coeffs<float>>) {
    // host/vector_math.hpp's AdamW: the same operations in vector registers (the same bits)
    if (t.in[1] && t.in[2]) return host::vector_math::adamw(t.in[0], g, t.in[1], t.in[2], t.out[0], t.out[1], t.out[2], n, c);
  }
  if (c.decays) update_host_rows<true>(t, g, n, c);
  else update_host_rows<false>(t, g, n, c);
}

/// Updates the held blocks `pl` of a parameter with its gradient's `gl` and its state's `al`,
/// `bl` (null: none): on the host now, rank by rank (ranks whose four blocks are replicas of an
/// earlier rank's share its result); on a device, queued in `batch` (same element type) or
/// launched now. `next()` gives the parameter's coefficients of the step after (a captured
/// step's replay: fused_batch); only the device backends keep it, and the host's is empty.
/// Over blocks, not dtensors: one instance per element type and optimizer, not one per
/// parameter's layout (update_blocks below is the per-parameter part).
template <class B, class T, class Coeffs, class S, class Batch>
void update_locals(S& pl, const S& gl, S* al, S* bl, const Coeffs& c, std::function<Coeffs()> next, Batch& batch) {
  if constexpr (host_memory<B>) {
    // Ranks whose four blocks are the same buffers as an earlier rank's (replicas) take its
    // result; the others are computed, in parallel over the simulation's threads.
    struct job {
      index_t rank;
      const T *p, *g, *a, *b;
      host_targets<T> out;
    };
    std::vector<job> jobs;
    std::vector<std::pair<index_t, index_t>> twins;  // (rank, the rank it shares)
    for (const index_t i : pl.held()) {
      const T* key[4] = {pl.cdata(i), gl.cdata(i), al ? al->cdata(i) : nullptr, bl ? bl->cdata(i) : nullptr};
      const auto twin = std::find_if(jobs.begin(), jobs.end(), [&](const job& j) {
        return key[0] != nullptr && j.p == key[0] && j.g == key[1] && j.a == key[2] && j.b == key[3];
      });
      if (twin != jobs.end()) {
        twins.emplace_back(i, twin->rank);
        continue;
      }
      job j{i, key[0], key[1], key[2], key[3], {}};
      j.out.prepare(pl, al, bl, i);
      jobs.push_back(std::move(j));
    }
    host::parallel_for(static_cast<index_t>(jobs.size()), [&](index_t k) {
      job& j = jobs[static_cast<std::size_t>(k)];
      update_host_block(j.out, gl.cdata(j.rank), pl.size(j.rank), c);
    });
    for (job& j : jobs) j.out.install(pl, al, bl, j.rank);
    for (const auto& [i, from] : twins) {
      pl.share(i, from);
      if (al) al->share(i, from);
      if (bl) bl->share(i, from);
    }
  } else {
    using Seg = optim_math::segment<T, Coeffs>;
    // Another element type than the batch's: a batch of its own, launched now.
    fused_batch<B, T, Coeffs> own;
    auto& into = [&]() -> auto& {
      if constexpr (std::is_same_v<typename Batch::segment_type, Seg>) return batch;
      else return own;
    }();
    const index_t k = into.add(c, std::move(next));
    for (const index_t i : pl.held())
      into.segments.push_back(Seg{pl.data(i), gl.data(i), al ? al->data(i) : nullptr, bl ? bl->data(i) : nullptr,
                                  pl.size(i), k});
    own.launch();
  }
}

/// Updates parameter p (a dtensor) with gradient g in its layout and state a, b (null: none):
/// update_locals over their blocks.
template <class Coeffs, class D, class G, class Next, class Batch>
void update_blocks(D& p, const G& g, D* a, D* b, const Coeffs& c, Next&& next, Batch& batch) {
  using B = typename D::backend_type;
  std::function<Coeffs()> then;
  if constexpr (!host_memory<B>) then = std::forward<Next>(next);
  constexpr detail::internal_t in{};
  update_locals<B, typename D::value_type>(p.locals(in), g.locals(), a ? &a->locals(in) : nullptr,
                                           b ? &b->locals(in) : nullptr, c, std::move(then), batch);
}

template <class V>
std::size_t block_bytes(const V& p, index_t mesh_rank) {
  return static_cast<std::size_t>(p.layout().local_size(mesh_rank)) * sizeof(typename V::element_type);
}

/// An option that must be a number >= 0 (torch.optim's `not 0.0 <= x`, which refuses NaN
/// too; torch's SGD lets a NaN lr through, spmd refuses it everywhere).
inline void check_non_negative(const char* who, const char* name, double v) {
  if (!(v >= 0))
    throw std::invalid_argument(std::string("spmd::") + who + ": " + name + " " + std::to_string(v) +
                                (v < 0 ? " is negative" : " is not a number"));
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
    auto& self = static_cast<Derived&>(*this);
    using first = std::tuple_element_t<0, std::tuple<Ps...>>;
    using T0 = typename first::element_type;
    // The gradients in the parameters' layouts live until a device launch has read them.
    std::tuple<std::optional<typename Ps::value_type>...> grads;
    fused_batch<typename first::backend_type, T0, typename Derived::template coeffs<T0>> batch;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            auto& p = std::get<I>(params_);
            if (!p.has_grad()) return;  // skipped, as torch does
            auto& g = std::get<I>(grads);
            g.emplace(in_param_layout<std::remove_cvref_t<decltype(p)>>(p.grad()));
            self.template update<I>(p, *g, batch);
          }(),
          ...);
    }(std::index_sequence_for<Ps...>{});
    batch.launch();
  }
  void zero_grad() {
    std::apply([](auto&... p) { (p.zero_grad(), ...); }, params_);
  }
  /// What rank `mesh_rank` holds for these parameters, their gradients and the optimizer's
  /// state, in bytes: its blocks' elements times the element size, as a rank on its own
  /// device holds them (the simulation's replicas share memory; that is not subtracted).
  training_bytes bytes_of_rank(index_t mesh_rank) const {
    training_bytes b;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (
          [&] {
            const auto& p = std::get<I>(params_);
            const std::size_t block = block_bytes(p, mesh_rank);
            b.parameters += block;
            if (p.has_grad())
              b.gradients += static_cast<std::size_t>(p.grad().layout().local_size(mesh_rank)) *
                             sizeof(typename std::remove_cvref_t<decltype(p)>::element_type);
            b.state += block * static_cast<const Derived&>(*this).template state_tensors<I>();
          }(),
          ...);
    }(std::index_sequence_for<Ps...>{});
    return b;
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
    optim_detail::check_non_negative("sgd", "lr", o.lr);
    optim_detail::check_non_negative("sgd", "momentum", o.momentum);
    optim_detail::check_non_negative("sgd", "weight_decay", o.weight_decay);
    if (std::isnan(o.dampening))
      throw std::invalid_argument("spmd::sgd: dampening " + std::to_string(o.dampening) + " is not a number");
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
  /// State tensors parameter I has now (its momentum buffer, once made).
  template <std::size_t I>
  std::size_t state_tensors() const { return std::get<I>(buffers_) ? 1 : 0; }

 private:
  template <class T>
  using coeffs = optim_math::sgd_coeffs<T>;

  /// Parameter I's coefficients for its next step: the momentum buffer starts as the gradient
  /// at the first (its zeros are not used).
  template <std::size_t I, class T>
  optim_math::sgd_coeffs<T> coefficients() const {
    optim_math::sgd_coeffs<T> c;
    c.decays = opt_.weight_decay != 0;
    c.weight_decay = static_cast<T>(opt_.weight_decay);
    c.has_momentum = opt_.momentum != 0;
    c.momentum = static_cast<T>(opt_.momentum);
    c.first = c.has_momentum && !std::get<I>(buffers_);
    c.dampened = opt_.dampening != 0;
    c.one_minus_dampening = static_cast<T>(1 - opt_.dampening);
    c.nesterov = opt_.nesterov;
    c.lr = static_cast<T>(opt_.lr);
    return c;
  }

  /// Parameter I's update with its gradient g in its layout (param_group::step).
  template <std::size_t I, class V, class G, class Batch>
  void update(V& p, const G& g, Batch& batch) {
    using T = typename V::element_type;
    const optim_math::sgd_coeffs<T> c = coefficients<I, T>();
    auto& buf = std::get<I>(buffers_);
    if (c.first) buf.emplace(factories<typename V::backend_type>::template full<T>(T(0), p.layout()));
    optim_detail::update_blocks(p.value(), g, c.has_momentum ? &*buf : nullptr,
                                static_cast<typename V::value_type*>(nullptr), c,
                                [this] { return coefficients<I, T>(); }, batch);
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
    optim_detail::check_non_negative("adamw", "lr", o.lr);
    if (!(o.beta1 >= 0 && o.beta1 < 1))
      throw std::invalid_argument("spmd::adamw: beta1 " + std::to_string(o.beta1) + " is outside [0, 1)");
    if (!(o.beta2 >= 0 && o.beta2 < 1))
      throw std::invalid_argument("spmd::adamw: beta2 " + std::to_string(o.beta2) + " is outside [0, 1)");
    optim_detail::check_non_negative("adamw", "eps", o.eps);
    optim_detail::check_non_negative("adamw", "weight_decay", o.weight_decay);
  }
  /// Parameter I's state (empty before its first step).
  template <std::size_t I>
  const auto& state_of() const { return std::get<I>(states_); }
  /// (Writable: a checkpoint's load sets it.)
  template <std::size_t I>
  auto& state_of() { return std::get<I>(states_); }
  const adamw_options& options() const { return opt_; }
  static constexpr const char* name = "adamw";
  /// State tensors parameter I has now (exp_avg and exp_avg_sq, once made).
  template <std::size_t I>
  std::size_t state_tensors() const { return std::get<I>(states_) ? 2 : 0; }

 private:
  template <class T>
  using coeffs = optim_math::adamw_coeffs<T>;

  /// Parameter I's update with its gradient g in its layout (param_group::step).
  template <std::size_t I, class V, class G, class Batch>
  void update(V& p, const G& g, Batch& batch) {
    using T = typename V::element_type;
    auto& s = std::get<I>(states_);
    if (!s) {
      using F = factories<typename V::backend_type>;
      s.emplace(state<V>{F::template full<T>(T(0), p.layout()), F::template full<T>(T(0), p.layout()), 0});
    }
    optim_detail::update_blocks(p.value(), g, &s->exp_avg, &s->exp_avg_sq, advance<I, T>(), [this] { return advance<I, T>(); },
                                batch);
  }

  /// Parameter I's step count advanced, and its coefficients at that step.
  template <std::size_t I, class T>
  optim_math::adamw_coeffs<T> advance() {
    const std::int64_t t = ++std::get<I>(states_)->step;
    const double bc1 = 1 - std::pow(opt_.beta1, static_cast<double>(t));
    const double bc2 = 1 - std::pow(opt_.beta2, static_cast<double>(t));
    optim_math::adamw_coeffs<T> c;
    c.decays = opt_.weight_decay != 0;
    c.decay = static_cast<T>(1 - opt_.lr * opt_.weight_decay);
    c.one_minus_beta1 = static_cast<T>(1 - opt_.beta1);
    c.beta2 = static_cast<T>(opt_.beta2);
    c.one_minus_beta2 = static_cast<T>(1 - opt_.beta2);
    c.bc2_sqrt = static_cast<T>(std::sqrt(bc2));
    c.eps = static_cast<T>(opt_.eps);
    c.step_size = static_cast<T>(opt_.lr / bc1);
    return c;
  }

  adamw_options opt_;
  std::tuple<std::optional<state<Ps>>...> states_;
};

}  // namespace spmd::runtime
