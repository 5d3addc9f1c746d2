// spmd/runtime/data_parallel/grad_bucket.hpp — gradients gathered as a backward produces them
// and reduced together: DDP's bucket, FSDP's per-module reduce-scatter.
//
// A bucket knows, at compile time, the tensors it reduces (their pending gradients' types
// G..., the target placements P..., and the parameters V... the results go to). During a
// backward each gradient `arrive`s once; when the last one has, the bucket runs one
// redistribute_coalesced (runtime/coalesce.hpp) and sends every result to its parameter's
// node. A gradient that never arrives (a parameter the step did not use) is reduced as zeros
// when the backward ends (queue_callback) and its parameter gets no gradient, as in torch.
// A result of another element type than its parameter's (FSDP's reduce_dtype) is cast to it.
// Every rank builds the same graph, so buckets fire in the same order everywhere: the
// collectives match across processes.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <tuple>
#include <utility>

#include "spmd/runtime/autograd/node.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/coalesce.hpp"

namespace spmd::runtime::dp_detail {

template <class To, class Pending, class Targets>
class grad_bucket;

template <class... P, class... G, class... V>
class grad_bucket<to<P...>, std::tuple<G...>, std::tuple<V...>>
    : public std::enable_shared_from_this<grad_bucket<to<P...>, std::tuple<G...>, std::tuple<V...>>> {
  static_assert(sizeof...(P) == sizeof...(G) && sizeof...(G) == sizeof...(V));

 public:
  explicit grad_bucket(std::tuple<V...> targets, std::function<void()> after = {})
      : targets_(std::move(targets)), after_(std::move(after)) {}

  /// Gradient I is ready (its type is G_I's).
  template <std::size_t I, class D>
  void arrive(D&& g) {
    auto& slot = std::get<I>(stash_);
    if (!slot) ++arrived_;
    slot.emplace(std::forward<D>(g));
    if (!queued_) {
      queued_ = true;
      queue_callback([self = this->shared_from_this()] { self->finish(); });
    }
    if (arrived_ == static_cast<int>(sizeof...(G))) fire();
  }

  /// How many collectives a full bucket runs (0 when nothing moves: a mesh dim of size 1).
  static constexpr int collectives() {
    return coalesced_plan<to<P...>, typename G::layout_type...>::collectives();
  }

 private:
  void finish() {
    queued_ = false;
    if (arrived_ > 0) fire();
  }

  void fire() {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      const bool had[] = {std::get<I>(stash_).has_value()...};
      (
          [&] {
            auto& slot = std::get<I>(stash_);
            using GI = std::tuple_element_t<I, std::tuple<G...>>;
            using T = typename GI::value_type;
            if (!slot)
              slot.emplace(factories<typename GI::backend_type>::template full<T>(
                  T(0), typename GI::layout_type{std::get<I>(targets_).layout().extents()}));
          }(),
          ...);
      auto reduced = redistribute_coalesced<to<P...>>(*std::get<I>(stash_)...);
      ((std::get<I>(stash_).reset()), ...);
      arrived_ = 0;
      (
          [&] {
            if (!had[I]) return;
            using VT = typename std::tuple_element_t<I, std::tuple<V...>>::element_type;
            auto& r = std::get<I>(reduced);
            using R = std::remove_cvref_t<decltype(r)>;
            if constexpr (std::is_same_v<typename R::value_type, VT>)
              autograd_detail::send(std::get<I>(targets_), std::move(r));
            else  // reduced in another type than the parameter's (mixed precision)
              autograd_detail::send(std::get<I>(targets_), detail::cast_dtensor<VT>(r));
          }(),
          ...);
    }(std::index_sequence_for<G...>{});
    if (after_) after_();
  }

  std::tuple<V...> targets_;
  std::function<void()> after_;  // what the owner does once the gradients are sent
  std::tuple<std::optional<G>...> stash_;
  int arrived_ = 0;
  bool queued_ = false;
};

}  // namespace spmd::runtime::dp_detail
