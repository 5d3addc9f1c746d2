// spmd/runtime/data_parallel/fully_shard.hpp — FSDP2's fully_shard: each parameter sharded on
// dim 0 over the data-parallel mesh dim, a module's parameters all-gathered together before
// its forward (and again before its backward), their gradients reduce-scattered together.
//
//   using LW1 = layout<M, placements<shard<0, 1>, shard<0, 0>>, extents<12, 8>>;  // dp × tp
//   auto w1 = rt::requires_grad(F::distribute_tensor<LW1>(w1_0), "w1");
//   auto up = rt::fully_shard<0>(w1, b1);                          // dp = mesh dim 0
//   auto h = up.forward([&](const auto& W1, const auto& B1) { return linear(x, W1, B1); });
//   loss.backward();                      // up's gradients: one reduce_scatter into w1, b1
//   static_assert(decltype(up)::collectives_per_step() == 3);
//
// A parameter's placements are its TP placements with Shard(0) on dp, dp splitting dim 0 last
// (shard<0, 1> beside a TP shard<0, 0>: DTensor's _StridedShard), so that gathering dp gives
// the TP layout (torch.chunk's uneven rule: a parameter with fewer rows than dp ranks leaves
// empty shards). In one step a unit runs, each as one coalesced collective
// (runtime/coalesce.hpp) over every parameter of the unit:
//   forward    all_gather     sharded -> the TP layout, in param_dtype    (unshard)
//   backward   all_gather     again, before the unit's backward, when the forward resharded
//                             (reshard_after_forward, default true; false keeps them)
//   backward   reduce_scatter the gradients, Partial(sum) on dp -> the parameters' layout,
//                             in reduce_dtype, once the unit's last gradient is computed
// and after it the gathered parameters are freed. The parameters, their gradients and the
// optimizer's state stay sharded: an optimizer over w1, b1 steps each rank's block.
//
// forward(f) calls f with the gathered parameters (variables whose gradients stay Partial on
// dp) and marks the end of the unit's forward on f's result: the result's backward re-gathers
// before any of the unit's operators runs its backward (that is the order a backward visits
// them). So a unit's gathered parameters must only be used inside f.
//
// Mixed precision (FSDP2's MixedPrecisionPolicy): fully_shard<0, mixed_precision<bfloat16,
// float>>(...) keeps the parameters in their own type (f32), casts each shard to bfloat16
// before the all_gather (so it moves bf16), computes in bf16, casts the gradients to float
// and reduce-scatters them in float; the optimizer steps the f32 parameters.
//
// Overlap: next.prefetch() starts the next unit's all_gather before the current unit runs,
// and prefetch_in_backward(previous) starts the previous unit's re-gather when this one's
// backward begins (FSDP2's explicit prefetching). On NCCL (B::begin_overlap) the prefetched
// all_gather runs on the communication stream beside the compute; the simulation, MPI and
// CUDA run it at once, in order (the same results, no overlap).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spmd/runtime/autograd/grad_mode.hpp"
#include "spmd/runtime/autograd/node.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/coalesce.hpp"
#include "spmd/runtime/data_parallel/ddp.hpp"
#include "spmd/runtime/data_parallel/grad_bucket.hpp"

