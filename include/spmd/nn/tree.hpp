// spmd/nn/tree.hpp — a model as a tree: a host model is a Hana-reflected struct whose members
// are parameters (spmd::tensor<T, extents<...>>), other host models, or std::arrays of them;
// its parallel form (nn/parallelize.hpp) is a tree of `node`s with the same structure whose
// leaves are variables. A node calls its module's forward; get<"name">(node) is a member.
//
//   for (std::string_view p : spmd::nn::parameter_paths<gpt>()) ...   // "blocks.0.attn.wq", ...
//   spmd::nn::for_each_parameter(host, [&](std::string_view path, auto& t) { t.data = ...; });
//   auto& w = get<"weight">(get<"fc1">(model));                       // a variable
//   auto y = get<"fc1">(model)(x);                                    // linear::forward(node, x)
//   std::apply([](auto&... p) { return runtime::adamw({}, p...); }, spmd::nn::parameters(model));
//
// A module type S gives its forward as `template <class M, class... A> static auto forward(const
// M& m, const A&... a)`, m being S's node: the same code runs on every layout and backend.
#pragma once

#include <array>
#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>

#include <boost/hana/accessors.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/concept/struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/length.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>

#include "spmd/core/fixed_string.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/nn/path.hpp"
#include "spmd/runtime/autograd/redistribute.hpp"
#include "spmd/runtime/module.hpp"

namespace spmd::nn {

using spmd::tensor;

template <class X>
inline constexpr bool is_array_v = false;
template <class X, std::size_t N>
inline constexpr bool is_array_v<std::array<X, N>> = true;

/// A module's member I: its name and its type.
template <class S, std::size_t I>
struct member_info {
  using pair = std::remove_cvref_t<decltype(boost::hana::at_c<I>(boost::hana::accessors<S>()))>;
  using spelled = std::remove_cvref_t<decltype(boost::hana::first(std::declval<pair>()))>;
  static constexpr auto name = runtime::detail::hana_name<spelled>::value;
  using type = std::remove_cvref_t<decltype(boost::hana::second(std::declval<pair>())(std::declval<S&>()))>;
  static constexpr decltype(auto) of(const S& s) { return boost::hana::second(boost::hana::at_c<I>(boost::hana::accessors<S>()))(s); }
};
template <class S>
inline constexpr std::size_t member_count =
    decltype(boost::hana::length(boost::hana::accessors<S>()))::value;

/// The parallel form of a module S: its members' parallel forms, in S's order.
template <class S, class... Members>
struct node {
  using module_type = S;
  std::tuple<Members...> members;

  /// S::forward over this node.
  template <class... A>
  auto operator()(const A&... a) const {
    return S::forward(*this, a...);
  }
};

namespace detail {

template <class S, fixed_string Name>
constexpr std::size_t member_index() {
  return []<std::size_t... I>(std::index_sequence<I...>) {
    std::size_t at = sizeof...(I);
    ((member_info<S, I>::name.view() == Name.view() ? (void)(at = I) : (void)0), ...);
    return at;
  }(std::make_index_sequence<member_count<S>>{});
}

}  // namespace detail

/// Member Name of a node (a name the module does not have fails to compile).
template <fixed_string Name, class S, class... M>
const auto& get(const node<S, M...>& n) {
  constexpr std::size_t i = detail::member_index<S, Name>();
  static_assert(i < sizeof...(M), "spmd::nn::get: the module has no member of this name.");
  return std::get<i>(n.members);
}
template <fixed_string Name, class S, class... M>
auto& get(node<S, M...>& n) {
  constexpr std::size_t i = detail::member_index<S, Name>();
  static_assert(i < sizeof...(M), "spmd::nn::get: the module has no member of this name.");
  return std::get<i>(n.members);
}

/// A module that is an FSDP unit (nn/parallelize.hpp's fsdp<...>): its node with the parameters
/// at rest, and the unit over its own ones (those not in a unit inside it). Calling it gathers
/// them (one all_gather), runs the module's forward on a node holding the gathered ones, and
/// reshards; their gradients reach the parameters through one reduce_scatter.
template <class Node, class Unit>
struct unit_node {
  using module_type = typename Node::module_type;
  Node inner;
  mutable Unit unit;  // its state is shared: calling it changes no member of the node

