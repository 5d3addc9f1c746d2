// tools/train/trainer.hpp — the training loop of `spmd-train`, written once for every model,
// mesh, backend, dp mode and compute type:
//
//   per step s:  loss = model.step(s)'s forward;  loss.backward()
//                norm = total 2-norm of the gradients (one all_reduce)
//                --clip C: gradients × min(C / (norm + 1e-6), 1)
//                optimizer step (AdamW or SGD with momentum 0.9), zero_grad
//                --checkpoint CK at step K: the training state (io/training_state.hpp)
//   --save OUT:  the final parameters, f32, under the model's names
//   --graph:     (CUDA) the first step eager, the second captured as one CUDA graph, every later
//                one a replay of it with the step's batch copied into the graph's
//
// The collectives of each step are counted (comm_counter); the result keeps the last step's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/io/checkpoint.hpp"
#include "spmd/io/training_state.hpp"
#include "spmd/nn/tree.hpp"
#include "spmd/nn/unit_choice.hpp"
#include "spmd/runtime/clip_grad.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/copy_into.hpp"
#include "spmd/runtime/optim.hpp"

#include "inputs.hpp"
#include "options.hpp"
#include "result.hpp"

namespace spmd_train {

namespace trainer_detail {

/// The first element of a replicated dtensor (the loss, the norm), on the host.
template <class X>
double scalar(const X& x) {
  const auto v = x.full_tensor();
  return v.empty() ? 0.0 : static_cast<double>(v[0]);
}

/// A value read after each step (the loss, the norm), kept in a tensor made before a captured
/// step (--graph): the capture copies into it (runtime::copy_into), the host reads it after
/// the launch.
struct kept_scalar {
  std::shared_ptr<void> tensor;
  std::function<double()> read;

  /// x: a dtensor, or a variable (its value).
  template <class X>
  void keep(const X& x) {
    if constexpr (rt::is_variable<X>) {
      keep(x.value());
    } else {
      using T = typename X::value_type;
      using B = typename X::backend_type;
      if (!tensor) {
        auto t = std::make_shared<X>(rt::factories<B>::template full<T>(T(0), x.layout()));
        tensor = t;
        read = [t] { return scalar(*t); };
      }
      rt::copy_into(*static_cast<X*>(tensor.get()), x);
    }
  }
};

/// --graph's state: the step captured once and replayed (B::graph_type: the CUDA backend's
/// spmd::cuda::step_graph), the batch it reads (refilled before each replay) and what it leaves.
template <class B, class Batch>
struct graphed {
  typename B::graph_type graph;
  std::optional<Batch> batch;
  kept_scalar loss, norm;
};

/// One progress line (the table without --json).
inline void progress(std::int64_t step, std::int64_t steps, double loss, double norm, double ms) {
  std::printf("%6lld/%-6lld %14.9g %14.6g %10.2f\n", static_cast<long long>(step), static_cast<long long>(steps), loss,
              norm, ms);
  std::fflush(stdout);
}

/// f(the optimizer --optimizer names, over the tuple of parameters `params`).
template <class Params, class F>
decltype(auto) with_optimizer(const train_options& o, const Params& params, F&& f) {
  if (o.optimizer == "sgd") return f(std::apply([&](auto&... p) { return rt::sgd({.lr = o.lr, .momentum = 0.9}, p...); }, params));
  return f(std::apply([&](auto&... p) { return rt::adamw({.lr = o.lr}, p...); }, params));
}

/// The parameters of a model with one optimizer over its parameter tuple: what the loop does
/// with them (the norm, clipping, the optimizer's step, --save, checkpoints).
template <class Model, class Opt>
struct whole_model {
  Model& model;
  Opt& opt;
  using first = std::remove_cvref_t<std::tuple_element_t<0, decltype(std::declval<Model&>().params())>>;
  using backend_type = typename first::backend_type;
  using mesh_type = typename first::mesh_type;

  auto norm() {
    return std::apply([](auto&... p) { return rt::total_grad_norm(p...); }, model.params());
  }
  template <class N>
  void clip(double c, const N& norm) {
    std::apply([&](auto&... p) { rt::clip_grads_with_norm_(c, norm, p...); }, model.params());
  }
  void step() {
    opt.step();
    opt.zero_grad();
  }
  std::size_t bytes_of_rank(spmd::index_t rank) const { return opt.bytes_of_rank(rank).total(); }
  void save(const std::string& path, const model_spec& spec) {
    auto params = model.params();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      spmd::io::save_tensors<backend_type>(
          path, {},
          std::pair<std::string_view, const typename std::remove_cvref_t<std::tuple_element_t<I, decltype(params)>>::value_type&>(
              spec.params[I].name, std::get<I>(params).value())...);
    }(std::make_index_sequence<std::tuple_size_v<decltype(params)>>{});
  }
  void save_state(const std::string& path, std::int64_t step) {
    spmd::io::save_training_state(path, opt, {.step = step, .generator = {}});
  }
  std::int64_t load_state(const std::string& path) { return spmd::io::load_training_state(path, opt).step; }
};

/// The parameters of a model whose units chose FSDP or DDP at run time (nn/unit_choice.hpp): an
/// optimizer per unit, made as the unit's types say, behind functions of one type. The norm is
/// the units' sums of squares added, then one all_reduce: the whole model's, up to rounding.
template <class Model>
struct unit_parts {
  using mesh_type = typename Model::config::mesh;
  using backend_type = typename Model::config::backend;
  using partial_type = rt::dtensor<float, spmd::layout<mesh_type, typename rt::detail::all_partial<mesh_type, spmd::reduce_op::sum>::type,
                                                       spmd::extents<>>, backend_type>;
  using norm_type = decltype(rt::grad_norm_of(std::declval<const partial_type&>()));
  struct part {
    std::function<partial_type()> square_sum;
    std::function<void(double, const norm_type&)> clip;
    std::function<void()> step;
    std::function<std::size_t(spmd::index_t)> bytes_of_rank;
    std::function<void(std::vector<spmd::io::saved_tensor>&)> to_save;
  };
  std::vector<part> parts;
  std::vector<spmd::io::state_part> states;  // each unit's optimizer's share of a checkpoint

