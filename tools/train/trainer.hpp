// tools/train/trainer.hpp — the training loop of `spmd-train`, written once for every model,
// mesh, backend, dp mode and compute type:
//
//   per step s:  loss = model.step(s)'s forward;  loss.backward()
//                norm = total 2-norm of the gradients (one all_reduce)
//                --clip C: gradients × min(C / (norm + 1e-6), 1)
//                optimizer step (AdamW or SGD with momentum 0.9), zero_grad
//                --checkpoint CK at step K: the training state (io/training_state.hpp)
//   --save OUT:  the final parameters, f32, under the model's names
//
// The collectives of each step are counted (comm_counter); the result keeps the last step's.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/io/checkpoint.hpp"
#include "spmd/io/training_state.hpp"
#include "spmd/nn/tree.hpp"
#include "spmd/runtime/clip_grad.hpp"
#include "spmd/runtime/comm_counter.hpp"
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

/// One progress line (the table without --json).
inline void progress(std::int64_t step, std::int64_t steps, double loss, double norm, double ms) {
  std::printf("%6lld/%-6lld %14.9g %14.6g %10.2f\n", static_cast<long long>(step), static_cast<long long>(steps), loss,
              norm, ms);
  std::fflush(stdout);
}

template <class Model, class Opt>
train_result run(const train_options& o, const inputs& in, const model_spec& spec, Model& model, Opt& opt) {
  using B = typename std::remove_cvref_t<std::tuple_element_t<0, decltype(model.params())>>::backend_type;
  train_result r;
  r.prints = spmd::io::detail::process_rank<B>() == 0;
  if (!o.resume.empty()) {
    const spmd::io::training_meta m = spmd::io::load_training_state(o.resume, opt);
    if (m.step > o.steps)
      throw usage_error("--resume " + o.resume + ": the checkpoint is at step " + std::to_string(m.step) +
                        ", past --steps " + std::to_string(o.steps));
    r.first_step = m.step;
  }
  if (in.loader) {
    r.steps_per_epoch = in.loader->steps_per_epoch();
    r.epoch = in.loader->epoch_of(o.steps - 1);
  }
  const bool table = r.prints && !o.json;
  if (table) std::printf("%13s %14s %14s %10s\n", "step", "loss", "grad_norm", "ms");
  for (std::int64_t s = r.first_step; s < o.steps; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    rt::comm_counter comm;
    double loss = 0;
    model.step(in, s, [&](auto&& l) {
      loss = scalar(l);
      l.backward();
      return 0;
    });
    auto params = model.params();
    const auto norm = std::apply([](auto&... p) { return rt::total_grad_norm(p...); }, params);
    if (o.clip) std::apply([&](auto&... p) { rt::clip_grads_with_norm_(*o.clip, norm, p...); }, params);
    opt.step();
    opt.zero_grad();
    const double n = scalar(norm);
    r.losses.push_back(loss);
    r.grad_norms.push_back(n);
    r.collectives = {comm.count(spmd::step_kind::all_gather), comm.count(spmd::step_kind::all_reduce),
                     comm.count(spmd::step_kind::reduce_scatter), comm.count(spmd::step_kind::all_to_all)};
    r.step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (table) progress(s + 1, o.steps, loss, n, r.step_ms.back());
    if (!o.checkpoint.empty() && o.checkpoint_at && s + 1 == *o.checkpoint_at)
      spmd::io::save_training_state(o.checkpoint, opt, {.step = s + 1, .generator = {}});
  }
  if (!o.save.empty()) {
    auto params = model.params();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      spmd::io::save_tensors<B>(
          o.save, {},
          std::pair<std::string_view, const typename std::remove_cvref_t<std::tuple_element_t<I, decltype(params)>>::value_type&>(
              spec.params[I].name, std::get<I>(params).value())...);
    }(std::make_index_sequence<std::tuple_size_v<decltype(params)>>{});
  }
  using M = typename std::remove_cvref_t<std::tuple_element_t<0, decltype(model.params())>>::mesh_type;
  for (spmd::index_t rank = 0; rank < M::size; ++rank)
    r.bytes_per_rank = std::max<std::int64_t>(r.bytes_per_rank, static_cast<std::int64_t>(opt.bytes_of_rank(rank).total()));
  return r;
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
  auto params = model.params();
  if (o.optimizer == "sgd") {
    auto opt = std::apply([&](auto&... p) { return rt::sgd({.lr = o.lr, .momentum = 0.9}, p...); }, params);
    return trainer_detail::run(o, in, spec, model, opt);
  }
  auto opt = std::apply([&](auto&... p) { return rt::adamw({.lr = o.lr}, p...); }, params);
  return trainer_detail::run(o, in, spec, model, opt);
}

}  // namespace spmd_train
