// spmd/core/layout.hpp — a sharded layout: mesh + placements + global extents.
//
//   using M = spmd::mesh<2, 4>;
//   using L = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::shard<0>>,
//                          spmd::extents<10, 5>>;
//   static_assert(L{}.local_shape(3) == spmd::dims<2>{2, 5});
//
// A layout is a map (rank, local index) -> global index. Mesh and placements are
// types; the extents may be static or dynamic, and a fully static layout is an
// empty object whose every answer is a constant expression.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>

#include "spmd/core/config.hpp"
#include "spmd/core/element_count.hpp"
#include "spmd/core/extents.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh.hpp"
#include "spmd/core/placement.hpp"

namespace spmd {

/// Shape and global offset of one rank's block, for a tensor of rank R.
template <std::size_t R>
struct block {
  dims<R> shape{};
  dims<R> offset{};
  SPMD_HD friend constexpr bool operator==(const block& a, const block& b) {
    return a.shape == b.shape && a.offset == b.offset;
  }
};

namespace detail {

/// Whether run-time extents are a tensor's: none negative (spmd::dyn marks a run-time extent
/// in a type; it is not a size), at most max_elements in all.
SPMD_HD constexpr bool extents_ok(const shape_vec& e) {
  for (const index_t x : e)
    if (x < 0) return false;
  return elements_within(e, max_elements) >= 0;
}

/// The std::invalid_argument a layout throws for extents that extents_ok refuses, naming them.
[[noreturn, gnu::cold, gnu::noinline]] inline void throw_bad_extents(const shape_vec& e) {
  std::string text;
  for (const index_t x : e) text += (text.empty() ? "" : ", ") + std::to_string(x);
  for (int d = 0; d < e.size(); ++d)
    if (e[d] < 0)
      throw std::invalid_argument("spmd::layout: extents (" + text + "): extent " + std::to_string(e[d]) +
                                  " at dim " + std::to_string(d) + " is negative");
  throw std::invalid_argument("spmd::layout: extents (" + text + ") hold more than 2^62 elements");
}

// The compile-time checks are static_asserts on the result of the same make_spec()
// the CLI calls at run time, so both report the same problems.
template <class Mesh, class Placements, std::size_t Rank>
struct checked_spec {
  static constexpr spec_result result =
      make_spec(Mesh::nominal_shape_vec(), Placements::value(), static_cast<int>(Rank));
  static constexpr layout_error error = result.error;

  static_assert(error != layout_error::placement_count_mismatch,
                "spmd::layout: the number of placements differs from the number of mesh dims; "
                "give one placement per mesh dim.");
  static_assert(error != layout_error::shard_dim_out_of_range,
                "spmd::layout: a shard dim is outside the tensor's dims (shard<D> needs "
                "-rank <= D < rank).");
  static_assert(error != layout_error::mixed_partial_ops,
                "spmd::layout: two different partial ops in one layout; a layout may hold "
                "one reduction op only.");
  static_assert(error != layout_error::inconsistent_shard_order,
                "spmd::layout: inconsistent shard order; the positions given to the shards of "
                "one tensor dim must be 0..k-1, each once, on all of them or on none.");
  static_assert(error == layout_error::none || error == layout_error::placement_count_mismatch ||
                    error == layout_error::shard_dim_out_of_range ||
                    error == layout_error::mixed_partial_ops ||
                    error == layout_error::inconsistent_shard_order,
                "spmd::layout: invalid layout.");
};
}  // namespace detail

template <class Mesh, class Placements, class Extents>
class layout {
  static_assert(is_mesh_v<Mesh>, "spmd::layout: the first argument must be a spmd::mesh.");
  static_assert(is_extents_v<Extents>,
                "spmd::layout: the third argument must be spmd::extents<...>.");
  using check = detail::checked_spec<Mesh, Placements, Extents::rank()>;
  // Instantiate the checks with the class, so an invalid layout fails as soon as it is
  // named in a declaration, not only when a member is called.
  static_assert(sizeof(check) > 0);

  [[no_unique_address]] Extents ext_{};

 public:
  using mesh_type = Mesh;
  using placements_type = Placements;
  using extents_type = Extents;
  static constexpr std::size_t rank = Extents::rank();

  constexpr layout() = default;
  /// @throws std::invalid_argument when a run-time extent is negative or the extents hold
  /// more than 2^62 elements (checked on the host; no element count can overflow after).
  SPMD_HD constexpr explicit layout(Extents e) : ext_(e) {
#if !defined(__CUDA_ARCH__)
    if constexpr (!Extents::is_static())
      if (!detail::extents_ok(e.to_vec())) detail::throw_bad_extents(e.to_vec());
#endif
  }

