// spmd/autoshard/cost.hpp — the cost model of the automatic sharding search (docs/auto.md): a
// person can read every number and replace it with one measured on their machine.
//
//   per mesh dim m:  alpha[m]  seconds to start one step of a collective over m (latency)
//                    beta[m]   seconds per byte a rank sends over m (1 / bandwidth)
//   flops_per_s                what one rank computes a second
//   memory_bytes_per_s         local copies (chunk, partition, fill)
//   memory_budget              bytes a rank may hold (parameters, gradients, optimizer state,
//                              saved activations); infinite by default
//   optimizer_states           tensors of the optimizer per parameter (AdamW: 2)
//
// A redistribute costs what the plan that runs costs: make_plan (the planner plan_of runs)
// chooses the steps, and each step is timed here from its kind, its mesh dims and the bytes
// a rank moves. A collective over several mesh dims takes the slowest of their links.
#pragma once

#include <limits>

#include "spmd/core/layout_spec.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/plan/lower.hpp"
#include "spmd/plan/planner.hpp"
#include "spmd/plan/step.hpp"

namespace spmd::autoshard {

struct link {
  double alpha_s = 20e-6;           // per collective step
  double beta_s_per_byte = 1 / 5e9;  // 5 GB/s
};

struct cost_model {
  svec<link, max_mesh_dims> links{};  // per mesh dim; a dim not given takes `fallback`
  link fallback{};
  double flops_per_s = 50e9;
  double memory_bytes_per_s = 20e9;
  double memory_budget = std::numeric_limits<double>::infinity();
  int optimizer_states = 2;

  constexpr link on(int m) const { return m < links.size() ? links[m] : fallback; }
};

/// The fraction of a global tensor one rank holds (shards divide it; Partial and Replicate
/// hold it whole).
constexpr double block_fraction(const layout_spec& s) {
  double f = 1;
  for (int m = 0; m < s.placements.size(); ++m)
    if (s.placements[m].is_shard()) f /= static_cast<double>(s.mesh[m]);
  return f;
}

/// Seconds of one plan step for a tensor of `bytes` (global), ring algorithms:
///   all_gather       (n−1)·α + (n−1)·f·B·β          f: a rank's fraction before the step
///   reduce_scatter   (n−1)·α + (n−1)/n·f·B·β        all_to_all alike
///   all_reduce      2(n−1)·α + 2(n−1)/n·f·B·β
///   local            f'·B / memory_bytes_per_s      f': the fraction written
/// The step is given as the planner's search finds it (plan_detail::packed_step).
constexpr double step_seconds(const plan_detail::packed_step& s, const mesh_shape_vec& mesh, double bytes,
                              const cost_model& cm) {
  double n = 1, alpha = 0, beta = 0;
  for (int m = 0; m < mesh.size(); ++m)
    if ((s.mesh_dims >> m) & 1u) {
      n *= static_cast<double>(mesh[m]);
      const link l = cm.on(m);
      alpha = alpha > l.alpha_s ? alpha : l.alpha_s;
      beta = beta > l.beta_s_per_byte ? beta : l.beta_s_per_byte;
    }
  const double f = plan_detail::block_fraction(s.from, mesh) * bytes;
  switch (s.kind) {
    case step_kind::all_gather: return (n - 1) * alpha + (n - 1) * f * beta;
    case step_kind::reduce_scatter:
    case step_kind::all_to_all: return (n - 1) * alpha + (n - 1) / n * f * beta;
    case step_kind::all_reduce: return 2 * (n - 1) * alpha + 2 * (n - 1) / n * f * beta;
    default: return plan_detail::block_fraction(s.to, mesh) * bytes / cm.memory_bytes_per_s;
  }
}

/// What moving a tensor of `bytes` from `from` to `to` costs: the planner's plan, timed step
/// by step. Layouts that hold the same blocks cost nothing (plan/lower.hpp's same_blocks).
/// Collectives by kind: all_gather, all_reduce, reduce_scatter, all_to_all (step_kind's order).
struct collective_counts {
  int n[collective_kind_count]{};
  constexpr int of(step_kind k) const { return n[static_cast<int>(k)]; }
  constexpr int total() const {
    int t = 0;
    for (const int x : n) t += x;
    return t;
  }
  constexpr collective_counts& operator+=(const collective_counts& o) {
    for (int k = 0; k < collective_kind_count; ++k) n[k] += o.n[k];
    return *this;
  }
  friend constexpr collective_counts operator+(collective_counts a, const collective_counts& b) { return a += b; }
  friend constexpr bool operator==(const collective_counts&, const collective_counts&) = default;
};

struct transfer {
  double seconds = 0;
  collective_counts collectives{};
  bool ok = true;
};

/// A plan's steps timed and counted.
constexpr transfer time_plan(const plan_detail::packed_plan& p, const mesh_shape_vec& mesh, double bytes, const cost_model& cm) {
  transfer t{};
  if (p.error != plan_error::none) return t.ok = false, t;
  for (int i = 0; i < p.steps.size(); ++i) {
    t.seconds += step_seconds(p.steps[i], mesh, bytes, cm);
    if (is_collective(p.steps[i].kind)) ++t.collectives.n[static_cast<int>(p.steps[i].kind)];
  }
  return t;
}

constexpr transfer transfer_cost(const layout_spec& from, const layout_spec& to, double bytes, const cost_model& cm) {
  transfer t{};
  if (same_blocks(from, to)) return t;
  if (plan_detail::plannable(from, to) != plan_error::none) return t.ok = false, t;
  // make_plan's own search (the same steps), without building the plan's layouts
  return time_plan(plan_detail::search_plan(from, to, bytes, spmd::cost_model{}, unlimited_plan_work), from.mesh, bytes, cm);
}

}  // namespace spmd::autoshard