  template <class... A>
  auto operator()(const A&... a) const;
};

/// A model under DDP: its node, and runtime::ddp over every parameter. Calling it runs the
/// model's forward on this step's views of the parameters, whose gradients stay Partial on dp
/// until their bucket's all_reduce.
template <class Node, class Model>
struct ddp_node {
  using module_type = typename Node::module_type;
  Node inner;
  Model ddp;

  template <class... A>
  auto operator()(const A&... a) const;
};

/// A unit whose data parallelism the program chose when it built the model
/// (nn/unit_choice.hpp): FSDP's unit_node or the unit under DDP (a ddp_node over its own
/// parameters). Either runs the same module on parameters of the same layouts (FSDP's gathered
/// ones are DDP's), so both return the same type: a chain of such units costs two
/// instantiations per distinct unit, whatever the mix chosen.
template <class Fsdp, class Ddp>
struct switch_node {
  using module_type = typename Fsdp::module_type;
  std::variant<Fsdp, Ddp> held;
  std::string_view path;  // the unit's path in the model ("" the model itself)

  template <class... A>
  auto operator()(const A&... a) const {
    using Y = decltype(std::declval<const Fsdp&>()(a...));
    static_assert(std::is_same_v<Y, decltype(std::declval<const Ddp&>()(a...))>,
                  "spmd::nn: a unit returns another type under FSDP than under DDP, so the choice "
                  "between them cannot wait until run time.");
    if (held.index() == 0) return std::get<0>(held)(a...);
    return std::get<1>(held)(a...);
  }
  /// Whether FSDP holds this unit (else DDP).
  bool fsdp() const { return held.index() == 0; }
};

/// A module whose forward places its own output (`static constexpr bool places_output = true`,
/// calling nn::place_output(m, y) where the output style belongs: a linear layer's before its
/// bias, so that a rowwise Partial is reduce-scattered and the bias added to the slice).
template <class S>
concept places_own_output = requires { requires S::places_output; };

/// A module whose inputs and output a module style places (nn/parallelize.hpp: prepare_input,
/// prepare_output, sequence_parallel): its first input redistributed before its forward, its
/// output after (or where its forward calls place_output). Style::place_input / place_output
/// do it.
template <class Node, class Style>
struct styled_node {
  using module_type = typename Node::module_type;
  using style = Style;
  Node inner;

