// spmd/nn/parallelize.hpp — a model's parameters placed on a mesh by rules keyed by their paths:
// tensor-parallel styles on one mesh dim, FSDP's sharding on another, composed. The result is
// a tree of variables whose layouts are types.
//
//   struct mlp3 {                                          // a host model (Hana-reflected)
//     spmd::nn::linear<32, 64> fc1;  spmd::nn::linear<64, 64> fc2;  spmd::nn::linear<64, 10> fc3;
//     template <class M, class X> static auto forward(const M& m, const X& x) {
//       using spmd::nn::get;
//       return get<"fc3">(m)(relu(get<"fc2">(m)(relu(get<"fc1">(m)(x)))));
//     }
//   };
//   BOOST_HANA_ADAPT_STRUCT(mlp3, fc1, fc2, fc3);
//
//   using Mesh = spmd::mesh<2, 2>::named<"dp", "tp">;
//   using tp = spmd::nn::tp_plan<spmd::nn::rule<"fc1.*", spmd::nn::colwise>,
//                                spmd::nn::rule<"fc2.*", spmd::nn::rowwise>>;
//   auto m = spmd::nn::parallelize<Mesh, B, spmd::nn::tensor_parallel<"tp", tp>, spmd::nn::fsdp<"dp">>(host);
//   static_assert(std::is_same_v<decltype(get<"weight">(get<"fc1">(m)))::placements_type,
//                                spmd::placements<spmd::shard<0, 1>, spmd::shard<0, 0>>>);
//   auto y = m(x);                                        // mlp3::forward over the variables
//
// Parameters. On the tensor-parallel dim a parameter takes the style of the first rule whose
// pattern matches its path (nn/path.hpp; no rule: replicated):
//   colwise     Shard(0): a weight (out, in) split by output features, its bias with it
//   rowwise     Shard(1) for a weight (split by input features); a 1-d parameter replicated
//   replicated  Replicate
// On a ddp dim every parameter is replicated and the model's gradients are all-reduced in
// buckets (runtime::ddp). On an fsdp dim every parameter is Shard(0) (FSDP2's sharding at rest), split after the
// tensor-parallel dim where that shards dim 0 too (shard<0, 1> beside shard<0, 0>: gathering
// the fsdp dim gives the tensor-parallel layout, as runtime::fully_shard needs). Any other mesh
// dim (DDP, or none) replicates. The activations' layouts follow from the operators'
// propagation, as everywhere in spmd.
//
// Misuse fails to compile with a sentence: a rule that matches no parameter (its pattern is in
// the instantiation the compiler names), a style that does not fit a parameter's shape, a
// mesh dim name the mesh does not have, an array of modules whose elements the rules place
// differently.
#pragma once

#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/mp11/algorithm.hpp>

#include "spmd/core/fixed_string.hpp"
#include "spmd/core/layout.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/nn/path.hpp"
#include "spmd/nn/tree.hpp"
#include "spmd/runtime/autograd/redistribute.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/data_parallel/ddp.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd::nn {

/// Tensor-parallel styles of a parameter (see the top of this file).
struct colwise {};
struct rowwise {};
struct replicated {};

/// Module styles (a rule's Pattern then names modules): the module's first input redistributed
/// to placement In on the tensor-parallel dim before its forward, its output to Out after
/// (void: left as propagation places it). PyTorch's PrepareModuleInput / PrepareModuleOutput
/// and, with In = Shard(sequence dim), SequenceParallel: a norm computed on its slice of the
/// positions, its parameters replicated; a rowwise layer's Partial output reduce-scattered to
/// it (prepare_output<shard<1>>) instead of all-reduced.
template <class In, class Out = void>
struct prepare_io {
  using input = In;
  using output = Out;
};
template <class In>
using prepare_input = prepare_io<In, void>;
template <class Out>
using prepare_output = prepare_io<void, Out>;
template <int SeqDim = 1>
using sequence_parallel = prepare_io<shard<SeqDim>, void>;

/// Parameters whose path matches Pattern take Style.
template <fixed_string Pattern, class Style>
struct rule {
  static constexpr auto pattern = Pattern;
  using style = Style;
};
/// A tensor-parallel plan: rules, the first match wins.
template <class... Rules>
struct tp_plan {};

