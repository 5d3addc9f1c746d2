// spmd/runtime/ops/cat.hpp — cat of 2 to 4 dtensors along one dim.
//
//   auto c = spmd::sim::cat<1>(a, b);             // a (4, 3), b (4, 5) -> (4, 8)
//   auto d = spmd::sim::cat<Forced, 0>(a, b, c);  // Forced = spmd::placements<...>
//
// The inputs share the mesh, the rank and every extent but the cat dim's (a static mismatch
// does not compile; a dynamic one throws). The cat dim is never sharded (ops/cat.hpp), so a
// rank's output block is its input blocks placed one after another along that dim.
#pragma once

#include <type_traits>

#include "spmd/ops/cat.hpp"
#include "spmd/runtime/ops/apply.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace spmd::runtime {

template <int Dim>
struct op_kernel<ops::cat<Dim>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T, class... In>
  static void run(const ops::cat<Dim>&, strided_view<T> out, const op_rank_info&, In... in) {
    index_t offset = 0;
    auto place = [&](auto part) {
      // An empty part places nothing; its output may have no storage (a null data pointer,
      // to which even a zero offset must not be added).
      if (part.empty()) return;
      shape_vec e = out.extents();
      e[Dim] = part.extent(Dim);
      detail::strided_copy(strided_view<T>(out.data() + offset * out.stride(Dim), e, out.strides()), part);
      offset += part.extent(Dim);
    };
    (place(in), ...);
  }
};

namespace detail {

/// True when the static extents of L0 and L agree on every dim but Dim (dyn matches all).
template <int Dim, class L0, class L>
constexpr bool cat_compatible() {
  if constexpr (L0::rank != L::rank) {
    return false;
  } else {
    for (std::size_t d = 0; d < L0::rank; ++d) {
      const index_t a = L0::extents_type::static_extent(d), b = L::extents_type::static_extent(d);
      if (static_cast<int>(d) != Dim && a != dyn && b != dyn && a != b) return false;
    }
    return true;
  }
}

template <class Forced, int Dim, element T, class L0, class... L, class Bk>
auto cat_impl(const dtensor<T, L0, Bk>& x0, const dtensor<T, L, Bk>&... x) {
  static_assert(sizeof...(L) >= 1 && sizeof...(L) <= 3, "spmd::cat: cat takes 2 to 4 tensors.");
  constexpr int R = static_cast<int>(L0::rank), d = dim_index(Dim, R);
  static_assert(d >= 0 && d < R, "spmd::cat: the cat dim is out of range for the tensors' rank.");
  static_assert(((L::rank == L0::rank) && ...), "spmd::cat: the tensors have different ranks.");
  constexpr bool same_extents = (cat_compatible<d, L0, L>() && ...);
  static_assert(same_extents,
                "spmd::cat: the tensors' extents differ on a dim other than the cat dim.");
  if constexpr (d >= 0 && d < R && same_extents) {
    check_run_time_shapes<ops::cat<d>>(x0, x...);
    return apply<Forced>(ops::cat<d>{}, x0, x...);
  }
}

}  // namespace detail

/// x0, x... joined along Dim (negative: counted from the end).
template <int Dim, element T, class L0, class... L, class Bk>
auto cat(const dtensor<T, L0, Bk>& x0, const dtensor<T, L, Bk>&... x) {
  return detail::cat_impl<void, Dim>(x0, x...);
}
template <class Forced, int Dim, element T, class L0, class... L, class Bk>
auto cat(const dtensor<T, L0, Bk>& x0, const dtensor<T, L, Bk>&... x) {
  return detail::cat_impl<Forced, Dim>(x0, x...);
}

}  // namespace spmd::runtime
