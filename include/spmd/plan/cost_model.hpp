// spmd/plan/cost_model.hpp — what a redistribute step costs, for choosing between plans.
//
// Time of a collective = a fixed cost + a cost per hop (ring step) + the bytes one rank
// moves over the link bandwidth. The constants are those of PyTorch's graph planner for
// ranks in one host, so spmd and DTensor rank plans alike. A local step costs the bytes
// it writes at memory bandwidth: small next to a collective, but it makes the search
// prefer chunking a block to filling a whole tensor with identities when both need the
// same collectives.
//
// Bytes are estimated as fractions of the global tensor under even splits (a rank's block
// under state X is 1 / prod(mesh sizes of X's sharded mesh dims) of it), so the search
// needs no per-rank arithmetic. Reported byte counts (CLI, counters) are exact boxes.
#pragma once

#include <cstddef>

#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/state.hpp"
#include "spmd/plan/step.hpp"

namespace spmd {

struct cost_model {
  double collective_us = 6.6;  // fixed cost of launching one collective
  double hop_us = 0.6;         // per ring step
  double bytes_per_us = 88e3;  // link bandwidth: 88 GB/s
  double local_bytes_per_us = 2e6;  // memory bandwidth of local steps: 2 TB/s
};

/// Global tensor size the planner assumes when an extent is only known at run time:
/// large enough that bandwidth, not latency, decides.
inline constexpr double nominal_dynamic_bytes = 64.0 * 1024 * 1024;

/// Bytes of a global tensor of element type T and extents type E (spmd::extents<...>):
/// exact for static extents, nominal_dynamic_bytes when any extent is dynamic. The typed
/// planner and the operator engine cost with it.
template <class T, class E>
constexpr double tensor_bytes() {
  if constexpr (!E::is_static()) {
    return nominal_dynamic_bytes;
  } else {
    double n = static_cast<double>(sizeof(T));
    for (std::size_t d = 0; d < E::rank(); ++d) n *= static_cast<double>(E::static_extent(d));
    return n;
  }
}

namespace plan_detail {

/// Fraction of the global tensor one rank holds in state s (even splits).
constexpr double block_fraction(state s, const mesh_shape_vec& mesh) {
  double f = 1;
  for (int m = 0; m < mesh.size(); ++m)
    if (is_shard(code(s, m))) f /= static_cast<double>(mesh[m]);
  return f;
}

/// Estimated microseconds of a local step that writes fraction `f_to` of the tensor.
constexpr double local_cost_us(double f_to, double global_bytes, const cost_model& cm) {
  return f_to * global_bytes / cm.local_bytes_per_us;
}

/// Estimated microseconds of a collective over `group_size` ranks whose ranks hold fraction
/// `f` of the tensor before it.
constexpr double collective_cost_us(step_kind kind, double f, double group_size, double global_bytes,
                                    const cost_model& cm) {
  const double n = group_size;
  double fraction = 0, hops = n - 1;
  switch (kind) {
    case step_kind::all_gather: fraction = f * (n - 1); break;
    case step_kind::all_to_all:
    case step_kind::reduce_scatter: fraction = f * (n - 1) / n; break;
    case step_kind::all_reduce:
      fraction = 2 * f * (n - 1) / n;
      hops = 2 * (n - 1);
      break;
    default: break;
  }
  return cm.collective_us + cm.hop_us * hops + fraction * global_bytes / cm.bytes_per_us;
}

/// Estimated microseconds of a step over `group_size` ranks from state `from` to `to`.
constexpr double step_cost_us(step_kind kind, state from, state to, const mesh_shape_vec& mesh,
                              double group_size, double global_bytes, const cost_model& cm) {
  if (!is_collective(kind)) return local_cost_us(block_fraction(to, mesh), global_bytes, cm);
  return collective_cost_us(kind, block_fraction(from, mesh), group_size, global_bytes, cm);
}

}  // namespace plan_detail
}  // namespace spmd
