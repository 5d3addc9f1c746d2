// spmd/autoshard/auto_parallel.hpp — the search's choice as types: a step given as a constexpr
// graph (autoshard/graph.hpp), searched by the compiler, each tensor's placements a
// spmd::placements<...> and its layout a spmd::layout<...>, the predicted step a constant.
//
//   struct step { static constexpr autoshard::graph make() { ... } };        // the graph
//   using A = autoshard::auto_parallel<step>;                                // default costs
//   static_assert(A::ok && A::step_s <= autoshard::auto_parallel<step, megatron_pins>::step_s);
//   using W1 = A::layout<w1, Mesh>;    // spmd::layout<Mesh, placements<...>, extents<...>>
//
// Pins and Cost are structs with `static constexpr pins value()` and `static constexpr
// cost_model value()`. The compiler runs the same search as run time: what it costs to compile
// is docs/auto.md's "Run time and compile time" (small graphs and meshes today).
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "spmd/autoshard/search.hpp"
#include "spmd/core/extents.hpp"
#include "spmd/core/layout.hpp"
#include "spmd/ops/typed_op.hpp"

namespace spmd::autoshard {

/// The default cost model and no pins, as the template arguments want them.
struct default_costs {
  static constexpr cost_model value() { return {}; }
};
struct no_pins {
  static constexpr pins value() { return {}; }
};

namespace auto_detail {
/// `p` with the shards of tensor dims split in mesh-dim order written as shard<D> (the default
/// order: what a person writes), other orders kept.
constexpr placement_vec written(const layout_spec& l) {
  placement_vec p = l.placements;
  for (int d = 0; d < l.tensor_rank; ++d)
    if (l.default_order(d))
      for (int m = 0; m < p.size(); ++m)
        if (p[m].is_shard(d)) p[m].order = default_order;
  return p;
}
}  // namespace auto_detail

template <class Step, class Pins = no_pins, class Cost = default_costs>
struct auto_parallel {
  static constexpr std::size_t tensor_count = Step::make().tensors.size();
  static constexpr std::size_t op_count = Step::make().ops.size();

  struct summary {
    bool ok = false;
    search_error error = search_error::none;
    double compute_s = 0, comm_s = 0, memory_bytes = 0;
    collective_counts counts{};
    std::array<placement_vec, tensor_count> placements{};
    std::array<shape_vec, tensor_count> shapes{};
    std::array<svec<placement_vec, ops::max_op_inputs>, op_count> reads{};
    std::array<svec<placement_vec, ops::max_op_inputs>, op_count> grads{};
  };
  static constexpr summary result = [] {
    const graph g = Step::make();
    const solution s = search(g, Cost::value(), Pins::value());
    summary r{};
    r.ok = s.ok();
    r.error = s.error;
    r.compute_s = s.compute_s;
    r.comm_s = s.comm_s;
    r.memory_bytes = s.memory_bytes;
    r.counts = s.collectives;
    for (std::size_t t = 0; t < tensor_count; ++t) {
      r.shapes[t] = g.tensors[t].shape;
      if (s.ok()) r.placements[t] = auto_detail::written(s.layouts[t]);
    }
    if (s.ok())
      for (std::size_t j = 0; j < op_count; ++j)
        for (int i = 0; i < s.reads[j].size(); ++i) {
          r.reads[j].push_back(auto_detail::written(s.reads[j][i]));
          r.grads[j].push_back(auto_detail::written(s.grads[j][i]));
        }
    return r;
  }();

  static constexpr mesh_shape_vec mesh_shape = Step::make().mesh;
  static constexpr bool ok = result.ok;
  static constexpr double compute_s = result.compute_s, comm_s = result.comm_s, step_s = compute_s + comm_s;
  static constexpr double memory_bytes = result.memory_bytes;
  /// The collectives of a step (forward and backward), by kind, and in all.
  static constexpr collective_counts counts = result.counts;
  static constexpr int collectives = counts.total();

 private:
  template <std::size_t T>
  struct holder {
    static constexpr placement_vec value() { return result.placements[T]; }
  };
  template <std::size_t J, std::size_t I>
  struct read_holder {
    static constexpr placement_vec value() { return result.reads[J][static_cast<int>(I)]; }
  };
  template <std::size_t J, std::size_t I>
  struct grad_holder {
    static constexpr placement_vec value() { return result.grads[J][static_cast<int>(I)]; }
  };
  template <std::size_t T, class Seq = std::make_index_sequence<static_cast<std::size_t>(result.shapes[T].size())>>
  struct extents_of;
  template <class Mesh>
  struct checked_mesh {
    static_assert(Mesh::ndim == mesh_shape.size() && [] {
      for (int m = 0; m < mesh_shape.size(); ++m)
        if (Mesh::static_shape()[m] != dyn && Mesh::static_shape()[m] != mesh_shape[m]) return false;
      return true;
    }(), "spmd::autoshard::auto_parallel: the layout's mesh is not the mesh the graph was searched on.");
    using type = Mesh;
  };
  template <std::size_t T, std::size_t... D>
  struct extents_of<T, std::index_sequence<D...>> {
    using type = extents<result.shapes[T][static_cast<int>(D)]...>;
  };

 public:
  /// Tensor T's chosen placements (a parameter's at rest, an activation's as made, data's as read).
  template <std::size_t T>
  using placements_of = typename ops::typed_detail::placements_of<holder<T>>::type;
  /// Operator J's input I as the chosen strategy reads it (redistribute to it before the
  /// operator: the operator then runs that strategy).
  template <std::size_t J, std::size_t I>
  using read_placements = typename ops::typed_detail::placements_of<read_holder<J, I>>::type;
  /// The gradient of operator J's input I as the strategy's backward makes it (a Partial where
  /// the strategy splits a factor the input lacks): pass it as redistribute's grad_placements,
  /// so that the move back to the producer's layout is the one the search costed (a Partial
  /// weight gradient reduce-scattered to FSDP's shard, not all-reduced first).
  template <std::size_t J, std::size_t I>
  using grad_placements = typename ops::typed_detail::placements_of<grad_holder<J, I>>::type;
  /// Tensor T's layout on Mesh (a mesh type of the graph's shape).
  template <std::size_t T, class Mesh>
  using layout = spmd::layout<typename checked_mesh<Mesh>::type, placements_of<T>, typename extents_of<T>::type>;

};

}  // namespace spmd::autoshard
