// spmd/core/mesh.hpp — a device mesh: shape, axis names, rank list, each size static or
// given at run time (spmd::dyn).
//
//   using M = spmd::mesh<2, 4>::named<"dp", "tp">;       // ranks 0..7
//   using Q = spmd::mesh<4>::with_ranks<0, 2, 4, 6>;     // a mesh over some ranks
//   static_assert(M::coord_of(5).value == spmd::dims<2>{1, 1});
//   using TP = M::sub<"tp">::containing<5>;               // mesh<4> over ranks 4..7
//
//   using D = spmd::mesh<spmd::dyn, 4>::named<"dp", "tp">;
//   spmd::bind_mesh<D>(world_size);                       // dp = world_size / 4, checked
//
// A dynamic size is a value of the process, bound once before the mesh's tensors are made
// (bind_mesh: from the launcher's world size or an explicit shape, both checked). Until then
// the mesh answers no question about its sizes (std::logic_error naming it). The compiler
// sees a dynamic dim as a dim of size `nominal_dyn_size` (larger than 1): what it decides
// from sizes — an operator's placements — it decides as for such a mesh (docs/design.md,
// "Static and dynamic mesh sizes").
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spmd/core/config.hpp"
#include "spmd/core/extents.hpp"
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

/// The size the compiler gives a dynamic mesh dim where it needs one (an operator's
/// placements, the layout checks): any size larger than 1 decides the same.
inline constexpr index_t nominal_dyn_size = 2;
/// The most ranks a dynamic mesh may be bound to.
inline constexpr index_t max_mesh_ranks = index_t{1} << 31;

namespace detail {

/// The run-time sizes of mesh type M (only meshes with a dynamic dim have them): the shape
/// bind_mesh gave, its product, and how many times it was given (caches key on the shape).
template <class M>
struct bound_mesh {
  static inline mesh_shape_vec shape{};  // empty: not bound yet
  static inline index_t size = 0;
  static inline std::uint64_t generation = 0;
};

/// "2x4", with "?" for a dynamic size.
template <index_t... S>
std::string mesh_text() {
  std::string t;
  ((t += (t.empty() ? "" : "x") + (S == dyn ? std::string("?") : std::to_string(S))), ...);
  return t;
}

[[noreturn, gnu::cold]] inline void throw_unbound(const std::string& what) {
  throw std::logic_error("spmd::mesh<" + what + ">: its dynamic sizes are not bound yet; call "
                         "spmd::bind_mesh<M>(world_size) or spmd::bind_mesh<M>(spmd::dims<N>{...}) "
                         "before making its tensors");
}

/// The number of ranks: a constant for a static mesh, the bound size (read at run time,
/// not a constant expression) for a mesh with a dynamic dim.
template <class Self, bool Static, index_t N>
struct mesh_count {
  static constexpr index_t size = N;
};
template <class Self, index_t N>
struct mesh_count<Self, false, N> {
  static constexpr const index_t& size = bound_mesh<Self>::size;
};

}  // namespace detail

template <class Parent, dim_mask Mask>
struct submesh;