namespace spmd::runtime {

/// FSDP2's MixedPrecisionPolicy: compute (and all-gather) in ParamDtype, reduce gradients in
/// ReduceDtype (void: the parameters' own type, and ReduceDtype defaults to ParamDtype).
template <class ParamDtype = void, class ReduceDtype = ParamDtype>
struct mixed_precision {
  using param_dtype = ParamDtype;
  using reduce_dtype = ReduceDtype;
};

/// fully_shard's run-time options.
struct fsdp_options {
  bool reshard_after_forward = true;
};

/// One FSDP unit over mesh dim DpDim: see the header comment.
template <int DpDim, class Policy, class... Ps>
class fsdp_unit {
  static_assert(sizeof...(Ps) >= 1, "spmd::fully_shard: give at least one parameter.");
  static_assert((is_variable<Ps> && ...), "spmd::fully_shard: the parameters must be variables (requires_grad).");
  using first = std::tuple_element_t<0, std::tuple<Ps...>>;
  using mesh_type = typename first::mesh_type;
  using B = typename first::backend_type;
  static_assert(DpDim >= 0 && DpDim < mesh_type::ndim,
                "spmd::fully_shard: DpDim is not a dim of the parameters' mesh.");
  static_assert((std::is_same_v<typename Ps::mesh_type, mesh_type> && ...),
                "spmd::fully_shard: every parameter must be on the same mesh.");
  static_assert((Ps::layout_type::nominal_spec().placements[DpDim].is_shard(0) && ...),
                "spmd::fully_shard: every parameter must be Shard(0) on the data-parallel mesh dim "
                "(FSDP shards dim 0; the TP placement goes on the other mesh dims).");
  static_assert((std::is_same_v<typename Ps::grad_placements, typename Ps::placements_type> && ...),
                "spmd::fully_shard: a parameter's gradient placements must be its placements (the "
                "reduce-scatter lands there); make the parameters with requires_grad and no "
                "grad_placements.");

  using T = typename first::element_type;
  static_assert((std::is_same_v<typename Ps::element_type, T> && ...),
                "spmd::fully_shard: every parameter of a unit must have the same element type.");
  /// The compute type (param_dtype) and the gradient reduction's type (reduce_dtype).
  using C = std::conditional_t<std::is_void_v<typename Policy::param_dtype>, T, typename Policy::param_dtype>;
  using Rd = std::conditional_t<std::is_void_v<typename Policy::reduce_dtype>, C, typename Policy::reduce_dtype>;

  template <class V>
  using gathered_placements = dp_detail::replace_at<typename V::placements_type, DpDim, replicate>;
  template <class V>
  using gathered_layout = layout<mesh_type, gathered_placements<V>, typename V::extents_type>;
  template <class V>
  using compute_grad_placements = dp_detail::replace_at<gathered_placements<V>, DpDim, partial<reduce_op::sum>>;
  template <class V>
  using compute_type = variable<C, gathered_layout<V>, B, compute_grad_placements<V>>;
  template <class V>
  using pending_type = dtensor<Rd, layout<mesh_type, compute_grad_placements<V>, typename V::extents_type>, B>;

  using gather_plan = coalesced_plan<to<gathered_placements<Ps>...>, typename Ps::layout_type...>;
  static_assert(gather_plan::change().none ||
                    (gather_plan::change().ok && gather_plan::change().kind == step_kind::all_gather &&
                     gather_plan::change().mesh_dims == (dim_mask{1} << DpDim)),
                "spmd::fully_shard: the parameters cannot be all-gathered over dp in one "
                "collective: dp must split dim 0 last (shard<0, 1> on dp beside shard<0, 0> on tp).");
  using bucket_type =
      dp_detail::grad_bucket<to<typename Ps::placements_type...>, std::tuple<pending_type<Ps>...>, std::tuple<Ps...>>;

  struct state {
    state(fsdp_options o, Ps... ps) : params(std::move(ps)...), options(o) {}
    std::tuple<Ps...> params;
    fsdp_options options;
    std::tuple<shared_value<typename compute_type<Ps>::value_type>...> gathered;
    bool held = false;  // the gathered values are valid
    std::shared_ptr<bucket_type> bucket;
    bool prefetched = false;                 // an all_gather started early, not yet used
    std::function<void()> pending;           // its wait, on a backend that overlaps
    std::function<void()> backward_prefetch;  // the unit to prefetch when this one re-gathers

