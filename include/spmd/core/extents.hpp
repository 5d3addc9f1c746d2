// spmd/core/extents.hpp — a tensor's global extents, each static or dynamic.
//
// Like mdspan's extents: `extents<10, dyn>` stores only the dynamic values, so a fully
// static extents object is empty and every query about it is a constant expression.
#pragma once

#include <cstddef>
#include <utility>

#include "spmd/core/config.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd {

/// Marks an extent known only at run time.
inline constexpr index_t dyn = -1;

namespace detail {
struct no_dynamic_extents {};
}  // namespace detail

template <index_t... E>
class extents {
  static_assert(sizeof...(E) <= max_tensor_dims,
                "spmd::extents: a tensor may have at most spmd::max_tensor_dims (8) dims.");
  static_assert(((E >= 0 || E == dyn) && ...),
                "spmd::extents: a static extent must be >= 0 (use spmd::dyn for a run-time extent).");

  static constexpr std::size_t n_dyn = ((E == dyn ? 1u : 0u) + ... + 0u);
  using storage = std::conditional_t<n_dyn == 0, detail::no_dynamic_extents, sarray<index_t, n_dyn>>;
  [[no_unique_address]] storage dyn_{};

  // Position of dim i among the dynamic dims.
  SPMD_HD static constexpr std::size_t dyn_index(std::size_t i) {
    constexpr index_t all[]{E..., 0};
    std::size_t k = 0;
    for (std::size_t j = 0; j < i; ++j) k += all[j] == dyn;
    return k;
  }

 public:
  SPMD_HD static constexpr std::size_t rank() { return sizeof...(E); }
  SPMD_HD static constexpr std::size_t rank_dynamic() { return n_dyn; }
  SPMD_HD static constexpr bool is_static() { return n_dyn == 0; }
  SPMD_HD static constexpr index_t static_extent(std::size_t i) {
    constexpr index_t all[]{E..., 0};
    return all[i];
  }

  constexpr extents() = default;

  /// One value per dynamic extent, in order.
  template <class... I>
    requires(sizeof...(I) == n_dyn && n_dyn > 0)
  SPMD_HD constexpr explicit extents(I... dynamic) : dyn_{static_cast<index_t>(dynamic)...} {}

  /// From all rank() values; the static ones are taken from the type.
  SPMD_HD static constexpr extents from_values(const dims<sizeof...(E)>& all) {
    extents e{};
    if constexpr (n_dyn > 0)
      for (std::size_t i = 0; i < rank(); ++i)
        if (static_extent(i) == dyn) e.dyn_[dyn_index(i)] = all[i];
    return e;
  }

  SPMD_HD constexpr index_t extent(std::size_t i) const {
    if constexpr (n_dyn == 0) {
      return static_extent(i);
    } else {
      return static_extent(i) == dyn ? dyn_[dyn_index(i)] : static_extent(i);
    }
  }

  SPMD_HD constexpr dims<sizeof...(E)> values() const {
    dims<sizeof...(E)> out{};
    for (std::size_t i = 0; i < rank(); ++i) out[i] = extent(i);
    return out;
  }

  SPMD_HD constexpr shape_vec to_vec() const {
    shape_vec out{};
    for (std::size_t i = 0; i < rank(); ++i) out.push_back(extent(i));
    return out;
  }

  SPMD_HD friend constexpr bool operator==(const extents& a, const extents& b) {
    return a.values() == b.values();
  }
};

namespace detail {
template <std::size_t R, class Seq = std::make_index_sequence<R>>
struct dextents_impl;
template <std::size_t R, std::size_t... I>
struct dextents_impl<R, std::index_sequence<I...>> {
  using type = extents<((void)I, dyn)...>;
};
}  // namespace detail

/// All R extents dynamic.
template <std::size_t R>
using dextents = typename detail::dextents_impl<R>::type;

namespace detail {
template <auto Static, std::size_t... I>
SPMD_HD constexpr auto extents_from(const decltype(Static)& values, std::index_sequence<I...>) {
  return extents<Static[I]...>::from_values(values);
}
}  // namespace detail

/// The extents type whose static values are `Static` (dyn = dynamic), with the
/// dynamic ones taken from `values`.
template <auto Static>
SPMD_HD constexpr auto extents_from(const decltype(Static)& values) {
  return detail::extents_from<Static>(values, std::make_index_sequence<Static.size()>{});
}

template <class T>
inline constexpr bool is_extents_v = false;
template <index_t... E>
inline constexpr bool is_extents_v<extents<E...>> = true;

}  // namespace spmd
