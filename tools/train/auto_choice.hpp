// tools/train/auto_choice.hpp — `spmd-train --parallel auto`: at start-up, on this run's mesh,
// the automatic-sharding search (docs/auto.md) costs each parallelisation the tool has
// compiled and the tool trains with the cheapest:
//
//   fsdp        Megatron's plan on tp, FSDP on dp (the batch split on dp)
//   ddp         Megatron's plan on tp, DDP on dp (on dp > 1)
//   replicate   every parameter and the batch whole on every rank: no collective
//   per-unit    each FSDP unit (the gpt: the model, each block) FSDP or DDP: every mix is
//               searched (autoshard::choose_mix) and one that beats the three runs, as
//               nn::parallelize_per_unit builds it (two instantiations per distinct unit)
//
// Each is the model's step graph (nn/step_graph.hpp) with its parameters' layouts at rest (read
// from the parallel model's types: nn/parallel_pins.hpp), the layouts its operators read them
// in (whole on dp, as FSDP gathers them) and its batch's pinned; the search places the
// activations. The search without pins runs too: when the best candidate is as fast
// as it, the tool runs a step the cost model calls optimal over every placement. Each
// candidate is one instantiation of the model: linear in the candidates, never a product.
#pragma once

#include <chrono>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "spmd/autoshard/choose.hpp"
#include "spmd/nn/parallel_pins.hpp"
#include "spmd/nn/unit_choice.hpp"

#include "model_common.hpp"
#include "options.hpp"
#include "result.hpp"