template <index_t... S, class... N, index_t... R>
struct basic_mesh<shape_list<S...>, name_list<N...>, rank_list<R...>>
    : detail::mesh_count<basic_mesh<shape_list<S...>, name_list<N...>, rank_list<R...>>, ((S != dyn) && ...),
                         ((S == dyn ? nominal_dyn_size : S) * ... * 1)> {
  static constexpr int ndim = sizeof...(S);
  /// True when every size is known to the compiler.
  static constexpr bool is_static = ((S != dyn) && ...);

  static_assert(ndim >= 1 && ndim <= max_mesh_dims, "spmd::mesh: a mesh needs 1 to 8 dims.");
  static_assert(((S >= 1 || S == dyn) && ...),
                "spmd::mesh: every mesh dim must have size >= 1 (or be spmd::dyn, given at run time).");
  static_assert(is_static || sizeof...(R) == 0,
                "spmd::mesh: a mesh with a dynamic size cannot list its ranks (with_ranks): the "
                "list's length would be known at compile time only.");
  static_assert(sizeof...(N) == 0 || sizeof...(N) == sizeof...(S),
                "spmd::mesh: name every mesh dim or none of them.");
  static_assert(detail::distinct_names<N...>(), "spmd::mesh: two mesh dims have the same name.");
  static_assert(sizeof...(R) == 0 || sizeof...(R) == (S * ... * 1),
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

  /// The sizes (a dynamic mesh's as bound: std::logic_error before bind_mesh).
  SPMD_HD static constexpr mesh_shape_vec shape_vec() {
    if constexpr (is_static) {
      return {{S...}, ndim};
    } else {
      const mesh_shape_vec& b = detail::bound_mesh<basic_mesh>::shape;
      if (b.size() == 0) detail::throw_unbound(detail::mesh_text<S...>());
      return b;
    }
  }
  /// The sizes the compiler decides with: the static ones, nominal_dyn_size for a dynamic one.
  SPMD_HD static constexpr mesh_shape_vec nominal_shape_vec() {
    return {{(S == dyn ? nominal_dyn_size : S)...}, ndim};
  }
  /// The sizes as written: spmd::dyn for a dynamic one.
  SPMD_HD static constexpr dims<ndim> static_shape() { return {S...}; }
  SPMD_HD static constexpr dims<ndim> shape() { return to_sarray<ndim>(shape_vec()); }
  SPMD_HD static constexpr index_t extent(int m) { return shape_vec()[m]; }
  /// True once a dynamic mesh's sizes are bound (always for a static mesh).
  static bool bound() { return is_static || detail::bound_mesh<basic_mesh>::shape.size() > 0; }
  /// Changes each time bind_mesh gives this mesh sizes (0 for a static mesh): caches of
  /// what depends on the sizes key on it.
  static std::uint64_t generation() { return is_static ? 0 : detail::bound_mesh<basic_mesh>::generation; }
  /// "2x4", "?x4" (a dynamic size as ?).
  static std::string text() { return detail::mesh_text<S...>(); }
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
      return rank >= 0 && rank < basic_mesh::size ? rank : -1;
    } else {
      const index_t r[]{R...};
      for (index_t i = 0; i < basic_mesh::size; ++i)
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
  static_assert(Parent::is_static,
                "spmd::mesh: the sub-mesh types of a mesh with a dynamic size are not known at compile "
                "time; use the parent's group_rank / group_of_rank at run time.");
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

/// Gives the dynamic sizes of M: `sizes` in full (the static ones as written). Throws
/// std::invalid_argument naming the dim for a size below 1 or a static size given otherwise.
/// Binding again (another shape) is allowed once the tensors of the old shape are gone: a
/// tensor keeps no copy of its mesh's sizes.
template <class M>
void bind_mesh(const dims<M::ndim>& sizes) {
  static_assert(is_mesh_v<M>, "spmd::bind_mesh: the argument must be a spmd::mesh.");
  static_assert(!M::is_static, "spmd::bind_mesh: this mesh has no dynamic size (spmd::dyn) to bind.");
  const dims<M::ndim> st = M::static_shape();
  std::string given;
  for (int m = 0; m < M::ndim; ++m) given += (m ? "x" : "") + std::to_string(sizes[m]);
  for (int m = 0; m < M::ndim; ++m) {
    if (sizes[m] < 1)
      throw std::invalid_argument("spmd::bind_mesh: mesh<" + M::text() + "> given " + given + ": dim " +
                                  std::to_string(m) + " has size " + std::to_string(sizes[m]) + ", not >= 1");
    if (st[m] != dyn && sizes[m] != st[m])
      throw std::invalid_argument("spmd::bind_mesh: mesh<" + M::text() + "> given " + given + ": dim " +
                                  std::to_string(m) + " is " + std::to_string(st[m]) + " in its type");
  }
  mesh_shape_vec v{};
  index_t n = 1;
  for (int m = 0; m < M::ndim; ++m) {
    if (n > max_mesh_ranks / sizes[m])
      throw std::invalid_argument("spmd::bind_mesh: mesh<" + M::text() + "> given " + given +
                                  ": more than 2^31 ranks");
    v.push_back(sizes[m]);
    n *= sizes[m];
  }
  using B = detail::bound_mesh<M>;
  B::shape = v;
  B::size = n;
  ++B::generation;
}

/// The same, checked against the launcher's world size: the sizes' product must be `world`.
template <class M>
void bind_mesh(const dims<M::ndim>& sizes, index_t world) {
  bind_mesh<M>(sizes);  // each size checked first (so the product cannot overflow)
  index_t n = 1;
  std::string given;
  for (int m = 0; m < M::ndim; ++m) {
    n *= sizes[m];
    given += (m ? "x" : "") + std::to_string(sizes[m]);
  }
  if (n != world) {
    detail::bound_mesh<M>::shape = mesh_shape_vec{};  // not bound: nothing is made on a wrong mesh
    detail::bound_mesh<M>::size = 0;
    ++detail::bound_mesh<M>::generation;
    throw std::invalid_argument("spmd::bind_mesh: the shape " + given + " holds " + std::to_string(n) +
                                " ranks, the world has " + std::to_string(world));
  }
}

/// M's one dynamic size from the world size: world divided by the static sizes' product,
/// which must divide it. A mesh with several dynamic sizes needs its shape (above).
template <class M>
void bind_mesh(index_t world) {
  static_assert(is_mesh_v<M>, "spmd::bind_mesh: the argument must be a spmd::mesh.");
  constexpr dims<M::ndim> st = M::static_shape();
  constexpr int n_dyn = [] {
    int n = 0;
    for (int m = 0; m < M::ndim; ++m) n += M::static_shape()[m] == dyn;
    return n;
  }();
  static_assert(n_dyn == 1,
                "spmd::bind_mesh: from a world size alone only a mesh with one dynamic size can be "
                "bound; give its shape: bind_mesh<M>(spmd::dims<N>{...}, world)");
  index_t rest = 1;
  int at = 0;
  for (int m = 0; m < M::ndim; ++m) {
    if (st[m] == dyn) at = m;
    else rest *= st[m];
  }
  if (world < 1 || world % rest != 0)
    throw std::invalid_argument("spmd::bind_mesh: a world of " + std::to_string(world) + " ranks does not fill mesh<" +
                                M::text() + ">: its static sizes hold " + std::to_string(rest) +
                                " ranks, which must divide the world size");
  dims<M::ndim> sizes = st;
  sizes[at] = world / rest;
  bind_mesh<M>(sizes);
}

}  // namespace spmd