  unit_parts(Model& model, const train_options& o) {
    model.for_each_unit([&](std::string_view, nn::dp_hold, auto params) {
      with_optimizer(o, params, [&](auto opt) { add(params, std::make_shared<decltype(opt)>(std::move(opt))); });
    });
  }
  template <class Params, class Opt>
  void add(Params params, std::shared_ptr<Opt> opt) {
    states.push_back(spmd::io::state_part_of(*opt));
    parts.push_back(part{
        [params] { return std::apply([](auto&... p) { return rt::grad_square_sum(p...); }, params); },
        [params](double c, const norm_type& n) { std::apply([&](auto&... p) { rt::clip_grads_with_norm_(c, n, p...); }, params); },
        [opt] {
          opt->step();
          opt->zero_grad();
        },
        [opt](spmd::index_t rank) { return opt->bytes_of_rank(rank).total(); },
        [params](std::vector<spmd::io::saved_tensor>& out) {
          std::apply([&](auto&... p) { (out.push_back(spmd::io::to_save(p.name(), p.value())), ...); }, params);
        }});
  }

  norm_type norm() {
    partial_type sum = parts.front().square_sum();
    for (std::size_t i = 1; i < parts.size(); ++i) sum = rt::add<typename partial_type::placements_type>(sum, parts[i].square_sum());
    return rt::grad_norm_of(sum);
  }
  void clip(double c, const norm_type& n) {
    for (part& p : parts) p.clip(c, n);
  }
  void step() {
    for (part& p : parts) p.step();
  }
  std::size_t bytes_of_rank(spmd::index_t rank) const {
    std::size_t b = 0;
    for (const part& p : parts) b += p.bytes_of_rank(rank);
    return b;
  }
  /// --save: every parameter, in the spec's order (the file the whole model writes).
  void save(const std::string& path, const model_spec& spec) {
    std::vector<spmd::io::saved_tensor> all, ordered;
    for (part& p : parts) p.to_save(all);
    for (const auto& want : spec.params)
      for (spmd::io::saved_tensor& t : all)
        if (t.entry.name == want.name) ordered.push_back(std::move(t));
    if (ordered.size() != spec.params.size())
      throw std::logic_error("spmd-train: the units hold other parameters than the spec lists");
    spmd::io::save_tensors<backend_type>(path, {}, ordered);
  }
  /// One checkpoint of every unit's optimizer, in the whole model's format: any parallelisation
  /// resumes it.
  void save_state(const std::string& path, std::int64_t step) {
    spmd::io::save_training_state<backend_type>(path, states, {.step = step, .generator = {}});
  }
  std::int64_t load_state(const std::string& path) { return spmd::io::load_training_state(path, states).step; }
};

template <class Model, class Params>
train_result run(const train_options& o, const inputs& in, Model& model, Params& ps) {
  using B = typename Params::backend_type;
  train_result r;
  r.prints = spmd::io::detail::process_rank<B>() == 0;
  if (!o.resume.empty()) {
    const std::int64_t step = ps.load_state(o.resume);
    if (step > o.steps)
      throw usage_error("--resume " + o.resume + ": the checkpoint is at step " + std::to_string(step) +
                        ", past --steps " + std::to_string(o.steps));
    r.first_step = step;
  }
  if (in.loader) {
    r.steps_per_epoch = in.loader->steps_per_epoch();
    r.epoch = in.loader->epoch_of(o.steps - 1);
  }
  const bool table = r.prints && !o.json;
  if (table) std::printf("%13s %14s %14s %10s\n", "step", "loss", "grad_norm", "ms");
  // --graph (the CUDA backend): the first step runs eagerly (plans' tables uploaded, optimizer
  // state made, the loss and norm given tensors of their own), the second is captured as one
  // CUDA graph, and every later one refills the graph's batch and replays it.
  using batch_type = decltype(Model::batch_at(in, 0));
  constexpr bool can_graph = requires { typename B::graph_type; };
  using graph_state = std::conditional_t<can_graph, graphed<B, batch_type>, int>;
  std::unique_ptr<graph_state> g;
  if (o.graph) {
    if constexpr (can_graph) g = std::make_unique<graph_state>();
    else throw usage_error(std::string("--graph: the ") + B::name + " backend has no graphs (--backend cuda)");
  }
  for (std::int64_t s = r.first_step; s < o.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    rt::comm_counter comm;
    double loss = 0, n = 0;
    // The step: on_loss and on_norm take the loss and the norm, to read them now (eager) or to
    // copy them into tensors of their own, read after the launch (graph mode).
    const auto one_step = [&](const batch_type& batch, auto&& on_loss, auto&& on_norm) {
      model.step_on(batch, [&](auto&& l) {
        on_loss(l);
        l.backward();
        return 0;
      });
      const auto norm = ps.norm();
      if (o.clip) ps.clip(*o.clip, norm);
      ps.step();
      on_norm(norm);
    };
    bool replayed = false;
    if constexpr (can_graph) {
      if (g && s > r.first_step) {
        auto keep = [](kept_scalar& k) { return [&k](const auto& x) { k.keep(x); }; };
        batch_type batch = Model::batch_at(in, s);
        if (!g->graph.captured()) {
          g->batch.emplace(std::move(batch));
          g->graph.capture([&] { one_step(*g->batch, keep(g->loss), keep(g->norm)); });
        } else {
          rt::copy_into(g->batch->first, batch.first);
          rt::copy_into(g->batch->second, batch.second);
          g->graph.replay();
          replayed = true;
        }
        g->graph.wait();
        loss = g->loss.read();
        n = g->norm.read();
      }
    }
    if (!g || s == r.first_step) {
      const batch_type batch = Model::batch_at(in, s);
      // With --graph, this step also makes the tensors the captured one copies the loss and
      // the norm into: made inside the capture, they would outlive it.
      one_step(
          batch,
          [&](const auto& l) {
            loss = scalar(l);
            if constexpr (can_graph)
              if (g) g->loss.keep(l);
          },
          [&](const auto& norm) {
            n = scalar(norm);
            if constexpr (can_graph)
              if (g) g->norm.keep(norm);
          });
    }
    r.losses.push_back(loss);
    r.grad_norms.push_back(n);
    // A replay runs on the device only: the collectives are the captured step's.
    if (!replayed)
      r.collectives = {comm.count(spmd::step_kind::all_gather), comm.count(spmd::step_kind::all_reduce),
                       comm.count(spmd::step_kind::reduce_scatter), comm.count(spmd::step_kind::all_to_all)};
    r.step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (table) progress(s + 1, o.steps, loss, n, r.step_ms.back());
    if (!o.checkpoint.empty() && o.checkpoint_at && s + 1 == *o.checkpoint_at) ps.save_state(o.checkpoint, s + 1);
  }
  return r;
}

/// After run: --save, and the most bytes any rank holds.
template <class Params>
void finish(const train_options& o, const model_spec& spec, Params& ps, train_result& r) {
  if (!o.save.empty()) ps.save(o.save, spec);
  using M = typename Params::mesh_type;
  for (spmd::index_t rank = 0; rank < M::size; ++rank)
    r.bytes_per_rank = std::max<std::int64_t>(r.bytes_per_rank, static_cast<std::int64_t>(ps.bytes_of_rank(rank)));
}

}  // namespace trainer_detail

