// spmd/runtime/module.hpp — whole models: a struct of host tensors, sharded member by member by a
// partition chosen at compile time (DTensor's distribute_module).
//
//   struct mlp {
//     BOOST_HANA_DEFINE_STRUCT(mlp,
//       (spmd::tensor<float, spmd::extents<64, 32>>, w1), (spmd::tensor<float, spmd::extents<64>>, b1),
//       (spmd::tensor<float, spmd::extents<32, 64>>, w2), (spmd::tensor<float, spmd::extents<32>>, b2));
//   };
//   template <spmd::fixed_string Name, class Member>
//   struct tp_plan {};                                             // unnamed: replicated
//   template <class M> struct tp_plan<"w1", M> { using type = spmd::placements<replicate, shard<0>>; };
//   template <class M> struct tp_plan<"w2", M> { using type = spmd::placements<replicate, shard<1>>; };
//
//   auto d = spmd::sim::distribute_module<tp_plan, Mesh>(model);  // a module of dtensors
//   d.get<"w1">();                        // dtensor<float, layout<Mesh, placements<R, S(0)>, ...>>
//   mlp back = d.full_module();           // full_tensor of every member
//   auto mine = d.to_local(3);            // every member's local on rank 3 (host tensors)
//
// The partition is a class template Partition<Name, Member> (the member's name, a
// fixed_string, and its type): its `type` is the member's placements (the extents are the
// member's) or a whole layout on Mesh (whose extents must equal the member's). A Partition
// with no `type` for a member replicates it. A member whose placements do not fit its shape,
// or a layout whose extents differ from it, fails to compile with a sentence; the member's
// name is in the instantiation the compiler names with it (module_member<..., boost::hana::
// string<'w', '1'>>).
//
// Boost.Hana reflects over the struct (BOOST_HANA_DEFINE_STRUCT / BOOST_HANA_ADAPT_STRUCT) on
// the host only: nothing here is device code.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <boost/hana/accessors.hpp>
#include <boost/hana/adapt_struct.hpp>
#include <boost/hana/at.hpp>
#include <boost/hana/define_struct.hpp>
#include <boost/hana/first.hpp>
#include <boost/hana/pair.hpp>
#include <boost/hana/second.hpp>
#include <boost/hana/string.hpp>
#include <boost/hana/tuple.hpp>
#include <boost/hana/unpack.hpp>

#include "spmd/core/fixed_string.hpp"
#include "spmd/core/layout.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd {

/// A host tensor of static shape Extents, row-major: a member of a module.
template <class T, class Extents>
struct tensor {
  static_assert(is_extents_v<Extents> && Extents::is_static(),
                "spmd::tensor: a module member's shape is static (spmd::extents<...> without dyn).");
  using value_type = T;
  using extents_type = Extents;
  static constexpr index_t elements() {
    index_t n = 1;
    for (std::size_t d = 0; d < Extents::rank(); ++d) n *= Extents::static_extent(d);
    return n;
  }
  std::vector<T> data = std::vector<T>(static_cast<std::size_t>(elements()));
};

template <class X>
inline constexpr bool is_tensor_v = false;
template <class T, class E>
inline constexpr bool is_tensor_v<tensor<T, E>> = true;

namespace runtime {

namespace detail {

/// A hana::string as a fixed_string.
template <class HanaString>
struct hana_name;
template <char... C>
struct hana_name<boost::hana::string<C...>> {
  static constexpr char chars[sizeof...(C) + 1] = {C..., '\0'};
  static constexpr fixed_string<sizeof...(C) + 1> value{chars};
};

template <class P, class = void>
struct partition_type {
  using type = void;  // the partition does not name the member
};
template <class P>
struct partition_type<P, std::void_t<typename P::type>> {
  using type = typename P::type;
};

template <class X>
inline constexpr bool is_layout_v = false;
template <class M, class P, class E>
inline constexpr bool is_layout_v<spmd::layout<M, P, E>> = true;

/// The placements a partition's answer stands for: its own, a layout's, or (no answer)
/// Replicate everywhere.
template <class Chosen, class Mesh>
struct chosen_placements {
  using type = Chosen;
};
template <class Mesh>
struct chosen_placements<void, Mesh> {
  using type = typename all_replicate<Mesh>::type;
};
template <class M, class P, class E, class Mesh>
struct chosen_placements<spmd::layout<M, P, E>, Mesh> {
  using type = P;
};

}  // namespace detail

/// The layout of member Name (of type Member) under Partition on Mesh, checked. Spelled is
/// the name as Hana spells it (boost::hana::string<'w', '1'>): compilers print it legibly in
/// the notes of a failed check, where a fixed_string may print as character codes.
template <fixed_string Name, class Member, template <fixed_string, class> class Partition, class Mesh,
          class Spelled = void>
struct module_member {
  static_assert(is_tensor_v<Member>,
                "spmd::distribute_module: every member of a module is a spmd::tensor<T, "
                "spmd::extents<...>> (the member is named in this instantiation).");
  using extents_type = typename Member::extents_type;
  using chosen = typename detail::partition_type<Partition<Name, Member>>::type;
  using placements_type = typename detail::chosen_placements<chosen, Mesh>::type;
  static constexpr bool right_mesh = [] {
    if constexpr (detail::is_layout_v<chosen>) return std::is_same_v<typename chosen::mesh_type, Mesh>;
    else return true;
  }();
  static_assert(right_mesh,
                "spmd::distribute_module: the partition gives a member a layout on another mesh "
                "than the module's (the member is named in this instantiation).");
  static constexpr bool same_extents = [] {
    if constexpr (detail::is_layout_v<chosen>) return std::is_same_v<typename chosen::extents_type, extents_type>;
    else return true;
  }();
  static_assert(same_extents,
                "spmd::distribute_module: the partition's layout for a member has other extents "
                "than the member (the member is named in this instantiation).");
  static constexpr bool fits =
      make_spec(Mesh::nominal_shape_vec(), placements_type::value(), static_cast<int>(extents_type::rank())).ok();
  static_assert(fits,
                "spmd::distribute_module: the partition's placements do not fit a member's shape "
                "(a shard dim beyond its dims, or a placement count that is not the mesh's); "
                "the member is named in this instantiation.");
  using layout_type = spmd::layout<Mesh, std::conditional_t<fits, placements_type,
                                                            typename detail::all_replicate<Mesh>::type>,
                                   extents_type>;
  using value_type = typename Member::value_type;
  static constexpr std::string_view name = Name.view();
};

/// The members of a Hana-adapted struct S as module_member types.
template <class S, template <fixed_string, class> class Partition, class Mesh>
struct module_members {
  template <class Pair>
  struct one {
    using accessor = std::remove_cvref_t<decltype(boost::hana::second(std::declval<Pair>()))>;
    using member = std::remove_cvref_t<decltype(std::declval<accessor>()(std::declval<S&>()))>;
    using spelled = std::remove_cvref_t<decltype(boost::hana::first(std::declval<Pair>()))>;
    static constexpr auto name = detail::hana_name<spelled>::value;
    using type = module_member<name, member, Partition, Mesh, spelled>;
  };
  template <class Tuple>
  struct all;
  template <class... Pairs>
  struct all<boost::hana::tuple<Pairs...>> {
    using type = std::tuple<typename one<Pairs>::type...>;
  };
  using type = typename all<std::remove_cvref_t<decltype(boost::hana::accessors<S>())>>::type;
};

/// Every member of a module as a dtensor on backend B, by name.
template <class S, template <fixed_string, class> class Partition, class Mesh, class B>
class distributed_module {
  using members = typename module_members<S, Partition, Mesh>::type;
  template <class Tuple>
  struct dtensors;
  template <class... Mm>
  struct dtensors<std::tuple<Mm...>> {
    using type = std::tuple<dtensor<typename Mm::value_type, typename Mm::layout_type, B>...>;
  };
  static constexpr std::size_t count = std::tuple_size_v<members>;

