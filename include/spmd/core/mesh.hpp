// spmd/core/mesh.hpp — a compile-time device mesh: shape, axis names, rank list.
//
//   using M = spmd::mesh<2, 4>::named<"dp", "tp">;       // ranks 0..7
//   using Q = spmd::mesh<4>::with_ranks<0, 2, 4, 6>;     // a mesh over some ranks
//   static_assert(M::coord_of(5).value == spmd::dims<2>{1, 1});
//   using TP = M::sub<"tp">::containing<5>;               // mesh<4> over ranks 4..7
#pragma once

#include <cstddef>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spmd/core/config.hpp"
#include "spmd/core/fixed_string.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd {

template <index_t... S>
struct shape_list {};
/// One axis name as a type. Names live in types made of chars, not in class-type
/// template arguments, because nvcc 13 cannot emit class-type template arguments into
/// its host code; `named<"dp", "tp">` is host-compiler sugar for these types, and code
/// that nvcc compiles spells them `named_axes<axis<'d', 'p'>, axis<'t', 'p'>>`.
template <char... C>
struct axis {
  static constexpr char chars[]{C..., '\0'};
  static constexpr std::string_view view() { return {chars, sizeof...(C)}; }
};

namespace detail {
template <fixed_string S, std::size_t... I>
axis<S.chars[I]...> make_axis(std::index_sequence<I...>);
}  // namespace detail

/// The axis type of a string literal: `axis_of<"tp">` is `axis<'t', 'p'>`.
template <fixed_string S>
using axis_of = decltype(detail::make_axis<S>(std::make_index_sequence<S.size()>{}));

template <class... Axes>
struct name_list {};
/// Explicit ranks, row-major over the mesh; empty = 0..size-1.
template <index_t... R>
struct rank_list {};

/// A mesh coordinate, or none for a rank outside the mesh.
template <std::size_t N>
struct maybe_coord {
  dims<N> value{};
  bool valid = false;
  SPMD_HD constexpr explicit operator bool() const { return valid; }
  SPMD_HD constexpr const dims<N>& operator*() const { return value; }
};

namespace detail {
template <class Ranks>
struct rank_checks;
template <index_t... R>
struct rank_checks<rank_list<R...>> {
  static constexpr bool non_negative = ((R >= 0) && ...);
  static constexpr bool distinct() {
    constexpr index_t r[]{R..., 0};
    for (std::size_t i = 1; i <= sizeof...(R); ++i)
      for (std::size_t j = 1; j < i; ++j)
        if (r[i - 1] == r[j - 1]) return false;
    return true;
  }
};
template <class... N>
constexpr bool distinct_names() {
  constexpr std::string_view v[]{N::view()..., {}};
  for (std::size_t i = 0; i != sizeof...(N); ++i)  // != : no "i < 0" warning for no names
    for (std::size_t j = 0; j != i; ++j)
      if (v[i] == v[j]) return false;
  return true;
}
}  // namespace detail

template <class Shape, class Names = name_list<>, class Ranks = rank_list<>>
struct basic_mesh;

template <class Parent, dim_mask Mask>
struct submesh;

template <index_t... S, class... N, index_t... R>
struct basic_mesh<shape_list<S...>, name_list<N...>, rank_list<R...>> {
  static constexpr int ndim = sizeof...(S);
  static constexpr index_t size = (S * ... * 1);

  static_assert(ndim >= 1 && ndim <= max_mesh_dims, "spmd::mesh: a mesh needs 1 to 8 dims.");
  static_assert(((S >= 1) && ...), "spmd::mesh: every mesh dim must have size >= 1.");
  static_assert(sizeof...(N) == 0 || sizeof...(N) == sizeof...(S),
                "spmd::mesh: name every mesh dim or none of them.");
  static_assert(detail::distinct_names<N...>(), "spmd::mesh: two mesh dims have the same name.");
  static_assert(sizeof...(R) == 0 || sizeof...(R) == size,
                "spmd::mesh: the rank list's length differs from the mesh size (the product of "
                "its dims).");
  static_assert(detail::rank_checks<rank_list<R...>>::non_negative,
                "spmd::mesh: a rank in the rank list is negative.");
  static_assert(detail::rank_checks<rank_list<R...>>::distinct(),
                "spmd::mesh: the rank list repeats a rank.");

