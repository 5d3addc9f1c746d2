// spmd/runtime/pipeline.hpp — runs a pipeline schedule's table (plan/pipeline_schedule.hpp):
// each pipeline rank's tasks slot by slot, activations forward and gradients back between
// stages, the gradients of every microbatch accumulated in the parameters'.
//
//   pp::built b = pp::build(pp::schedule_kind::one_f_one_b, {4, 1, 8});
//   runtime::pipeline::in_process link;                 // every pipeline rank here (sim, cuda)
//   double loss = runtime::pipeline::run(b.table, dims, stages, link, {0, 1, 2, 3});
//
// The model is `stages`, cut into dims.stages() pieces:
//   using activation = dtensor<...>;   what passes between stages (one type for every cut)
//   forward(stage, microbatch, in)     the stage's output (a variable); `in` is null on
//                                      stage 0, whose input is the microbatch's data
//   loss(stage, microbatch, in)        the last stage: the microbatch's share of the step's
//                                      loss (0-d; 1/microbatches of the full batch's mean)
// A stage's input is a leaf that requires a gradient; its backward sends that leaf's gradient
// to the stage before. A parameter's gradient accumulates over the microbatches' backwards,
// so after a step it is the full batch's, up to the order of the sums.
//
// Each slot: every pipeline rank held here runs its task (F, B, I or W), then the link moves
// the slot's transfers: `in_process` hands the tensors over (every pipeline rank is in this
// process: the simulation, or every rank on one GPU); spmd::mpi::pipeline_link and
// spmd::nccl::pipeline_link (backends/*/pipeline.hpp, with slot_transfers' help) send each
// process's block to the process of the same mesh index in the neighbouring stage's group. A
// table that passes pp::first_fault cannot hang (pipeline_schedule.hpp says why), so neither
// can a step.
//
// Zero bubble splits a stage's backward (autograd/split_backward.hpp): I computes the
// gradient of the stage's input and of everything on the way to it, and sends it; W, later,
// the weights'. The gradients are backward's bit for bit, so every schedule gives the same.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/autograd/split_backward.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd::runtime::pipeline {

/// What a rank holds for the next task or the link: (gradient?, stage that made it,
/// microbatch) → the tensor.
using key = std::tuple<bool, int, int>;

template <class Act>
using store = std::map<key, Act>;

/// Every pipeline rank in this process: a transfer is the tensor handed to the receiving
/// rank's store.
struct in_process {
  template <class Table, class Act>
  void exchange(const Table& t, int slot, std::span<const int> mine, std::vector<store<Act>>& stores) const {
    for (const int r : mine) {
      const pp::transfer& x = t(slot, r).send;
      if (x.peer < 0) continue;
      const key k{x.gradient, x.stage, x.microbatch};
      auto it = stores[static_cast<std::size_t>(r)].find(k);
      if (it == stores[static_cast<std::size_t>(r)].end())
        throw std::logic_error("spmd::pipeline: a send of what the rank does not hold");
      stores[static_cast<std::size_t>(x.peer)].insert_or_assign(k, std::move(it->second));
      stores[static_cast<std::size_t>(r)].erase(it);
    }
  }
};

/// What a process-to-process link (MPI, NCCL) moves for one rank in one slot: the tensor it
/// sends (to cell.send.peer), taken out of the rank's store and held until the transfer is
/// done, and an empty tensor of the activation's layout for each receive, put into the store
/// by `arrived()`. `block(x)` is this process's block of x: its data and element count (none
/// outside the mesh).
template <class Act, class B>
struct slot_transfers {
  static_assert(Act::layout_type::extents_type::is_static(),
                "spmd::pipeline: across processes the activation's shape must be known at compile time (the "
                "receiver sizes its buffer from it).");
  using value_type = typename Act::value_type;
  struct arrival {
    int peer;
    key k;
    Act value;
  };
  std::optional<Act> sending;
  std::vector<arrival> receiving;  // up to two

  slot_transfers(const pp::cell& c, store<Act>& held, const char* who) : held_(held) {
    if (c.send.peer >= 0) {
      auto it = held.find(key{c.send.gradient, c.send.stage, c.send.microbatch});
      if (it == held.end()) throw std::logic_error(std::string(who) + ": a send of what this rank does not hold");
      sending.emplace(std::move(it->second));
      held.erase(it);
    }
    for (const pp::transfer& x : c.recv)
      if (x.peer >= 0)
        receiving.push_back(arrival{x.peer, key{x.gradient, x.stage, x.microbatch},
                                    factories<B>::template empty<value_type>(typename Act::layout_type{})});
  }
  /// The received tensors into the rank's store (once the link has waited for them).
  void arrived() {
    for (arrival& a : receiving) held_.insert_or_assign(a.k, std::move(a.value));
    receiving.clear();
  }
  static std::pair<value_type*, index_t> block(Act& x) {
    auto& ls = x.locals(runtime::detail::internal_t{});
    if (ls.held_ranks().count() == 0) return {nullptr, 0};
    const index_t me = ls.held_ranks().lo;
    return {ls.data(me), ls.size(me)};
  }

 private:
  store<Act>& held_;
};

/// What run() reports of each task when asked (bench/pipeline): the pipeline rank, the task,
/// and the seconds it took on this process.
struct no_observer {
  void operator()(int, const pp::task&, double) const {}
};

