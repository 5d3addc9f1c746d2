// tools/train/mlp.hpp — the mlp model of `spmd-train` (docs/training.md): the library's
// spmd::nn::mlp of 32 → 64 → 16 features with relu, a classifier of batch 16:
//
//   loss = cross_entropy(relu(x @ w1ᵀ + b1) @ w2ᵀ + b2, labels)      x (16, 32), 16 classes
//
// w1, b1 column-parallel and w2 row-parallel over tp (one all_reduce forward, none backward:
// x is data); b2 replicated. The batch is sharded on dp; under FSDP the model is one unit.
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "spmd/nn/modules.hpp"

#include "model_common.hpp"

namespace spmd_train {

template <class Cfg>
struct mlp_model {
  static constexpr index_t batch = 16, d_in = 32, hidden = 64, classes = 16;
  using host_type = nn::mlp<d_in, hidden, classes, nn::act::relu>;
  using config = Cfg;
  using Tc = typename Cfg::compute;
  using megatron = nn::tp_plan<nn::rule<"w1", nn::colwise>, nn::rule<"b1", nn::colwise>, nn::rule<"w2", nn::rowwise>>;

  using units = nn::units<"">;  // one unit: nothing to choose per unit
  using parallel_type = decltype(Cfg::template parallelize<megatron, units>(std::declval<const host_type&>()));
  parallel_type model;

  static mlp_model load(const inputs& in) {
    return {Cfg::template parallelize<megatron, units>(Cfg::template host_from<host_type>(in))};
  }
  /// The step on a mesh of these sizes, for the search: the model's forward and its loss.
  static step_graph graph(const spmd::mesh_shape_vec& mesh) {
    step_graph s{spmd::autoshard::graph{mesh}, {}, {}};
    const int x = s.g.data({batch, d_in}, sizeof(Tc)), labels = s.g.data({batch}, sizeof(std::int64_t));
    s.model = nn::trace<host_type>(s.g, x);
    s.g.loss = nn::trace_cross_entropy<classes>(s.g, s.model.out, labels);
    s.data = {x, labels};
    return s;
  }
  /// Every parameter, in the spec's order (the optimizer's, --save's).
  auto params() { return nn::parameters(model); }

  /// Step s's batch: the samples and their labels.
  static auto batch_at(const inputs& in, std::int64_t s) {
    return std::pair{Cfg::template batch_of<Tc, batch, d_in>(in, "x", in.x, s),
                     Cfg::template batch_of<std::int64_t, batch>(in, "labels", in.labels, s)};
  }
  /// Step s: the forward of its batch, then finish(loss) (the backward).
  template <class Finish>
  auto step(const inputs& in, std::int64_t s, Finish&& finish) {
    return step_on(batch_at(in, s), std::forward<Finish>(finish));
  }
  /// The forward of batch `b` (batch_at's), then finish(loss).
  template <class Batch, class Finish>
  auto step_on(const Batch& b, Finish&& finish) {
    const auto& [x, labels] = b;
    const auto logits = model(rt::as_variable(x));
    if constexpr (std::is_same_v<Tc, float>) return finish(rt::cross_entropy<classes>(logits, labels));
    else return finish(rt::cross_entropy<classes>(rt::cast<float>(logits), labels));  // the loss in f32
  }
};

}  // namespace spmd_train