  /// The same mesh with axis names: `mesh<2, 4>::named<"dp", "tp">`.
  template <fixed_string... Names>
  using named = basic_mesh<shape_list<S...>, name_list<axis_of<Names>...>, rank_list<R...>>;
  /// The same, with names spelled as axis types (the spelling nvcc accepts).
  template <class... Axes>
  using named_axes = basic_mesh<shape_list<S...>, name_list<Axes...>, rank_list<R...>>;
  /// The same mesh over an explicit list of ranks (row-major over the mesh).
  template <index_t... Ranks>
  using with_ranks = basic_mesh<shape_list<S...>, name_list<N...>, rank_list<Ranks...>>;

  SPMD_HD static constexpr dims<ndim> shape() { return {S...}; }
  SPMD_HD static constexpr mesh_shape_vec shape_vec() { return {{S...}, ndim}; }
  SPMD_HD static constexpr index_t extent(int m) { return shape()[m]; }
  static constexpr bool has_names = sizeof...(N) > 0;
  static constexpr std::string_view name(int m) {
    if constexpr (has_names) {
      constexpr std::string_view v[]{N::view()...};
      return v[m];
    } else {
      return {};
    }
  }

  /// Rank at row-major mesh index i.
  SPMD_HD static constexpr index_t rank_at(index_t i) {
    if constexpr (sizeof...(R) == 0) {
      return i;
    } else {
      const index_t r[]{R...};
      return r[i];
    }
  }
  /// Row-major mesh index of `rank`, or -1 when the rank is not in the mesh.
  SPMD_HD static constexpr index_t index_of(index_t rank) {
    if constexpr (sizeof...(R) == 0) {
      return rank >= 0 && rank < size ? rank : -1;
    } else {
      const index_t r[]{R...};
      for (index_t i = 0; i < size; ++i)
        if (r[i] == rank) return i;
      return -1;
    }
  }
  SPMD_HD static constexpr bool contains(index_t rank) { return index_of(rank) >= 0; }

  /// Coordinate of `rank`; invalid (no coordinate) for a rank outside the mesh.
  SPMD_HD static constexpr maybe_coord<ndim> coord_of(index_t rank) {
    const index_t i = index_of(rank);
    if (i < 0) return {};
    return {to_sarray<ndim>(unravel(shape_vec(), i)), true};
  }
  /// Rank at a coordinate. @pre 0 <= coord[m] < extent(m)
  SPMD_HD static constexpr index_t rank_of(const dims<ndim>& coord) {
    coord_vec c{};
    for (int m = 0; m < ndim; ++m) c.push_back(coord[m]);
    return rank_at(ravel(shape_vec(), c));
  }

  /// Index of the mesh dim called `Name` (a string literal or an axis type).
  template <fixed_string Name>
  SPMD_HD static constexpr int dim() {
    return dim<axis_of<Name>>();
  }
  template <class Axis>
  SPMD_HD static constexpr int dim() {
    static_assert(has_names, "spmd::mesh: this mesh has no axis names; name it with ::named<...>.");
    constexpr int found = [] {
      int i = 0, at = -1;
      ((std::is_same_v<N, Axis> ? (at = i, ++i) : ++i), ...);
      return at;
    }();
    static_assert(found >= 0, "spmd::mesh: no mesh dim has this name.");
    return found;
  }

  /// Mask of the mesh dims called `Names`, which must be given in mesh order.
  template <fixed_string... Names>
  static constexpr dim_mask mask() {
    return mask_of_axes<axis_of<Names>...>();
  }
  template <class... Axes>
  static constexpr dim_mask mask_of_axes() {
    static_assert(sizeof...(Axes) > 0, "spmd::mesh: a sub-mesh needs at least one mesh dim.");
    constexpr int d[]{dim<Axes>()..., 0};
    constexpr bool in_order = [&] {
      for (std::size_t i = 1; i < sizeof...(Axes); ++i)
        if (d[i] <= d[i - 1]) return false;
      return true;
    }();
    static_assert(in_order, "spmd::mesh: name sub-mesh dims in mesh order, each once.");
    dim_mask m = 0;
    for (std::size_t i = 0; i < sizeof...(Axes); ++i) m |= 1u << d[i];
    return m;
  }

  /// The groups of the mesh dims in `mask` (several dims = flattened into one group).
  SPMD_HD static constexpr index_t group_size(dim_mask mask) {
    return spmd::group_size(shape_vec(), mask);
  }
  SPMD_HD static constexpr index_t group_count(dim_mask mask) {
    return spmd::group_count(shape_vec(), mask);
  }
  /// Rank of member j of group g.
  SPMD_HD static constexpr index_t group_rank(dim_mask mask, index_t g, index_t j) {
    return rank_at(group_member(shape_vec(), mask, g, j));
  }
  /// Group and position of `rank` (@pre contains(rank)).
  SPMD_HD static constexpr group_position group_of_rank(dim_mask mask, index_t rank) {
    return group_of(shape_vec(), mask, index_of(rank));
  }

