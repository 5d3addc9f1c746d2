// spmd/ops/typed_op.hpp — an operator's sharding, resolved by the compiler for input layout
// types. A backend reads the answer as types: the layout each input must be redistributed
// to, and the output's layout (placements and extents).
//
//   using R = spmd::ops::resolved<matmul_op, float, void, LX, LW>;
//   static_assert(std::is_same_v<R::out_placements, spmd::placements<spmd::shard<0>>>);
//   R::input_layout<1>            // the layout W must be in
//   R::out_extents_type           // static where the inputs' are
//
// An operator type `Op` provides
//   static constexpr op_rule rule(const op_context&);       // its sharding rule (ops/rule.hpp)
//   static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in);
// (out_shape must map dyn to dyn; the backend calls it again with the run-time shapes).
// `Forced` is void or a spmd::placements<...> for the output (out_sharding).
#pragma once

#include <cstddef>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spmd/core/extents.hpp"
#include "spmd/core/layout.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/plan/cost_model.hpp"

namespace spmd::ops {

namespace typed_detail {

template <placement_kind K, int D, reduce_op Op, int Order>
struct placement_type_of {
  using type = replicate;
};
template <int D, reduce_op Op, int Order>
struct placement_type_of<placement_kind::shard, D, Op, Order> {
  using type = shard<D, Order>;
};
template <int D, reduce_op Op, int Order>
struct placement_type_of<placement_kind::partial, D, Op, Order> {
  using type = partial<Op>;
};

/// spmd::placements<...> of a constexpr placement_vec `H::value()` (candidates only ever build
/// default orders; a kept order comes from the inputs: see resolved::kept_out).
template <class H, class Seq = std::make_index_sequence<static_cast<std::size_t>(H::value().size())>>
struct placements_of;
template <class H, std::size_t... I>
struct placements_of<H, std::index_sequence<I...>> {
  using type = placements<typename placement_type_of<H::value()[I].kind, H::value()[I].dim,
                                                     H::value()[I].op, H::value()[I].order>::type...>;
};

/// `s` with each tensor dim's shards in the default order (mesh-dim order).
constexpr layout_spec default_order_of(layout_spec s) {
  for (int d = 0; d < s.tensor_rank; ++d) {
    int pos = 0;
    for (int m = 0; m < s.placements.size(); ++m)
      if (s.placements[m].is_shard(d)) s.placements[m].order = pos++;
  }
  return s;
}

template <class E>
constexpr shape_vec static_shape() {
  shape_vec s{};
  for (std::size_t d = 0; d < E::rank(); ++d) s.push_back(E::static_extent(d));
  return s;
}

template <class L0, class... L>
constexpr bool same_mesh = (std::is_same_v<typename L0::mesh_type, typename L::mesh_type> && ...);

template <std::size_t R>
constexpr dims<R> to_dims(const shape_vec& s) {
  dims<R> d{};
  for (std::size_t i = 0; i < R; ++i) d[i] = s[static_cast<int>(i)];
  return d;
}

}  // namespace typed_detail

template <class Op, class T, class Forced, class... L>
struct resolved {
  static_assert(sizeof...(L) >= 1 && sizeof...(L) <= max_op_inputs,
                "spmd: an operator takes 1 to 4 distributed inputs.");
  static_assert(typed_detail::same_mesh<L...>,
                "spmd: the inputs of an operator are on different meshes; redistribute them onto "
                "one mesh first.");
  using mesh_type = typename std::tuple_element_t<0, std::tuple<L...>>::mesh_type;

  static constexpr svec<shape_vec, max_op_inputs> in_shapes = [] {
    svec<shape_vec, max_op_inputs> s{};
    (s.push_back(typed_detail::static_shape<typename L::extents_type>()), ...);
    return s;
  }();
  static constexpr shape_vec out_shape = Op::out_shape(in_shapes);

  static constexpr op_context context = [] {
    op_context c{};
    // A dynamic mesh size counts as nominal_dyn_size (larger than 1): the placements are
    // chosen as for such a mesh (docs/design.md, "Static and dynamic mesh sizes").
    c.mesh = mesh_type::nominal_shape_vec();
    (c.in.push_back(L::nominal_spec()), ...);
    c.in_shape = in_shapes;
    c.out_shape = out_shape;
    (c.in_bytes.push_back(tensor_bytes<T, typename L::extents_type>()), ...);
    double out = sizeof(T);
    bool dynamic = false;
    for (index_t e : out_shape) {
      dynamic = dynamic || e == dyn;
      out *= static_cast<double>(e);
    }
    c.out_bytes = dynamic ? nominal_dynamic_bytes : out;
    c.integral = std::is_integral_v<T>;
    return c;
  }();
  static constexpr op_rule rule = Op::rule(context);
  static_assert(rule.ok, "spmd: the operator's sharding rule is malformed (its einsum text).");

  static constexpr bool is_forced = !std::is_void_v<Forced>;
  static constexpr placement_vec forced_value = [] {
    if constexpr (is_forced) return Forced::value();
    else return placement_vec{};
  }();
  static_assert(!is_forced || forced_value.size() == mesh_type::ndim,
                "spmd: the forced output placements need one placement per mesh dim.");

  static constexpr resolution result = resolve(rule, context, forced_value, is_forced);

