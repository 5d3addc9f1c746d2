// spmd/nn/unit_choice.hpp — FSDP or DDP chosen per unit when the model is built: the choice of
// the automatic-sharding search on a mesh known only at run time (docs/auto.md, "Per-unit
// choice"), at the cost of two instantiations per distinct unit, not one per mix.
//
//   auto m = spmd::nn::parallelize_per_unit<Mesh, B, spmd::nn::tensor_parallel<"tp", gpt_megatron>,
//                                           spmd::nn::dp_per_unit<"dp", gpt_fsdp_units>>(
//       host, [](std::string_view unit) { return unit == "" ? nn::dp_hold::ddp : nn::dp_hold::fsdp; });
//   auto logits = m(tokens);                                  // as parallelize's model
//   spmd::nn::for_each_unit(m, [&](std::string_view unit, nn::dp_hold how, auto params) { ... });
//
// Each unit (the modules Units names) holds its own parameters (those of no unit inside it)
// either as FSDP does (Shard(0) on dp at rest, gathered for the forward, gradients
// reduce-scattered) or as DDP does (replicated on dp, gradients all-reduced in the unit's
// buckets). The layouts the forward computes with are the same either way: a DDP unit's
// parameters are FSDP's gathered ones (on tp a colwise weight is shard<0, 0>, the order
// FSDP's split gives it), so the unit returns one type and the model around it is compiled
// once. The model has no parameter tuple of one type (nn::parameters refuses it): an
// optimizer per unit, built in for_each_unit, is how it trains.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "spmd/nn/parallelize.hpp"
#include "spmd/nn/tree.hpp"

namespace spmd::nn {

/// How a unit's parameters are held on the data-parallel mesh dim.
enum class dp_hold : std::uint8_t { fsdp, ddp };

constexpr const char* name_of(dp_hold h) { return h == dp_hold::fsdp ? "fsdp" : "ddp"; }

/// Data parallelism on mesh dim Dim, FSDP or DDP per unit (the modules Units names), chosen
/// when the model is built; DDP's buckets hold at most BucketBytes a rank.
template <fixed_string Dim, class Units = units<"">, std::size_t BucketBytes = runtime::default_bucket_bytes>
struct dp_per_unit {
  static constexpr auto dim_name = Dim;
  using units_type = Units;
  static constexpr std::size_t bucket_bytes = BucketBytes;
};

/// Each unit's choice, by the unit's path ("" the model itself).
using unit_chooser = std::function<dp_hold(std::string_view unit)>;

namespace detail {
/// Whether a pattern of Units (units<...>) matches module path m.
template <class Units>
constexpr bool names_unit(std::string_view m) {
  return []<fixed_string... U>(std::string_view p, units<U...>*) {
    return (path_matches(U.view(), p) || ...);
  }(m, static_cast<Units*>(nullptr));
}
}  // namespace detail

/// The paths of the units of host model S under Units (every module a pattern matches), depth
/// first: the order nn::for_each_unit visits them.
template <class S, class Units>
std::vector<std::string_view> unit_paths() {
  std::vector<std::string_view> out;
  for (const std::string_view m : module_paths<S>())
    if (detail::names_unit<Units>(m)) out.push_back(m);
  return out;
}

/// How many units host model S has under Units (a model of one unit has nothing to choose per unit).
template <class S, class Units>
constexpr std::size_t unit_count() {
  std::size_t n = 0;
  for (const std::string_view m : module_paths<S>()) n += detail::names_unit<Units>(m) ? 1 : 0;
  return n;
}

/// The unit among `units` that holds parameter `path`: the innermost one whose path is a
/// prefix of it ("" holds every parameter no other unit does); units.size() when none does.
inline std::size_t owning_unit(std::string_view path, const std::vector<std::string_view>& units) {
  std::size_t best = units.size();
  for (std::size_t u = 0; u < units.size(); ++u) {
    const std::string_view p = units[u];
    const bool inside = p.empty() || path == p || (path.size() > p.size() && path.substr(0, p.size()) == p && path[p.size()] == '.');
    if (inside && (best == units.size() || p.size() > units[best].size())) best = u;
  }
  return best;
}

namespace detail {

template <class Mesh, class B, class Tp, class Dc, dp_hold Mode>
struct choice_leaves {
  using fsdp_type = fsdp<Dc::dim_name, typename Dc::units_type>;
  using base = parallel_leaves<Mesh, B, Tp, fsdp_type>;
  static constexpr int dp = Mesh::template dim<Dc::dim_name>();
  const unit_chooser* choose;