  template <class X, class... A>
  auto operator()(const X& x, const A&... a) const {
    if constexpr (places_own_output<module_type>) return module_type::forward(*this, Style::place_input(x), a...);
    else return Style::place_output(inner(Style::place_input(x), a...));
  }
};

namespace detail {
template <class M>
constexpr bool styles_output() {
  if constexpr (requires { typename M::style; }) return !std::is_void_v<typename M::style::output>;
  else return false;
}
}  // namespace detail

/// y with every Partial placement reduced to Replicate (one all_reduce each): PyTorch's
/// RowwiseParallel output by default.
template <class Y>
auto reduce_partials(const Y& y) {
  using P = typename Y::placements_type;
  using R = runtime::default_grad_placements_t<P>;  // every Partial read as Replicate
  if constexpr (std::is_same_v<P, R>) return y;
  else return runtime::redistribute<R>(y);
}

/// y placed as module m's output style says; without one (or a style that leaves the output
/// alone) a Partial y is reduced to Replicate, as PyTorch's RowwiseParallel leaves it. Reducing
/// before the bias keeps the bias out of the sum; leaving it to the next operator's
/// propagation may pick a reduce_scatter and an all_gather, the same bytes in two collectives.
template <class M, class Y>
auto place_output(const M&, const Y& y) {
  if constexpr (detail::styles_output<M>()) return M::style::place_output(y);
  else return reduce_partials(y);
}

/// Member Name of a wrapped module (styled, an FSDP unit, the model under DDP): its node's.
template <fixed_string Name, class W>
  requires requires(W& w) { typename W::module_type; w.inner; }
const auto& get(const W& n) {
  return get<Name>(n.inner);
}
template <fixed_string Name, class W>
  requires requires(W& w) { typename W::module_type; w.inner; }
auto& get(W& n) {
  return get<Name>(n.inner);
}

namespace detail {

template <class X>
inline constexpr bool is_unit_node_v = false;
template <class N, class U>
inline constexpr bool is_unit_node_v<unit_node<N, U>> = true;
template <class X>
inline constexpr bool is_switch_node_v = false;
template <class F, class D>
inline constexpr bool is_switch_node_v<switch_node<F, D>> = true;
/// A unit of FSDP, or one whose data parallelism was chosen at run time: its own parameters
/// are not its parent's.
template <class X>
inline constexpr bool is_unit_v = is_unit_node_v<X> || is_switch_node_v<X>;
template <class X>
inline constexpr bool is_styled_v = false;
template <class N, class St>
inline constexpr bool is_styled_v<styled_node<N, St>> = true;
template <class X>
inline constexpr bool is_node_v = false;
template <class S, class... M>
inline constexpr bool is_node_v<node<S, M...>> = true;

/// The leaves of a parallel tree x that belong to no unit inside it, as references.
template <class X>
auto own_leaf_refs(X& x) {
  using Y = std::remove_const_t<X>;
  if constexpr (is_unit_v<Y>) return std::tuple<>{};
  else if constexpr (is_styled_v<Y>) return own_leaf_refs(x.inner);
  else if constexpr (is_array_v<Y>) return std::apply([](auto&... e) { return std::tuple_cat(own_leaf_refs(e)...); }, x);
  else if constexpr (is_node_v<Y>) return std::apply([](auto&... e) { return std::tuple_cat(own_leaf_refs(e)...); }, x.members);
  else return std::tie(x);
}

template <class X>
constexpr std::size_t own_count() {
  if constexpr (is_unit_v<X>) return 0;
  else if constexpr (is_styled_v<X>) return own_count<decltype(X::inner)>();
  else if constexpr (is_array_v<X>) return std::tuple_size_v<X> * own_count<typename X::value_type>();
  else if constexpr (is_node_v<X>)
    return []<class S, class... M>(node<S, M...>*) { return (own_count<M>() + ... + 0); }(static_cast<X*>(nullptr));
  else return 1;
}

/// x with its own leaves (own_leaf_refs' order) replaced by g's elements from Off on.
template <std::size_t Off, class X, class G>
auto with_leaves(const X& x, const G& g) {
  if constexpr (is_unit_v<X>) {
    return x;
  } else if constexpr (is_styled_v<X>) {
    return [&]<class N, class St>(styled_node<N, St>*) {
      using R = decltype(with_leaves<Off>(x.inner, g));
      return styled_node<R, St>{with_leaves<Off>(x.inner, g)};
    }(static_cast<X*>(nullptr));
  } else if constexpr (is_array_v<X>) {
    constexpr std::size_t each = own_count<typename X::value_type>();
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      using E = decltype(with_leaves<Off>(x[0], g));
      return std::array<E, sizeof...(I)>{with_leaves<Off + I * each>(x[I], g)...};
    }(std::make_index_sequence<std::tuple_size_v<X>>{});
  } else if constexpr (is_node_v<X>) {
    return [&]<class S, class... M>(node<S, M...>*) {
      return [&]<std::size_t... I>(std::index_sequence<I...>) {
        constexpr std::array<std::size_t, sizeof...(M) + 1> start = [] {
          std::array<std::size_t, sizeof...(M) + 1> a{};
          const std::size_t counts[] = {own_count<M>()..., 0};
          for (std::size_t i = 0; i < sizeof...(M); ++i) a[i + 1] = a[i] + counts[i];
          return a;
        }();
        return node<S, decltype(with_leaves<Off + start[I]>(std::get<I>(x.members), g))...>{
            {with_leaves<Off + start[I]>(std::get<I>(x.members), g)...}};
      }(std::index_sequence_for<M...>{});
    }(static_cast<X*>(nullptr));
  } else {
    return std::get<Off>(g);
  }
}

}  // namespace detail

template <class Node, class Model>
template <class... A>
auto ddp_node<Node, Model>::operator()(const A&... a) const {
  return detail::with_leaves<0>(inner, ddp.params())(a...);
}