/// Trains Model (mlp_model<Cfg> or gpt_model<Cfg>) as `o` says.
template <class Model>
train_result train(const train_options& o, const inputs& in, const model_spec& spec) {
  // --save and --checkpoint name the parameters by the spec: it must list the model's paths.
  constexpr auto paths = spmd::nn::parameter_paths<typename Model::host_type>();
  bool same = spec.params.size() == paths.size();
  for (std::size_t i = 0; same && i < paths.size(); ++i) same = spec.params[i].name == paths[i];
  if (!same) throw std::logic_error("spmd-train: the spec of " + spec.name + " lists other parameters than the model");
  Model model = Model::load(in);
  const auto go = [&](auto& ps) {
    train_result r = trainer_detail::run(o, in, model, ps);
    trainer_detail::finish(o, spec, ps, r);
    return r;
  };
  if constexpr (Model::config::dp_mode == dp_kind::per_unit) {
    throw std::logic_error("spmd-train: a per-unit model trains with train_per_unit");
  } else {
    return trainer_detail::with_optimizer(o, model.params(), [&](auto opt) {
      trainer_detail::whole_model<Model, decltype(opt)> ps{model, opt};
      return go(ps);
    });
  }
}

/// Trains Model (a model of per-unit data parallelism) with each unit held as `choose` says: an
/// optimizer per unit (trainer_detail::unit_parts).
template <class Model>
train_result train_per_unit(const train_options& o, const inputs& in, const model_spec& spec, const nn::unit_chooser& choose) {
  Model model = Model::load(in, &choose);
  trainer_detail::unit_parts<Model> ps(model, o);
  train_result r = trainer_detail::run(o, in, model, ps);
  trainer_detail::finish(o, spec, ps, r);
  return r;
}

}  // namespace spmd_train