    /// The all_gather, or the wait for a prefetched one.
    void gather() {
      if (prefetched) {
        prefetched = false;
        if (pending) {
          auto wait = std::move(pending);
          pending = nullptr;
          wait();
        }
        held = true;
        return;
      }
      all_gather();
    }
    /// The all_gather started now; on a backend that overlaps (B::begin_overlap) it runs
    /// beside the caller's next work, and gather() waits for it.
    void prefetch() {
      if (held || prefetched) return;
      prefetched = true;
      if constexpr (requires { B::begin_overlap(); }) {
        auto side = B::begin_overlap();
        all_gather();
        held = false;  // valid only once waited for
        auto done = std::make_shared<decltype(side.finish())>(side.finish());
        pending = [done] { done->wait(); };
      } else {
        all_gather();
      }
    }
    /// Every shard (in param_dtype) into the gathered values.
    void all_gather() {
      auto full = [&]<std::size_t... I>(std::index_sequence<I...>) {
        return redistribute_coalesced<to<gathered_placements<Ps>...>>(
            detail::cast_dtensor<C>(std::get<I>(params).value())...);
      }(std::index_sequence_for<Ps...>{});
      [&]<std::size_t... I>(std::index_sequence<I...>) {
        (
            [&] {
              auto& slot = std::get<I>(gathered);
              if (!slot) slot = std::remove_cvref_t<decltype(slot)>(std::move(std::get<I>(full)));
              else *slot = std::move(std::get<I>(full));
            }(),
            ...);
      }(std::index_sequence_for<Ps...>{});
      held = true;
    }
    /// Frees the gathered values' memory (they keep their layout, with no locals).
    void release() {
      if (!held || prefetched) return;
      std::apply(
          [](auto&... slot) {
            (
                [&] {
                  using D = std::remove_cvref_t<decltype(*slot)>;
                  *slot = D(detail::internal_t{}, slot->layout(),
                            typename D::storage_type(mesh_type::size, B::template held<mesh_type>()));
                }(),
                ...);
          },
          gathered);
      held = false;
    }
  };

 public:
  /// The collectives of one training step of this unit: the forward's all_gather, the
  /// backward's (when the forward reshards) and the gradients' reduce_scatter.
  static constexpr int collectives_per_step(bool reshard_after_forward = true) {
    return gather_plan::collectives() * (reshard_after_forward ? 2 : 1) + bucket_type::collectives();
  }

  explicit fsdp_unit(fsdp_options o, Ps... params) : s_(std::make_shared<state>(o, std::move(params)...)) {
    std::weak_ptr<state> w = s_;
    // After the reduce_scatter: free the gathered parameters (FSDP2's post-backward reshard).
    s_->bucket = std::make_shared<bucket_type>(s_->params, [w] {
      if (auto st = w.lock()) st->release();
    });
  }

  /// The unit's parameters gathered into their TP layouts (one all_gather), as variables whose
  /// backward hands their gradients to the unit's reduce_scatter.
  auto unshard() {
    if (!s_->prefetched) s_->held = false;  // a fresh all_gather: the parameters may have changed
    s_->gather();
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::make_tuple(view<I>()...);
    }(std::index_sequence_for<Ps...>{});
  }

  /// The end of the unit's forward, on its output y: frees the gathered parameters when
  /// reshard_after_forward, and returns y recorded so that its backward gathers them again.
  template <class Y>
  Y reshard(const Y& y) {
    if (!s_->options.reshard_after_forward) return y;
    s_->release();
    if constexpr (!is_variable<Y>) {
      return y;
    } else {
      if (!y.node() || !is_grad_enabled()) return y;
      using N0 = typename Y::node_type;
      auto fn = [st = s_, y](const typename Y::grad_type& g) {
        if (!st->held || st->prefetched) st->gather();  // (a prefetch is consumed here)
        if (st->backward_prefetch) st->backward_prefetch();  // the unit whose backward comes next
        autograd_detail::send(y, g);
      };
      using N = op_node<typename Y::element_type, typename Y::grad_layout, typename Y::backend_type, decltype(fn)>;
      counted_ref<N0> node = make_counted<N>("fully_shard", node_inputs{y.node()}, std::move(fn));
      return Y(detail::internal_t{}, y.value_ptr(), std::move(node));
    }
  }