template <class Node, class Unit>
template <class... A>
auto unit_node<Node, Unit>::operator()(const A&... a) const {
  return unit.forward([&](auto&&... gathered) {
    const auto g = std::forward_as_tuple(gathered...);
    return detail::with_leaves<0>(inner, g)(a...);
  });
}

// ---------------------------------------------------------------------------
// Building: a host model's parallel form, leaf by leaf (leaves: make<Path>(host tensor) and
// wrap<Path>(node): a module's node as it stands in the tree; where Leaves::switches<Path>(),
// build_switch<Path>(host module) builds the module itself)

template <fixed_string Path, class Leaves, class H>
auto build_tree(const Leaves& leaves, const H& host);

namespace detail {

template <fixed_string Path, class Leaves, class S, std::size_t... I>
auto build_module(const Leaves& leaves, const S& host, std::index_sequence<I...>) {
  return node<S, decltype(build_tree<join<Path, member_info<S, I>::name>()>(leaves, member_info<S, I>::of(host)))...>{
      {build_tree<join<Path, member_info<S, I>::name>()>(leaves, member_info<S, I>::of(host))...}};
}

/// Whether Leaves builds the module at Path itself (Leaves::switches<Path>()).
template <class Leaves, fixed_string Path>
constexpr bool switches_at() {
  if constexpr (requires { Leaves::template switches<Path>(); }) return Leaves::template switches<Path>();
  else return false;
}

template <fixed_string Path, class Leaves, class H, std::size_t N, std::size_t... I>
auto build_array(const Leaves& leaves, const std::array<H, N>& host, std::index_sequence<I...>) {
  using first = decltype(build_tree<join<Path, index_text<0>()>()>(leaves, host[0]));
  static_assert((std::is_same_v<first, decltype(build_tree<join<Path, index_text<I>()>()>(leaves, host[I]))> && ...),
                "spmd::nn: the elements of an array of modules must be placed alike (a rule names one "
                "element's parameters but not the others': use '*' for the index)");
  return std::array<first, N>{build_tree<join<Path, index_text<I>()>()>(leaves, host[I])...};
}

}  // namespace detail

template <fixed_string Path, class Leaves, class H>
auto build_tree(const Leaves& leaves, const H& host) {
  if constexpr (is_tensor_v<H>) {
    return leaves.template make<Path>(host);
  } else if constexpr (is_array_v<H>) {
    return detail::build_array<Path>(leaves, host, std::make_index_sequence<std::tuple_size_v<H>>{});
  } else if constexpr (detail::switches_at<Leaves, Path>()) {
    return leaves.template build_switch<Path>(host);  // a unit whose data parallelism is chosen now
  } else {
    static_assert(boost::hana::Struct<H>::value,
                  "spmd::nn: a model's members are spmd::tensor<T, extents<...>>, Hana-reflected "
                  "modules (BOOST_HANA_DEFINE_STRUCT / BOOST_HANA_ADAPT_STRUCT) or std::arrays of them.");
    return leaves.template wrap<Path>(detail::build_module<Path>(leaves, host, std::make_index_sequence<member_count<H>>{}));
  }
}

// ---------------------------------------------------------------------------
// Paths and parameters

namespace detail {

template <fixed_string P>
struct path_holder {
  static constexpr auto value = P;
};

template <fixed_string Path, class H>
constexpr std::size_t count_leaves() {
  if constexpr (is_tensor_v<H>) return 1;
  else if constexpr (is_array_v<H>) return std::tuple_size_v<H> * count_leaves<Path, typename H::value_type>();
  else
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (count_leaves<Path, typename member_info<H, I>::type>() + ... + 0);
    }(std::make_index_sequence<member_count<H>>{});
}

template <fixed_string Path, class H, std::size_t N>
constexpr void collect_paths(std::array<std::string_view, N>& out, std::size_t& k) {
  if constexpr (is_tensor_v<H>) {
    out[k++] = path_holder<Path>::value.view();
  } else if constexpr (is_array_v<H>) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (collect_paths<join<Path, index_text<I>()>(), typename H::value_type>(out, k), ...);
    }(std::make_index_sequence<std::tuple_size_v<H>>{});
  } else {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (collect_paths<join<Path, member_info<H, I>::name>(), typename member_info<H, I>::type>(out, k), ...);
    }(std::make_index_sequence<member_count<H>>{});
  }
}