/// Parallelisms, one per mesh dim (by name): tensor parallel by a plan, FSDP's sharding.
template <fixed_string Dim, class Plan>
struct tensor_parallel {
  static constexpr auto dim_name = Dim;
  using plan = Plan;
};
/// The modules that are FSDP units, by path pattern ("" the model itself).
template <fixed_string... Patterns>
struct units {};
/// FSDP on mesh dim Dim: every parameter Shard(0) there at rest; each module whose path matches
/// one of Units is a unit (gathered for its forward, its gradients reduce-scattered), holding
/// the parameters of no unit inside it; Policy is FSDP2's MixedPrecisionPolicy.
template <fixed_string Dim, class Units = units<"">, class Policy = runtime::mixed_precision<>>
struct fsdp {
  static constexpr auto dim_name = Dim;
  using units_type = Units;
  using policy = Policy;
};

/// DDP on mesh dim Dim: every parameter replicated there, the model's gradients all-reduced in
/// buckets of at most BucketBytes a rank as the backward produces them (runtime::ddp).
template <fixed_string Dim, std::size_t BucketBytes = runtime::default_bucket_bytes>
struct ddp {
  static constexpr auto dim_name = Dim;
  static constexpr std::size_t bucket_bytes = BucketBytes;
};

namespace detail {

template <class P>
inline constexpr bool is_ddp = false;
template <fixed_string D, std::size_t Bytes>
inline constexpr bool is_ddp<ddp<D, Bytes>> = true;

template <class P>
inline constexpr bool is_tp = false;
template <fixed_string D, class Plan>
inline constexpr bool is_tp<tensor_parallel<D, Plan>> = true;
template <class P>
inline constexpr bool is_fsdp = false;
template <fixed_string D, class U, class P>
inline constexpr bool is_fsdp<fsdp<D, U, P>> = true;

template <class S>
inline constexpr bool is_module_style = false;
template <class In, class Out>
inline constexpr bool is_module_style<prepare_io<In, Out>> = true;

/// The style of the first rule of Plan that matches Path among its parameter rules (Module
/// false) or its module rules (Module true); None when none does.
template <fixed_string Path, class Plan, bool Module, class None>
struct rule_style;
template <fixed_string Path, bool Module, class None>
struct rule_style<Path, tp_plan<>, Module, None> {
  using type = None;
};
template <fixed_string Path, class R, class... Rs, bool Module, class None>
struct rule_style<Path, tp_plan<R, Rs...>, Module, None> {
  using type = std::conditional_t<is_module_style<typename R::style> == Module && path_matches(R::pattern.view(), Path.view()),
                                  typename R::style, typename rule_style<Path, tp_plan<Rs...>, Module, None>::type>;
};
/// The style the plan gives parameter Path (replicated when no rule matches).
template <fixed_string Path, class Plan>
using style_of = rule_style<Path, Plan, false, replicated>;
/// The module style the plan gives module Path (void: none).
template <fixed_string Path, class Plan>
using module_style_of = rule_style<Path, Plan, true, void>;

/// The first of Ps for which Is<P>::value holds.
template <template <class> class Is, class... Ps>
using first_of = boost::mp11::mp_front<boost::mp11::mp_copy_if<boost::mp11::mp_list<Ps...>, Is>>;
template <class P>
using tp_t = std::bool_constant<is_tp<P>>;
template <class P>
using fsdp_t = std::bool_constant<is_fsdp<P>>;
template <class P>
using ddp_t = std::bool_constant<is_ddp<P>>;

/// x with placement P on mesh dim D (others as they are); P void: x.
template <int D, class P, class X>
auto placed_on(const X& x) {
  if constexpr (std::is_void_v<P>) {
    return x;
  } else {
    using To = boost::mp11::mp_replace_at_c<typename X::placements_type, static_cast<std::size_t>(D), P>;
    return runtime::redistribute<To>(x);
  }
}

/// A module style on tensor-parallel dim D, as styled_node applies it.
template <class Style, int D>
struct placed_style {
  using output = typename Style::output;
  template <class X>
  static auto place_input(const X& x) {
    return placed_on<D, typename Style::input>(x);
  }
  template <class Y>
  static auto place_output(const Y& y) {
    return placed_on<D, typename Style::output>(y);
  }
};

/// Whether style S shards a parameter of `rank` dims on its dim 0.
template <class S>
constexpr bool shards_dim0(std::size_t rank) {
  return std::is_same_v<S, colwise> && rank >= 1;
}

/// The placement of a parameter (path Path, `Rank` dims) on mesh dim M.
template <class Mesh, fixed_string Path, std::size_t Rank, int M, class... Ps>
struct placement_on {
  template <class P>
  static constexpr bool names_m() {
    return Mesh::template dim<P::dim_name>() == M;
  }
  // The tensor-parallel style on M, and whether some tensor-parallel dim shards dim 0.
  template <class P>
  using style_if = typename style_of<Path, typename P::plan>::type;
  template <class P>
  using tp_on_m = std::bool_constant<is_tp<P> && names_m<P>()>;
  static constexpr bool tp_here = ((is_tp<Ps> && names_m<Ps>()) || ...);
  static constexpr bool fsdp_here = ((is_fsdp<Ps> && names_m<Ps>()) || ...);
  static constexpr bool tp_dim0 = [] {
    bool any = false;
    ((any = any || [] {
       if constexpr (is_tp<Ps>) return shards_dim0<style_if<Ps>>(Rank);
       else return false;
     }()),
     ...);
    return any;
  }();
  static constexpr int fsdp_count = ((is_fsdp<Ps> ? 1 : 0) + ... + 0);
  static_assert(fsdp_count <= 1, "spmd::nn::parallelize: give fsdp<...> on one mesh dim at most.");

