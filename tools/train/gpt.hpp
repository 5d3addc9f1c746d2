// tools/train/gpt.hpp — the gpt model of `spmd-train` (docs/training.md): the library's
// spmd::nn::gpt (nn/gpt.hpp) of vocabulary 64, context 16, width 32, 4 heads of 8 and 2 blocks,
// batch 8, trained on the cross entropy of the next token:
//
//   loss = cross_entropy(gpt(tokens), targets), the mean over the 8 × 16 positions
//
// Tensor parallel: nn::gpt_megatron (the heads split over tp; lm_head by vocabulary with the
// vocabulary-parallel cross entropy: the logits are never gathered). Under FSDP the units are
// nn::gpt_fsdp_units: each block, and the model. What is here is the configuration: sizes,
// the loss, INIT's parameters and the batches.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "spmd/nn/gpt.hpp"

#include "model_common.hpp"

namespace spmd_train {

/// The gpt model's sizes: spmd-train's (the defaults), or wider ones for bench/train_step.
template <index_t Vocab = 64, index_t Context = 16, index_t Width = 32, index_t Heads = 4, index_t Batch = 8>
struct gpt_sizes {
  static constexpr index_t vocab = Vocab, context = Context, width = Width, heads = Heads, batch = Batch;
};

template <class Cfg, class Sizes = gpt_sizes<>>
struct gpt_model {
  static constexpr index_t vocab = Sizes::vocab, context = Sizes::context, heads = Sizes::heads, batch = Sizes::batch;
  using host_type = nn::gpt<vocab, context, Sizes::width, heads, 2>;
  using config = Cfg;
  using Tc = typename Cfg::compute;
  static constexpr index_t static_tp = Cfg::mesh::static_shape()[1];  // spmd::dyn: given at run time
  static_assert(static_tp == spmd::dyn || heads % static_tp == 0, "spmd-train gpt: tp must divide the heads");
  /// Whether tensor parallelism over tp ranks can split the model (whole heads per rank).
  static constexpr bool tp_fits(index_t tp) { return tp >= 1 && heads % tp == 0; }
  /// The tokens and targets: the batch on dp, the positions on cp (context parallelism).
  using seq = typename Cfg::sequence_placements;

  using units = nn::gpt_fsdp_units;
  using parallel_type = decltype(Cfg::template parallelize<nn::gpt_megatron, units>(std::declval<const host_type&>()));
  parallel_type model;

  /// (per-unit data parallelism: each unit as `choose` says)
  static gpt_model load(const inputs& in, const nn::unit_chooser* choose = nullptr) {
    if (Cfg::dp_mode != dp_kind::replicate && !tp_fits(Cfg::tp()))
      throw std::invalid_argument("spmd-train gpt: tensor parallel over " + std::to_string(Cfg::tp()) +
                                  " ranks does not divide the " + std::to_string(heads) + " heads");
    return {Cfg::template parallelize<nn::gpt_megatron, units>(Cfg::template host_from<host_type>(in), choose)};
  }
  /// The step on a mesh of these sizes, for the search: the model's forward and its loss.
  static step_graph graph(const spmd::mesh_shape_vec& mesh) {
    step_graph s{spmd::autoshard::graph{mesh}, {}, {}};
    const int tokens = s.g.data({batch, context}, sizeof(std::int64_t));
    s.model = nn::trace<host_type>(s.g, tokens);
    const int targets = s.g.data({batch, context}, sizeof(std::int64_t));
    s.g.loss = nn::trace_cross_entropy<vocab>(s.g, s.model.out, targets);
    s.data = {tokens, targets};
    return s;
  }
  /// Every parameter, in the spec's order (nn::parameter_paths: the optimizer's, --save's).
  auto params() { return nn::parameters(model); }
  /// f(unit, hold, its own parameters) per unit (per-unit data parallelism: nn::for_each_unit).
  template <class F>
  void for_each_unit(F&& f) { nn::for_each_unit(model, f); }

  /// Step s's batch: the tokens and their targets.
  static auto batch_at(const inputs& in, std::int64_t s) {
    return std::pair{tokens(in, s), Cfg::template data_of<std::int64_t, seq, batch, context>(in, "targets", in.targets, s)};
  }
  /// Step s: the forward of its batch, then finish(loss) (the backward).
  template <class Finish>
  auto step(const inputs& in, std::int64_t s, Finish&& finish) {
    return step_on(batch_at(in, s), std::forward<Finish>(finish));
  }
  /// The forward of batch `b` (batch_at's), then finish(loss).
  template <class Batch, class Finish>
  auto step_on(const Batch& b, Finish&& finish) {
    const auto& [ids, targets] = b;
    const auto logits = model(ids);
    if constexpr (std::is_same_v<Tc, float>) return finish(rt::vocab_parallel_cross_entropy<vocab>(logits, targets));
    else return finish(rt::vocab_parallel_cross_entropy<vocab>(rt::cast<float>(logits), targets));  // the loss in f32
  }
  /// The logits of batch s (batch, context, vocabulary; the vocabulary split over tp), given
  /// to use(logits): what the model predicts.
  template <class Use>
  auto predict(const inputs& in, std::int64_t s, Use&& use) {
    return use(model(tokens(in, s)));
  }

 private:
  static auto tokens(const inputs& in, std::int64_t s) {
    return Cfg::template data_of<std::int64_t, seq, batch, context>(in, "tokens", in.tokens, s);
  }
};

}  // namespace spmd_train