  /// The sub-mesh over the named dims: one mesh per group; `::containing<Rank>` is
  /// the plain mesh type of the group that holds Rank.
  template <fixed_string... Names>
  using sub = submesh<basic_mesh, mask<Names...>()>;
  /// The same by dim indices (in mesh order).
  template <int... Dims>
  static constexpr dim_mask sub_dims_mask() {
    static_assert(sizeof...(Dims) > 0, "spmd::mesh: a sub-mesh needs at least one mesh dim.");
    static_assert(((Dims >= 0 && Dims < ndim) && ...), "spmd::mesh: a sub-mesh dim is outside the mesh.");
    constexpr int d[]{Dims..., 0};
    constexpr bool in_order = [&] {
      for (std::size_t i = 1; i < sizeof...(Dims); ++i)
        if (d[i] <= d[i - 1]) return false;
      return true;
    }();
    static_assert(in_order, "spmd::mesh: name sub-mesh dims in mesh order, each once.");
    return ((1u << Dims) | ... | 0u);
  }
  template <int... Dims>
  using sub_dims = submesh<basic_mesh, sub_dims_mask<Dims...>()>;
};

/// The plain spelling: `spmd::mesh<2, 4>`.
template <index_t... S>
using mesh = basic_mesh<shape_list<S...>>;

template <class T>
inline constexpr bool is_mesh_v = false;
template <class S, class N, class R>
inline constexpr bool is_mesh_v<basic_mesh<S, N, R>> = true;

template <class Parent, dim_mask Mask>
struct submesh {
  using parent = Parent;
  static constexpr dim_mask mask = Mask;
  static constexpr index_t group_size = Parent::group_size(Mask);
  static constexpr index_t group_count = Parent::group_count(Mask);
  static constexpr int ndim = [] {
    int n = 0;
    for (int m = 0; m < Parent::ndim; ++m) n += in_mask(Mask, m);
    return n;
  }();
  static_assert(ndim >= 1, "spmd::mesh: a sub-mesh needs at least one mesh dim.");
  static_assert(Mask >> Parent::ndim == 0, "spmd::mesh: a sub-mesh dim is outside the mesh.");

 // Implementation (public only because clang 14 checks access of alias templates
  // at the point of use).
  static constexpr sarray<int, ndim> dims_ = [] {
    sarray<int, ndim> d{};
    int k = 0;
    for (int m = 0; m < Parent::ndim; ++m)
      if (in_mask(Mask, m)) d[k++] = m;
    return d;
  }();
  template <index_t G, std::size_t... J>
  static auto members(std::index_sequence<J...>) -> rank_list<Parent::group_rank(Mask, G, J)...>;
  template <index_t G, std::size_t... D>
  static auto group_type(std::index_sequence<D...>) {
    using ranks = decltype(members<G>(std::make_index_sequence<group_size>{}));
    if constexpr (Parent::has_names) {
      return basic_mesh<shape_list<Parent::extent(dims_[D])...>,
                        name_list<name_of<dims_[D]>...>, ranks>{};
    } else {
      return basic_mesh<shape_list<Parent::extent(dims_[D])...>, name_list<>, ranks>{};
    }
  }
  template <int M, class S, class... Ns, class R>
  static auto name_at(basic_mesh<S, name_list<Ns...>, R>)
      -> std::tuple_element_t<M, std::tuple<Ns...>>;
  template <int M>
  using name_of = decltype(name_at<M>(Parent{}));

  /// The mesh type of group G (groups numbered row-major over the other dims).
  template <index_t G>
  using group = decltype(group_type<G>(std::make_index_sequence<ndim>{}));

  /// Index of the group that holds Rank.
  template <index_t Rank>
  static constexpr index_t group_index() {
    static_assert(Parent::contains(Rank), "spmd::mesh: this rank is not in the mesh.");
    return Parent::group_of_rank(Mask, Rank).group;
  }

  /// The mesh type of the group that holds Rank (DTensor's `mesh["tp"]` on that rank).
  template <index_t Rank>
  using containing = group<group_index<Rank>()>;
};

}  // namespace spmd