namespace spmd_train {

/// The pins of candidate Model (a model of spmd-train over config_on<..., Dp, float>).
template <class Model>
spmd::autoshard::pins candidate_pins(const step_graph& s) {
  spmd::autoshard::pins p = nn::parameter_pins<typename Model::parallel_type>(s.g, s.model);
  using batch = typename Model::config::batch_placements;
  const auto in_batch_layout = [&](int t) {
    return spmd::make_spec(s.g.mesh, batch::value(), s.g.tensors[static_cast<std::size_t>(t)].shape.size()).spec;
  };
  for (const int d : s.data) p.pin(d, in_batch_layout(d), s.g.tensors.size());
  // Every parameter is read as the runtime reads it: whole on dp (FSDP gathers it there before
  // each use), as Megatron's plan splits it on tp.
  nn::pin_reads_whole_on(p, s.g, s.model, 0);
  // Replicated, every activation is whole as the runtime computes it; otherwise the search
  // places them (what the runtime's propagation does may cost more: a lower bound).
  if constexpr (Model::config::dp_mode == dp_kind::replicate)
    for (std::size_t t = 0; t < s.g.tensors.size(); ++t)
      if (s.g.tensors[t].kind == spmd::autoshard::tensor_kind::activation)
        p.pin(static_cast<int>(t), in_batch_layout(static_cast<int>(t)), s.g.tensors.size());
  return p;
}

/// The choice among Fsdp, Ddp (dp > 1) and Replicate, one model over those configurations, and
/// (with `mixes`, dp > 1 and more than one unit) every mix of FSDP and DDP over the model's units,
/// on `mesh` (dp, tp) under cm (the mesh must be bound: the parameters' layouts read its sizes).
template <class Fsdp, class Ddp, class Replicate>
parallel_choice choose_parallel(const spmd::autoshard::cost_model& cm, const spmd::mesh_shape_vec& mesh, bool mixes = true) {
  const auto t0 = std::chrono::steady_clock::now();
  const step_graph s = Fsdp::graph(mesh);
  std::vector<dp_kind> kinds{dp_kind::fsdp};
  std::vector<spmd::autoshard::pins> pins{candidate_pins<Fsdp>(s)};
  if (mesh[0] > 1) kinds.push_back(dp_kind::ddp), pins.push_back(candidate_pins<Ddp>(s));
  kinds.push_back(dp_kind::replicate);
  pins.push_back(candidate_pins<Replicate>(s));
  const spmd::autoshard::choice c = spmd::autoshard::choose(s.g, cm, pins);
  // Per unit: each unit's parameters as FSDP or as DDP holds them (the same reads, the same data).
  const std::vector<std::string_view> units = nn::unit_paths<typename Fsdp::host_type, typename Fsdp::units>();
  spmd::autoshard::mix_choice m{};
  const bool per_unit = mixes && mesh[0] > 1 && units.size() > 1;
  if (per_unit) {
    std::vector<int> unit_of(s.g.tensors.size(), -1);
    constexpr auto paths = nn::parameter_paths<typename Fsdp::host_type>();
    for (std::size_t i = 0; i < paths.size(); ++i) {
      const std::size_t u = nn::owning_unit(paths[i], units);
      if (u == units.size()) throw std::logic_error("spmd-train: no unit holds the parameter " + std::string(paths[i]));
      unit_of[static_cast<std::size_t>(s.model.params[i])] = static_cast<int>(u);
    }
    m = spmd::autoshard::choose_mix(s.g, cm, {pins[0], pins[1]}, unit_of, static_cast<int>(units.size()));
  }
  const bool mix_wins = per_unit && !m.best.empty() && !m.uniform() &&
                        (c.best < 0 || spmd::autoshard::better_candidate(m.step, c.candidates[static_cast<std::size_t>(c.best)]));
  parallel_choice out;
  out.search_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  out.mixes = m.mixes;
  out.exhaustive = m.exhaustive;
  if (c.best < 0 && !mix_wins) {
    // under --memory: the least any candidate needs, so the next try can fit
    int least = -1;
    for (std::size_t i = 0; i < c.candidates.size(); ++i)
      if (c.candidates[i].error == spmd::autoshard::search_error::over_budget &&
          (least < 0 || c.candidates[i].min_memory < c.candidates[static_cast<std::size_t>(least)].min_memory))
        least = static_cast<int>(i);
    if (least < 0) throw std::logic_error("spmd-train --parallel auto: no candidate fits the model's step graph");
    double need = c.candidates[static_cast<std::size_t>(least)].min_memory;
    const char* who = name_of(kinds[static_cast<std::size_t>(least)]);
    if (per_unit && m.least_memory > 0 && m.least_memory < need) need = m.least_memory, who = name_of(dp_kind::per_unit);
    char b[800];  // two %.0f of doubles (at most 309 digits each) and the text
    std::snprintf(b, sizeof b, "--memory %.0f: no parallelisation fits; the least memory a rank needs is %.0f bytes (%s)",
                  cm.memory_budget, need, who);
    throw usage_error(b);
  }
  const spmd::autoshard::solution& best = mix_wins ? m.step : c.candidates[static_cast<std::size_t>(c.best)];
  const dp_kind kind = mix_wins ? dp_kind::per_unit : kinds[static_cast<std::size_t>(c.best)];
  out.choice = name_of(kind);
  out.kind_index = static_cast<int>(kind);
  out.step_s = best.step_s();
  out.unrestricted_step_s = c.unrestricted.step_s();
  out.optimal = spmd::autoshard::reaches(best, c.unrestricted);
  for (std::size_t i = 0; i < kinds.size(); ++i)
    out.candidates.push_back({name_of(kinds[i]), c.candidates[i].ok() ? c.candidates[i].step_s()
                                                                      : std::numeric_limits<double>::quiet_NaN(),
                              c.candidates[i].collectives.total()});
  if (per_unit)  // the best mix (uniform ones included)
    out.candidates.push_back({name_of(dp_kind::per_unit), m.best.empty() ? std::numeric_limits<double>::quiet_NaN() : m.step.step_s(),
                              m.best.empty() ? 0 : m.step.collectives.total()});
  for (std::size_t u = 0; u < units.size(); ++u)
    out.units.emplace_back(std::string(units[u]), kind == dp_kind::per_unit ? nn::name_of(m.best[u] == 0 ? nn::dp_hold::fsdp : nn::dp_hold::ddp)
                                                                            : name_of(kind));
  return out;
}

}  // namespace spmd_train
