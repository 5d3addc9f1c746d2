// spmd/nn/parallel_pins.hpp — a parallel model's parameter layouts as the search's pins: how a
// program costs the parallelisation it compiled (nn::parallelize's result) by the model of
// autoshard/cost.hpp, on the mesh's sizes as bound (a run-time mesh's too).
//
//   const nn::traced t = nn::trace<Host>(g, x);                       // nn/step_graph.hpp
//   autoshard::pins p = nn::parameter_pins<decltype(parallel_model)>(g, t);
//   nn::pin_reads_whole_on(p, g, t, 0);                              // FSDP gathers on dp (dim 0)
//   p.pin(x, Batch::spec(), g.tensors.size());                       // the data's layout
//   const autoshard::solution s = autoshard::search(g, cm, p);
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spmd/autoshard/search.hpp"
#include "spmd/nn/step_graph.hpp"
#include "spmd/nn/tree.hpp"

namespace spmd::nn {

/// Pins fixing each parameter of g (t.params, in parameters(model)'s order) to its layout at
/// rest in Model, a parallel model's type.
template <class Model>
autoshard::pins parameter_pins(const autoshard::graph& g, const traced& t) {
  using refs = decltype(parameters(std::declval<Model&>()));
  constexpr std::size_t n = std::tuple_size_v<refs>;
  if (t.params.size() != n)
    throw std::logic_error("spmd::nn::parameter_pins: the graph has " + std::to_string(t.params.size()) +
                           " parameters, the model " + std::to_string(n));
  autoshard::pins p{};
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (p.pin(t.params[I], std::remove_cvref_t<std::tuple_element_t<I, refs>>::layout_type::spec(), g.tensors.size()), ...);
  }(std::make_index_sequence<n>{});
  return p;
}

/// Pins each parameter of g (t.params, pinned at rest in p) to be read as it rests but whole
/// on mesh dim `m`: how a program that gathers it there before every use (FSDP) reads it.
inline void pin_reads_whole_on(autoshard::pins& p, const autoshard::graph& g, const traced& t, int m) {
  for (const int w : t.params) {
    const layout_spec& rest = p.layout[static_cast<std::size_t>(w)];
    placement_vec read = rest.placements;
    read[m] = make_replicate();
    for (int d = 0; d < read.size(); ++d)  // the other dims' splits alone now: their default order
      if (read[d].is_shard()) read[d].order = default_order;
    p.pin_read(w, make_spec(g.mesh, read, rest.tensor_rank).spec, g.tensors.size());
  }
}

}  // namespace spmd::nn