  template <class S>
  static auto tp_placement() {
    if constexpr (std::is_same_v<S, colwise>) {
      static_assert(Rank >= 1, "spmd::nn::parallelize: colwise on a parameter with no dims (a scalar).");
      if constexpr (fsdp_count == 1) return shard<0, 0>{};
      else return shard<0>{};
    } else if constexpr (std::is_same_v<S, rowwise>) {
      if constexpr (Rank >= 2) return shard<1>{};
      else return replicate{};
    } else {
      static_assert(std::is_same_v<S, replicated>,
                    "spmd::nn::parallelize: a rule's style is colwise, rowwise or replicated.");
      return replicate{};
    }
  }
  static auto pick() {
    if constexpr (tp_here) {
      return tp_placement<style_if<first_of<tp_on_m, Ps...>>>();
    } else if constexpr (fsdp_here) {
      static_assert(Rank >= 1, "spmd::nn::parallelize: FSDP shards dim 0, and a parameter has no dims.");
      if constexpr (tp_dim0) return shard<0, 1>{};
      else return shard<0>{};
    } else {
      return replicate{};
    }
  }
  using type = decltype(pick());
};

/// Every parallelism names a mesh dim the mesh has, at most one per mesh dim.
template <class Mesh, class... Ps>
constexpr bool dims_distinct() {
  int dims[] = {Mesh::template dim<Ps::dim_name>()..., -1};
  for (std::size_t i = 0; i < sizeof...(Ps); ++i)
    for (std::size_t j = i + 1; j < sizeof...(Ps); ++j)
      if (dims[i] == dims[j]) return false;
  return true;
}

}  // namespace detail

namespace detail {
template <class Mesh, fixed_string Path, class E, class Dims, class... Ps>
struct parameter_layout_of;
template <class Mesh, fixed_string Path, class E, int... M, class... Ps>
struct parameter_layout_of<Mesh, Path, E, std::integer_sequence<int, M...>, Ps...> {
  using type = layout<Mesh, placements<typename placement_on<Mesh, Path, E::rank(), M, Ps...>::type...>, E>;
};
}  // namespace detail

/// The layout parallelisms Ps give a parameter at path Path of extents E on Mesh.
template <class Mesh, fixed_string Path, class E, class... Ps>
using parameter_layout =
    typename detail::parameter_layout_of<Mesh, Path, E, std::make_integer_sequence<int, Mesh::ndim>, Ps...>::type;

namespace detail {

/// A context of tree.hpp: a host parameter at Path becomes a variable of its parallel layout.
template <class Mesh, class B, class... Ps>
struct parallel_leaves {
  template <fixed_string Path, class T, class E>
  using leaf = runtime::variable<T, parameter_layout<Mesh, Path, E, Ps...>, B>;

  template <fixed_string Path, class T, class E>
  static leaf<Path, T, E> make(const tensor<T, E>& host) {
    using L = typename leaf<Path, T, E>::layout_type;
    return runtime::requires_grad(runtime::factories<B>::template distribute_tensor<L>(host.data),
                                  std::string(Path.view()));
  }

  /// A module at Path: with the module style a tensor-parallel plan gives it, then an FSDP
  /// unit when an fsdp<...> names it, the model under DDP when a ddp<...> is given.
  template <fixed_string Path, class Node>
  static auto wrap(Node n) {
    return wrap_parallel<Path>(styled<Path>(std::move(n)));
  }