  /// The validated value form: normalised placements with explicit shard order, over the
  /// mesh's sizes (a dynamic mesh's as bound: read at run time, not a constant expression).
  SPMD_HD static constexpr layout_spec spec() {
    constexpr layout_spec s = check::result.spec;
    if constexpr (Mesh::is_static) {
      return s;
    } else {
      layout_spec b = s;
      b.mesh = Mesh::shape_vec();
      return b;
    }
  }
  /// The same over the sizes the compiler decides with (Mesh::nominal_shape_vec(): a dynamic
  /// size as nominal_dyn_size): always a constant expression. What depends on the
  /// placements only (which reductions a Partial holds, whether two layouts differ) reads it.
  SPMD_HD static constexpr layout_spec nominal_spec() { return check::result.spec; }

  SPMD_HD constexpr Extents extents() const { return ext_; }
  SPMD_HD constexpr dims<rank> global_shape() const { return ext_.values(); }

  /// Block of the rank at a mesh coordinate. @pre 0 <= coord[m] < Mesh::extent(m)
  SPMD_HD constexpr block<rank> block_at(const dims<Mesh::ndim>& coord) const {
    coord_vec c{};
    for (int m = 0; m < Mesh::ndim; ++m) c.push_back(coord[m]);
    const local_box b = box_at(spec(), ext_.to_vec(), c);
    return {to_sarray<rank>(b.shape), to_sarray<rank>(b.offset)};
  }

  /// Block of a rank; a rank outside the mesh holds an empty block (zero extents,
  /// offset = the global extents, the out-of-bounds value zero-size shards report).
  SPMD_HD constexpr block<rank> block_of(index_t mesh_rank) const {
    const auto c = Mesh::coord_of(mesh_rank);
    if (!c) return {dims<rank>{}, global_shape()};
    return block_at(*c);
  }
  SPMD_HD constexpr dims<rank> local_shape(index_t mesh_rank) const {
    return block_of(mesh_rank).shape;
  }
  SPMD_HD constexpr dims<rank> global_offset(index_t mesh_rank) const {
    return block_of(mesh_rank).offset;
  }
  SPMD_HD constexpr index_t local_size(index_t mesh_rank) const {
    index_t n = 1;
    for (index_t e : local_shape(mesh_rank)) n *= e;
    return n;
  }

  /// True when tensor dim d has the same local extent on every rank.
  SPMD_HD constexpr bool uniform(std::size_t d) const {
    return uniform_extent(spec(), ext_.extent(d), static_cast<int>(d));
  }

  /// Local extents of `Rank` as a spmd::extents type: a dim is static when its global
  /// extent is static (the rank is a template argument, so the chunk arithmetic runs
  /// in the compiler), dynamic otherwise.
  template <index_t Rank>
  SPMD_HD constexpr auto local_extents() const {
    static_assert(Mesh::contains(Rank), "spmd::layout: this rank is not in the mesh.");
    constexpr dims<rank> st = static_local(*Mesh::coord_of(Rank));
    return extents_from<st>(local_shape(Rank));
  }

  /// Local extents shared by every rank: a dim is static when its global extent is
  /// static and splits evenly at every level of its shard order (so no rank differs).
  SPMD_HD constexpr auto uniform_local_extents() const {
    constexpr dims<rank> st = [] {
      dims<rank> s = static_local(dims<Mesh::ndim>{});
      for (std::size_t d = 0; d < rank; ++d)
        if (s[d] != dyn && !uniform_extent(spec(), Extents::static_extent(d), static_cast<int>(d)))
          s[d] = dyn;
      return s;
    }();
    return extents_from<st>(local_shape(Mesh::rank_at(0)));
  }

 private:
  // Local extents at `coord` of the static global extents; dyn where the global extent
  // is dynamic (each tensor dim is split independently, so the others are exact).
  SPMD_HD static constexpr dims<rank> static_local(const dims<Mesh::ndim>& coord) {
    shape_vec global{};
    for (std::size_t d = 0; d < rank; ++d) {
      const index_t e = Extents::static_extent(d);
      global.push_back(e == dyn ? 0 : e);
    }
    coord_vec c{};
    for (int m = 0; m < Mesh::ndim; ++m) c.push_back(coord[m]);
    const local_box b = box_at(spec(), global, c);
    dims<rank> out{};
    for (std::size_t d = 0; d < rank; ++d)
      out[d] = Extents::static_extent(d) == dyn ? dyn : b.shape[static_cast<int>(d)];
    return out;
  }
};

}  // namespace spmd