  // Inputs that share one layout with a non-default shard order (FSDP × TP's strided
  // Shard(0), DTensor's _StridedShard) keep it through ops that map the ordered dims to the
  // output's dims one to one or reduce them (pointwise ops, reductions): candidates only
  // build default orders, so without this every such op would move its inputs. The op is
  // resolved as if the order were the default one; when nothing moves there, nothing moves
  // here either, and the output's dims that come from ordered dims take their order (such an
  // op does not care which global indices a rank's block holds, only that the blocks agree).
  static constexpr bool ordered_inputs = [] {
    const layout_spec first = context.in[0];
    bool ordered = false;
    for (int d = 0; d < first.tensor_rank; ++d) ordered = ordered || !first.default_order(d);
    if (!ordered || is_forced) return false;
    for (int i = 0; i < context.in.size(); ++i)
      if (!(context.in[i] == first) || !(rule.in[i] == rule.in[0])) return false;
    for (int d = 0; d < rule.in[0].size(); ++d) {  // an ordered dim's factor: kept in place or reduced
      const int f = rule.in[0][d];
      if (first.default_order(d)) continue;
      if (f == no_factor || (op_rule::has(rule.out, f) && op_rule::dim_of(rule.out, f) < 0)) return false;
    }
    return true;
  }();
  static constexpr op_context plain_context = [] {
    op_context c = context;
    for (int i = 0; i < c.in.size(); ++i) c.in[i] = typed_detail::default_order_of(c.in[i]);
    return c;
  }();
  static constexpr auto plain_resolution() {
    if constexpr (ordered_inputs) return resolve(rule, plain_context, forced_value, false);
    else return result;
  }
  static constexpr bool keeps_order = [] {
    if constexpr (!ordered_inputs) {
      return false;
    } else {
      constexpr resolution plain = plain_resolution();
      if (!plain.ok()) return false;
      for (int i = 0; i < plain_context.in.size(); ++i)
        if (!propagate_detail::same_op_blocks(plain_context.in[i], plain.chosen.in[i])) return false;
      return true;
    }
  }();
  /// The kept-order output placements: the plain resolution's, with the orders of the
  /// output dims that come from ordered input dims.
  static constexpr placement_vec kept_out = [] {
    if constexpr (!keeps_order) {
      return placement_vec{};
    } else {
      const layout_spec first = context.in[0];
      placement_vec out = plain_resolution().chosen.out.placements;
      for (int m = 0; m < out.size(); ++m) {
        if (!out[m].is_shard()) continue;
        const int din = op_rule::dim_of(rule.in[0], rule.out[out[m].dim]);
        out[m].order = din >= 0 && !first.default_order(din) ? first.placements[m].order : default_order;
      }
      // Positions 0..k-1 per tensor dim (a mesh dim of size 1 may have dropped a shard), and
      // no positions at all where that is the default order (shard<D>, the canonical type).
      for (int d = 0; d < static_cast<int>(out_shape.size()); ++d) {
        int k = 0;
        bool ascending = true;
        for (int m = 0; m < out.size(); ++m)
          if (out[m].is_shard(d) && out[m].order != default_order) {
            int pos = 0;
            for (int n = 0; n < out.size(); ++n)
              pos += out[n].is_shard(d) && out[n].order != default_order && out[n].order < out[m].order;
            ascending = ascending && pos == k;
            out[m].order = pos;
            ++k;
          }
        if (ascending)
          for (int m = 0; m < out.size(); ++m)
            if (out[m].is_shard(d)) out[m].order = default_order;
      }
      return out;
    }
  }();
  static_assert(result.error != resolve_error::arity,
                "spmd: the inputs' dims do not match the operator's rule.");
  static_assert(result.error != resolve_error::forced_invalid,
                "spmd: the forced output placements are not a valid layout of the output (a "
                "shard dim beyond its dims, or two different partial ops).");
  static_assert(result.ok());

 private:
  template <std::size_t I>
  struct in_holder {
    static constexpr placement_vec value() {
      placement_vec p = result.chosen.in[static_cast<int>(I)].placements;
      for (int m = 0; m < p.size(); ++m) p[m].order = default_order;
      return p;
    }
  };
  struct out_holder {
    static constexpr placement_vec value() {
      placement_vec p = result.chosen.out.placements;
      for (int m = 0; m < p.size(); ++m) p[m].order = default_order;
      return p;
    }
  };
  struct kept_out_holder {
    static constexpr placement_vec value() { return kept_out; }
  };
  template <std::size_t I>
  using input_t = std::tuple_element_t<I, std::tuple<L...>>;

 public:
  /// The placements input I runs with: its own when it already holds the blocks.
  template <std::size_t I>
  using input_placements = std::conditional_t<
      keeps_order || propagate_detail::same_op_blocks(input_t<I>::nominal_spec(), result.chosen.in[static_cast<int>(I)]),
      typename input_t<I>::placements_type, typename typed_detail::placements_of<in_holder<I>>::type>;
  template <std::size_t I>
  using input_layout = layout<mesh_type, input_placements<I>, typename input_t<I>::extents_type>;
  template <std::size_t I>
  static constexpr bool input_moves = !std::is_same_v<input_layout<I>, input_t<I>>;

  /// The placements the op computes in, and those of its result (the forced ones, if any).
  using compute_placements =
      typename typed_detail::placements_of<std::conditional_t<keeps_order, kept_out_holder, out_holder>>::type;
  using out_placements = std::conditional_t<is_forced, Forced, compute_placements>;
  static constexpr bool output_moves = is_forced && !std::is_same_v<out_placements, compute_placements>;

  /// Output extents: static where out_shape is, run-time values from `rt_shape`.
  static constexpr auto out_extents(const shape_vec& rt_shape) {
    constexpr std::size_t R = static_cast<std::size_t>(out_shape.size());
    constexpr dims<R> st = typed_detail::to_dims<R>(out_shape);
    return extents_from<st>(typed_detail::to_dims<R>(rt_shape));
  }
  using out_extents_type = decltype(out_extents(out_shape));
  using compute_layout = layout<mesh_type, compute_placements, out_extents_type>;
  using out_layout = layout<mesh_type, out_placements, out_extents_type>;
};

}  // namespace spmd::ops