  template <fixed_string Name, std::size_t... I>
  static constexpr std::size_t index_of(std::index_sequence<I...>) {
    std::size_t at = count;
    ((std::tuple_element_t<I, members>::name == Name.view() ? (void)(at = I) : (void)0), ...);
    return at;
  }

 public:
  using struct_type = S;
  using mesh_type = Mesh;
  using backend_type = B;
  using member_types = members;                       // module_member<...> per member
  using tuple_type = typename dtensors<members>::type;  // their dtensors

  explicit distributed_module(tuple_type t) : t_(std::move(t)) {}

  /// Member Name's dtensor (a name the struct does not have fails to compile).
  template <fixed_string Name>
  auto& get() {
    constexpr std::size_t i = index_of<Name>(std::make_index_sequence<count>{});
    static_assert(i < count, "spmd::distributed_module::get: the module has no member of this name.");
    return std::get<i>(t_);
  }
  template <fixed_string Name>
  const auto& get() const {
    constexpr std::size_t i = index_of<Name>(std::make_index_sequence<count>{});
    static_assert(i < count, "spmd::distributed_module::get: the module has no member of this name.");
    return std::get<i>(t_);
  }
  const tuple_type& members_tuple() const { return t_; }
  tuple_type& members_tuple() { return t_; }

  /// f(name, dtensor) for every member, in the struct's order.
  template <class F>
  void for_each(F&& f) const {
    for_each_impl(f, std::make_index_sequence<count>{});
  }
  template <class F>
  void for_each(F&& f) {
    for_each_impl(f, std::make_index_sequence<count>{});
  }

  /// Every member's full tensor (Partial placements reduced): the module on one device.
  S full_module() const {
    S out{};
    gather(out, std::make_index_sequence<count>{});
    return out;
  }
  /// Every member's local on `mesh_rank` (host copies), in the struct's order.
  auto to_local(index_t mesh_rank) const {
    return std::apply([&](const auto&... d) { return std::make_tuple(d.to_local(mesh_rank)...); }, t_);
  }

 private:
  template <class F, std::size_t... I>
  void for_each_impl(F& f, std::index_sequence<I...>) const {
    (f(std::tuple_element_t<I, members>::name, std::get<I>(t_)), ...);
  }
  template <class F, std::size_t... I>
  void for_each_impl(F& f, std::index_sequence<I...>) {
    (f(std::tuple_element_t<I, members>::name, std::get<I>(t_)), ...);
  }
  template <std::size_t... I>
  void gather(S& out, std::index_sequence<I...>) const {
    const auto acc = boost::hana::accessors<S>();
    ((boost::hana::second(boost::hana::at_c<I>(acc))(out).data = std::get<I>(t_).full_tensor()), ...);
  }

  tuple_type t_;
};

/// distribute_module over backend B: every member of `module` distributed by its layout.
template <template <fixed_string, class> class Partition, class Mesh, class B, class S>
distributed_module<S, Partition, Mesh, B> distribute_module_on(const S& module) {
  using DM = distributed_module<S, Partition, Mesh, B>;
  const auto acc = boost::hana::accessors<S>();
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return DM(typename DM::tuple_type(
        factories<B>::template distribute_tensor<typename std::tuple_element_t<I, typename DM::member_types>::layout_type>(
            boost::hana::second(boost::hana::at_c<I>(acc))(module).data)...));
  }(std::make_index_sequence<std::tuple_size_v<typename DM::member_types>>{});
}

}  // namespace runtime
}  // namespace spmd