  /// A parameter of a unit held as Mode holds it: FSDP's layout at rest, or (DDP) the layout
  /// FSDP gathers it to: replicated on dp.
  template <fixed_string Path, class T, class E>
  static auto make(const tensor<T, E>& host) {
    if constexpr (Mode == dp_hold::fsdp) {
      return base::template make<Path>(host);
    } else {
      using rest = typename parameter_layout<Mesh, Path, E, Tp, fsdp_type>::placements_type;
      using L = layout<Mesh, runtime::dp_detail::replace_at<rest, dp, replicate>, E>;
      return runtime::requires_grad(runtime::factories<B>::template distribute_tensor<L>(host.data),
                                    std::string(Path.view()));
    }
  }

  /// Units are built by build_switch; other modules take their tensor-parallel style.
  template <fixed_string Path>
  static constexpr bool switches() {
    return base::template unit_at<fsdp_type, Path>();
  }
  template <fixed_string Path, class Node>
  static auto wrap(Node n) {
    return base::template styled<Path>(std::move(n));
  }

  template <fixed_string Path, class S>
  auto build_switch(const S& host) const {
    const auto held = [&]<dp_hold How>() {
      const choice_leaves<Mesh, B, Tp, Dc, How> inner{choose};
      auto n = base::template styled<Path>(build_module<Path>(inner, host, std::make_index_sequence<member_count<S>>{}));
      auto own = own_leaf_refs(n);
      static_assert(std::tuple_size_v<decltype(own)> > 0,
                    "spmd::nn::parallelize_per_unit: a unit holds no parameter of its own (every one is in "
                    "a unit inside it): leave it out of units<...>.");
      if constexpr (How == dp_hold::fsdp) {
        auto unit = std::apply([](auto&... p) { return runtime::fully_shard<dp, typename fsdp_type::policy>(p...); }, own);
        return unit_node<decltype(n), decltype(unit)>{std::move(n), std::move(unit)};
      } else {
        auto model = std::apply([](auto&... p) { return runtime::ddp<dp, Dc::bucket_bytes>(p...); }, own);
        return ddp_node<decltype(n), decltype(model)>{std::move(n), std::move(model)};
      }
    };
    using F = decltype(held.template operator()<dp_hold::fsdp>());
    using D = decltype(held.template operator()<dp_hold::ddp>());
    using V = std::variant<F, D>;
    if ((*choose)(Path.view()) == dp_hold::fsdp)
      return switch_node<F, D>{V(std::in_place_index<0>, held.template operator()<dp_hold::fsdp>()), Path.view()};
    return switch_node<F, D>{V(std::in_place_index<1>, held.template operator()<dp_hold::ddp>()), Path.view()};
  }
};

template <class X, class F>
void visit_units(X& x, F& f) {
  using Y = std::remove_const_t<X>;
  if constexpr (is_switch_node_v<Y>) {
    auto& held = x.held;
    if (held.index() == 0) {
      auto& n = std::get<0>(held);
      f(x.path, dp_hold::fsdp, own_leaf_refs(n.inner));
      visit_units(n.inner, f);
    } else {
      auto& n = std::get<1>(held);
      f(x.path, dp_hold::ddp, own_leaf_refs(n.inner));
      visit_units(n.inner, f);
    }
  } else if constexpr (is_styled_v<Y>) {
    visit_units(x.inner, f);
  } else if constexpr (is_array_v<Y>) {
    for (auto& e : x) visit_units(e, f);
  } else if constexpr (is_node_v<Y>) {
    std::apply([&](auto&... m) { (visit_units(m, f), ...); }, x.members);
  }
}

}  // namespace detail

/// The host model's parameters on Mesh (backend B): Tp's tensor parallelism, and on Dc's mesh
/// dim each unit as `choose` says (FSDP or DDP). Every parameter must be in a unit (name the
/// model itself, "", among the units).
template <class Mesh, class B, class Tp, class Dc, class S>
auto parallelize_per_unit(const S& host, const unit_chooser& choose) {
  static_assert(detail::is_tp<Tp>, "spmd::nn::parallelize_per_unit: Tp is tensor_parallel<dim, plan>.");
  static_assert(detail::dims_distinct<Mesh, Tp, Dc>(), "spmd::nn::parallelize_per_unit: tp and dp name the same mesh dim.");
  static_assert(detail::plan_fits<S, Tp>());
  static_assert(detail::choice_leaves<Mesh, B, Tp, Dc, dp_hold::fsdp>::template switches<"">(),
                "spmd::nn::parallelize_per_unit: the model itself must be a unit (\"\" among units<...>): "
                "every parameter is then held by some unit.");
  return build_tree<"">(detail::choice_leaves<Mesh, B, Tp, Dc, dp_hold::fsdp>{&choose}, host);
}

/// f(unit path, how it is held, its own parameters: a tuple of references) for every unit of a
/// model of parallelize_per_unit, depth first (unit_paths' order).
template <class Model, class F>
void for_each_unit(Model& model, F&& f) {
  detail::visit_units(model, f);
}

}  // namespace spmd::nn