namespace detail {

template <class Stages>
struct types {
  using act = typename Stages::activation;
  using in_var = decltype(requires_grad(std::declval<act>()));
  using out_var = decltype(std::declval<Stages&>().forward(0, 0, static_cast<const in_var*>(nullptr)));
  using loss_var = decltype(std::declval<Stages&>().loss(0, 0, static_cast<const in_var*>(nullptr)));
  static_assert(std::is_same_v<typename out_var::value_type, act>,
                "spmd::pipeline: a stage's forward must give the activation type the stages pass on "
                "(Stages::activation), so that every cut carries one type.");
  static_assert(std::is_same_v<typename in_var::grad_type, act>,
                "spmd::pipeline: the activation's gradient must have the activation's layout (no Partial "
                "placement between stages).");
  static_assert(out_var::rank > 0 && loss_var::rank == 0,
                "spmd::pipeline: forward gives a stage's output, loss a 0-d share of the step's loss.");
};

template <class Map, class K>
auto take(Map& m, const K& k, const char* what) {
  auto it = m.find(k);
  if (it == m.end()) throw std::logic_error(std::string("spmd::pipeline: ") + what + " is not here");
  auto v = std::move(it->second);
  m.erase(it);
  return v;
}

}  // namespace detail

/// Runs one step of `t` (a table of `dims`) for the pipeline ranks `mine`, with `link`
/// moving the transfers; returns the step's loss where the last stage is held here (the
/// sum of the microbatches' shares), 0 elsewhere. Throws std::invalid_argument when the
/// table is not one of `dims`, and std::logic_error when a task's input is not there (a
/// table that pp::first_fault refuses). `observe(rank, task, seconds)` hears each task's time.
template <class Table, class Stages, class Link, class Observer = no_observer>
double run(const Table& t, pp::shape dims, Stages& stages, Link& link, std::span<const int> mine,
           Observer&& observe = {}) {
  using ty = detail::types<Stages>;
  using act = typename ty::act;
  if (t.ranks != dims.ranks)
    throw std::invalid_argument("spmd::pipeline: a table of " + std::to_string(t.ranks) + " ranks for a pipeline of " +
                                std::to_string(dims.ranks));
  const int last = dims.stages() - 1;
  std::vector<store<act>> stores(static_cast<std::size_t>(dims.ranks));
  std::map<std::pair<int, int>, typename ty::in_var> inputs;  // (stage, microbatch)
  std::map<std::pair<int, int>, typename ty::out_var> outputs;
  std::map<std::pair<int, int>, typename ty::loss_var> losses;
  std::map<std::pair<int, int>, weight_backward> weights;  // zero bubble: I done, W to come
  double loss = 0;
  for (int slot = 0; slot < t.slots; ++slot) {
    for (const int r : mine) {
      const pp::cell& c = t(slot, r);
      if (c.continues || c.work.kind == pp::work::idle) continue;
      const auto t0 = std::chrono::steady_clock::now();
      struct report {  // the task's time, however it ends
        Observer& o;
        int r;
        const pp::task& k;
        std::chrono::steady_clock::time_point t0;
        ~report() { o(r, k, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()); }
      } timed{observe, r, c.work, t0};
      const int s = c.work.stage, m = c.work.microbatch;
      if (c.work.kind == pp::work::backward_weight) {
        detail::take(weights, std::pair{s, m}, "a stage's weight gradients").run();
        continue;
      }
      store<act>& mine_store = stores[static_cast<std::size_t>(r)];
      if (c.work.kind == pp::work::forward) {
        const typename ty::in_var* in = nullptr;
        if (s > 0) {
          auto it = inputs.emplace(std::pair{s, m}, requires_grad(detail::take(mine_store, key{false, s - 1, m},
                                                                               "a stage's input"),
                                                                  "a stage's input")).first;
          in = &it->second;
        }
        if (s == last) {
          auto l = stages.loss(s, m, in);
          loss += static_cast<double>(l.value().full_tensor()[0]);
          losses.insert_or_assign(std::pair{s, m}, std::move(l));
        } else {
          auto y = stages.forward(s, m, in);
          mine_store.insert_or_assign(key{false, s, m}, y.value());
          outputs.insert_or_assign(std::pair{s, m}, std::move(y));
        }
        continue;
      }
      // B: the whole backward; I: the input's gradient now, the weights' in W
      const bool split = c.work.kind == pp::work::backward_input;
      auto in_var = [&]() -> const typename ty::in_var* {
        auto it = inputs.find(std::pair{s, m});
        return it == inputs.end() ? nullptr : &it->second;
      }();
      auto backward = [&](const auto& y, const auto&... g) {
        if (!split) {
          y.backward(g...);
          return;
        }
        weight_backward w;
        if constexpr (sizeof...(g) == 0) w = in_var ? backward_input_of_loss(y, *in_var) : backward_input_of_loss(y);
        else w = in_var ? backward_input(y, g..., *in_var) : backward_input(y, g...);
        weights.insert_or_assign(std::pair{s, m}, std::move(w));
      };
      if (s == last) {
        backward(detail::take(losses, std::pair{s, m}, "the loss of a microbatch"));
      } else {
        const act g = detail::take(mine_store, key{true, s + 1, m}, "a stage's output gradient");
        backward(detail::take(outputs, std::pair{s, m}, "a stage's output"), g);
      }
      if (s > 0) mine_store.insert_or_assign(key{true, s, m}, detail::take(inputs, std::pair{s, m}, "a stage's input").grad());
    }
    link.exchange(t, slot, mine, stores);
  }
  return loss;
}

}  // namespace spmd::runtime::pipeline