  /// Starts this unit's all_gather now, before its forward (FSDP2's explicit forward
  /// prefetch: call it for the next unit before running the current one). On a backend that
  /// overlaps (NCCL) the all_gather runs on the communication stream beside the current
  /// unit's compute; on the others it runs now, in order.
  void prefetch() { s_->prefetch(); }
  /// When backward re-gathers this unit, prefetch `previous` too (the unit whose backward runs
  /// next: the one before it in the forward).
  template <class Unit>
  void prefetch_in_backward(const Unit& previous) {
    s_->backward_prefetch = previous.prefetcher();
  }
  /// A function that prefetches this unit while it exists (it holds no reference to it, so
  /// units that name each other do not keep each other alive).
  std::function<void()> prefetcher() const {
    return [w = std::weak_ptr<state>(s_)] {
      if (auto st = w.lock()) st->prefetch();
    };
  }

  /// unshard, f(gathered parameters...), reshard: the unit's forward.
  template <class F>
  auto forward(F&& f) {
    return reshard(std::apply(std::forward<F>(f), unshard()));
  }

  /// The parameters (sharded; for the optimizer).
  const std::tuple<Ps...>& parameters() const { return s_->params; }
  /// True while the gathered parameters are held (between unshard and the reshard).
  bool unsharded() const { return s_->held; }
  /// Bytes of the gathered parameters this process holds now (0 once resharded).
  std::size_t gathered_bytes() const {
    if (!s_->held) return 0;
    return std::apply([](const auto&... g) { return (std::size_t{0} + ... + g->bytes_held()); }, s_->gathered);
  }
  /// Bytes of the gathered parameters rank `mesh_rank` holds now, as on its own device.
  std::size_t gathered_bytes(index_t mesh_rank) const {
    if (!s_->held) return 0;
    return std::apply(
        [&](const auto&... g) {
          return (std::size_t{0} + ... + (static_cast<std::size_t>(g->layout().local_size(mesh_rank)) * sizeof(C)));
        },
        s_->gathered);
  }

 private:
  template <std::size_t I>
  auto view() const {
    using V = std::tuple_element_t<I, std::tuple<Ps...>>;
    using W = compute_type<V>;
    const auto& p = std::get<I>(s_->params);
    auto value = std::get<I>(s_->gathered);
    if (!p.node() || !is_grad_enabled()) return W(detail::internal_t{}, std::move(value), nullptr);
    auto bucket = s_->bucket;
    auto fn = [bucket](const typename W::grad_type& g) {
      bucket->template arrive<I>(detail::cast_dtensor<Rd>(g));
    };
    using N = op_node<C, typename W::grad_layout, B, decltype(fn)>;
    counted_ref<typename W::node_type> node =
        make_counted<N>("fully_shard", node_inputs{p.node()}, std::move(fn));
    return W(detail::internal_t{}, std::move(value), std::move(node));
  }

  std::shared_ptr<state> s_;
};

/// The parameters as one FSDP unit over mesh dim DpDim (FSDP2's fully_shard on a module).
template <int DpDim, class Policy = mixed_precision<>, class... Ps>
fsdp_unit<DpDim, Policy, Ps...> fully_shard(fsdp_options o, Ps... params) {
  return fsdp_unit<DpDim, Policy, Ps...>(o, std::move(params)...);
}
template <int DpDim, class Policy = mixed_precision<>, class... Ps>
  requires(is_variable<Ps> && ...)
fsdp_unit<DpDim, Policy, Ps...> fully_shard(Ps... params) {
  return fsdp_unit<DpDim, Policy, Ps...>(fsdp_options{}, std::move(params)...);
}

}  // namespace spmd::runtime