  template <fixed_string Path, class Node>
  static auto styled(Node n) {
    if constexpr (!(has_module_style<Ps, Path>() || ...)) {
      return n;
    } else {
      using P = first_of<tp_t, Ps...>;
      constexpr int tp = Mesh::template dim<P::dim_name>();
      using St = typename module_style_of<Path, typename P::plan>::type;
      return styled_node<Node, placed_style<St, tp>>{std::move(n)};
    }
  }
  template <class P, fixed_string Path>
  static constexpr bool has_module_style() {
    if constexpr (is_tp<P>) return !std::is_void_v<typename module_style_of<Path, typename P::plan>::type>;
    else return false;
  }

  template <fixed_string Path, class Node>
  static auto wrap_parallel(Node n) {
    if constexpr (Path.size() == 0 && (is_ddp<Ps> || ...)) {
      using D = first_of<ddp_t, Ps...>;
      constexpr int dp = Mesh::template dim<D::dim_name>();
      auto model = std::apply([](auto&... p) { return runtime::ddp<dp, D::bucket_bytes>(p...); }, leaf_refs(n));
      return ddp_node<Node, decltype(model)>{std::move(n), std::move(model)};
    } else if constexpr (!(unit_at<Ps, Path>() || ...)) {
      return n;
    } else {
      using F = first_of<fsdp_t, Ps...>;
      constexpr int dp = Mesh::template dim<F::dim_name>();
      auto own = own_leaf_refs(n);
      static_assert(std::tuple_size_v<decltype(own)> > 0,
                    "spmd::nn::parallelize: an FSDP unit holds no parameter of its own (every one is in "
                    "a unit inside it): leave it out of units<...>.");
      auto unit = std::apply([](auto&... p) { return runtime::fully_shard<dp, typename F::policy>(p...); }, own);
      return unit_node<Node, decltype(unit)>{std::move(n), std::move(unit)};
    }
  }

  /// Whether parallelism P makes the module at Path an FSDP unit.
  template <class P, fixed_string Path>
  static constexpr bool unit_at() {
    if constexpr (is_fsdp<P>) {
      return []<fixed_string... U>(units<U...>*) {
        return (path_matches(U.view(), Path.view()) || ...);
      }(static_cast<typename P::units_type*>(nullptr));
    } else {
      return false;
    }
  }
};

/// Whether some parameter path (or, for a module style, module path) of the host model S
/// matches Pattern.
template <class S, fixed_string Pattern, bool Module>
constexpr bool rule_matches() {
  bool any = false;
  if constexpr (Module)
    for (const std::string_view p : module_paths<S>()) any = any || path_matches(Pattern.view(), p);
  else
    for (const std::string_view p : parameter_paths<S>()) any = any || path_matches(Pattern.view(), p);
  return any;
}

/// Named in the compiler's note when a rule of a plan matches no parameter.
template <fixed_string Pattern, bool Matches>
struct plan_rule_check {
  static_assert(Matches,
                "spmd::nn::parallelize: a rule of the tensor-parallel plan matches no parameter of the "
                "model (or, for a module style, no module; its pattern is the Pattern of this "
                "instantiation; a path is member names joined by '.', an array element by its index, "
                "'*' for any one segment).");
  static constexpr bool ok = Matches;
};

template <class S, class P>
constexpr bool plan_fits() {
  if constexpr (is_tp<P>) {
    return []<class... Rs>(tp_plan<Rs...>*) {
      return (plan_rule_check<Rs::pattern, rule_matches<S, Rs::pattern, is_module_style<typename Rs::style>>()>::ok &&
              ... && true);
    }(static_cast<typename P::plan*>(nullptr));
  } else {
    return true;
  }
}

}  // namespace detail

/// The host model's parameters on Mesh (backend B) as the parallelisms Ps place them: a tree of
/// variables (trainable, named by their paths) with the model's structure.
template <class Mesh, class B, class... Ps, class S>
auto parallelize(const S& host) {
  static_assert(((detail::is_tp<Ps> || detail::is_fsdp<Ps> || detail::is_ddp<Ps>) && ...),
                "spmd::nn::parallelize: the parallelisms are tensor_parallel<dim, plan>, fsdp<dim, ...> "
                "and ddp<dim>.");
  static_assert(((detail::is_fsdp<Ps> ? 1 : 0) + ... + 0) + ((detail::is_ddp<Ps> ? 1 : 0) + ... + 0) <= 1,
                "spmd::nn::parallelize: one data-parallel dim, FSDP or DDP (HSDP is not here yet).");
  static_assert(detail::dims_distinct<Mesh, Ps...>(),
                "spmd::nn::parallelize: two parallelisms name the same mesh dim.");
  static_assert((detail::plan_fits<S, Ps>() && ...));
  return build_tree<"">(detail::parallel_leaves<Mesh, B, Ps...>{}, host);
}

}  // namespace spmd::nn