template <fixed_string Path, class H>
constexpr std::size_t count_modules() {
  if constexpr (is_tensor_v<H>) return 0;
  else if constexpr (is_array_v<H>) return std::tuple_size_v<H> * count_modules<Path, typename H::value_type>();
  else
    return 1 + []<std::size_t... I>(std::index_sequence<I...>) {
      return (count_modules<Path, typename member_info<H, I>::type>() + ... + 0);
    }(std::make_index_sequence<member_count<H>>{});
}

template <fixed_string Path, class H, std::size_t N>
constexpr void collect_modules(std::array<std::string_view, N>& out, std::size_t& k) {
  if constexpr (is_array_v<H>) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (collect_modules<join<Path, index_text<I>()>(), typename H::value_type>(out, k), ...);
    }(std::make_index_sequence<std::tuple_size_v<H>>{});
  } else if constexpr (!is_tensor_v<H>) {
    out[k++] = path_holder<Path>::value.view();
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (collect_modules<join<Path, member_info<H, I>::name>(), typename member_info<H, I>::type>(out, k), ...);
    }(std::make_index_sequence<member_count<H>>{});
  }
}

}  // namespace detail

/// Every module's path in a host model S ("" the model itself), depth first.
template <class S>
constexpr auto module_paths() {
  std::array<std::string_view, detail::count_modules<"", S>()> out{};
  std::size_t k = 0;
  detail::collect_modules<"", S>(out, k);
  return out;
}

/// Every parameter's path in a host model S, depth first in declaration order (the order of
/// parameters()).
template <class S>
constexpr auto parameter_paths() {
  std::array<std::string_view, detail::count_leaves<"", S>()> out{};
  std::size_t k = 0;
  detail::collect_paths<"", S>(out, k);
  return out;
}

namespace detail {

template <fixed_string Path, class H, class F>
void visit_host(H& host, F& f) {
  if constexpr (is_tensor_v<std::remove_const_t<H>>) {
    f(path_holder<Path>::value.view(), host);
  } else if constexpr (is_array_v<std::remove_const_t<H>>) {
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (visit_host<join<Path, index_text<I>()>()>(host[I], f), ...);
    }(std::make_index_sequence<std::tuple_size_v<std::remove_const_t<H>>>{});
  } else {
    using S = std::remove_const_t<H>;
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      (visit_host<join<Path, member_info<S, I>::name>()>(
           boost::hana::second(boost::hana::at_c<I>(boost::hana::accessors<S>()))(host), f),
       ...);
    }(std::make_index_sequence<member_count<S>>{});
  }
}

}  // namespace detail

/// f(path, parameter) for every parameter of a host model, in parameter_paths' order: how a
/// host model is filled from a file of named tensors (or written to one).
template <class S, class F>
  requires boost::hana::Struct<std::remove_const_t<S>>::value
void for_each_parameter(S& host, F&& f) {
  detail::visit_host<"">(host, f);
}

namespace detail {

template <class X>
auto leaf_refs(X& x) {
  if constexpr (is_switch_node_v<std::remove_const_t<X>>) {
    static_assert(!is_switch_node_v<std::remove_const_t<X>>,
                  "spmd::nn::parameters: a model whose units chose FSDP or DDP at run time has no "
                  "parameter tuple of one type; visit its units with nn::for_each_unit.");
  } else if constexpr (is_array_v<std::remove_const_t<X>>) {
    return std::apply([](auto&... e) { return std::tuple_cat(leaf_refs(e)...); }, x);
  } else if constexpr (requires { x.inner; }) {  // an FSDP unit, the model under DDP
    return leaf_refs(x.inner);
  } else if constexpr (requires { typename X::module_type; }) {
    return std::apply([](auto&... e) { return std::tuple_cat(leaf_refs(e)...); }, x.members);
  } else {
    return std::tie(x);
  }
}

}  // namespace detail

/// A parallel model's parameters (references), in parameter_paths' order: what an optimizer,
/// a checkpoint or a data-parallel wrapper takes.
template <class Model>
  requires requires { typename Model::module_type; }
auto parameters(Model& model) {
  return detail::leaf_refs(model);
}

}  // namespace spmd::nn
