// spmd/runtime/ops/view.hpp — view operators on dtensors: transpose, permute, reshape (= view),
// flatten, squeeze, unsqueeze. Each result is a new dtensor (the simulation copies).
//
//   auto t = spmd::sim::transpose<0, 1>(x);        // x (8, 3) S(0) -> (3, 8) S(1)
//   auto f = spmd::sim::flatten<0, 1>(y);          // y (8, 3) S(0) on mesh<4> -> (24) S(0)
//   auto r = spmd::sim::reshape<2, 2, 6>(z);       // z (4, 6) S(0) on mesh<2> -> S(0)
//   auto u = spmd::sim::unsqueeze<0>(x);           // (8, 3) S(0) -> (1, 8, 3) S(1)
//   auto q = spmd::sim::transpose<Forced, 0, 1>(x);   // Forced = spmd::placements<...>
//
// Dims may be negative (counted from the end, as in torch). The compiler chooses the
// placements (spmd/ops/view.hpp); a flatten or split whose leftmost dim would be cut unevenly
// is redistributed first, never relabelled into wrong numbers. The forced form takes the
// output placements as its first template argument, as every op in spmd::sim does.
//
// Locally every view is a copy: with the chosen placements a rank's output block holds the
// same elements as its input block, in row-major order for the reshapes (each group's local
// block is a contiguous run of the group's flat index, see ops/view.hpp) and at permuted
// strides for transpose and permute.
#pragma once

#include <algorithm>
#include <array>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/ops/view.hpp"
#include "spmd/runtime/ops/apply.hpp"

namespace spmd::runtime {

namespace detail {

/// dst(i...) = src(i...) over equal extents, any strides on both sides.
template <class U, class T>
void strided_copy(strided_view<U> dst, strided_view<const T> src) {
  if (dst.extents() != src.extents())
    throw std::logic_error("spmd::sim: a view's local block has " + std::to_string(src.size()) +
                           " elements in shape " + ops::view_detail::shape_text(src.extents()) +
                           ", its output block " + ops::view_detail::shape_text(dst.extents()));
  if (src.empty()) return;
  if (dst.is_contiguous() && src.is_contiguous()) {
    std::copy(src.data(), src.data() + src.size(), dst.data());
    return;
  }
  if (src.rank() == 0) {
    *dst.data() = static_cast<U>(*src.data());
    return;
  }
  // Merge dims that both sides walk as one (dim d's stride = dim d+1's stride x extent), and
  // drop unit dims: a permute of (b, s, h, d) to (b, h, s, d) walks runs of d, and a copy
  // between a slice and a block runs of whole rows. Index arithmetic once per run.
  shape_vec e{}, ds{}, ss{};
  for (int d = 0; d < src.rank(); ++d) {
    if (src.extent(d) == 1) continue;
    if (e.size() > 0 && ds[e.size() - 1] == dst.stride(d) * src.extent(d) &&
        ss[e.size() - 1] == src.stride(d) * src.extent(d)) {
      e[e.size() - 1] *= src.extent(d);
      ds[e.size() - 1] = dst.stride(d);
      ss[e.size() - 1] = src.stride(d);
      continue;
    }
    e.push_back(src.extent(d));
    ds.push_back(dst.stride(d));
    ss.push_back(src.stride(d));
  }
  if (e.size() == 0) {  // one element
    *dst.data() = static_cast<U>(*src.data());
    return;
  }
  const int n = e.size();
  const index_t inner = e[n - 1], di = ds[n - 1], si = ss[n - 1];
  shape_vec idx{};
  for (int d = 0; d < n; ++d) idx.push_back(0);
  U* d = dst.data();
  const T* sp = src.data();
  while (true) {
    if (di == 1 && si == 1) {
      if constexpr (std::is_same_v<U, std::remove_const_t<T>>) std::copy(sp, sp + inner, d);
      else for (index_t k = 0; k < inner; ++k) d[k] = static_cast<U>(sp[k]);
    } else {
      for (index_t k = 0; k < inner; ++k) d[k * di] = static_cast<U>(sp[k * si]);
    }
    int m = n - 2;  // the odometer over the outer dims, the offsets stepped along
    for (; m >= 0; --m) {
      d += ds[m];
      sp += ss[m];
      if (++idx[m] < e[m]) break;
      d -= ds[m] * e[m];
      sp -= ss[m] * e[m];
      idx[m] = 0;
    }
    if (m < 0) return;
  }
}

/// Same elements in row-major order, new shape (the reshapes' local kernel).
template <class U, class T>
void reshape_copy(strided_view<U> out, strided_view<const T> in) {
  if (out.size() != in.size())
    throw std::logic_error("spmd::sim: a reshape's local block has " + std::to_string(in.size()) +
                           " elements, its output block " + std::to_string(out.size()));
  if (in.is_contiguous()) {
    strided_copy(out, strided_view<const T>(in.data(), out.extents()));
    return;
  }
  // Non-contiguous input: copy it to row-major first (locals are contiguous; a guard).
  std::vector<std::remove_const_t<T>> tmp(static_cast<std::size_t>(in.size()));
  strided_copy(strided_view<std::remove_const_t<T>>(tmp.data(), in.extents()), in);
  strided_copy(out, strided_view<const T>(tmp.data(), out.extents()));
}

/// `in` seen with its dims reordered: dim k of the result is dim perm[k] of `in`.
template <class T>
strided_view<const T> permuted(strided_view<const T> in, const shape_vec& perm) {
  shape_vec e{}, s{};
  for (index_t p : perm) {
    e.push_back(in.extent(static_cast<int>(p)));
    s.push_back(in.stride(static_cast<int>(p)));
  }
  return {in.data(), e, s};
}

/// Runs Op's shape checks on the run-time extents when some input has a dynamic one. apply
/// calls out_shape at run time only when the output's extents are dynamic; a reshape or a
/// squeeze of a dynamic input has a static output, and must still throw on a bad input.
template <class Op, class... T, class... L, class Bk>
void check_run_time_shapes(const dtensor<T, L, Bk>&... x) {
  if constexpr (!(L::extents_type::is_static() && ...)) {
    svec<shape_vec, ops::max_op_inputs> in{};
    (in.push_back(x.layout().extents().to_vec()), ...);
    (void)Op::out_shape(in);
  }
}

/// A dim index counted from the end when negative.
constexpr int dim_index(int d, int rank) { return d < 0 ? d + rank : d; }

}  // namespace detail

// ---- local kernels -------------------------------------------------------------------

template <int D0, int D1>
struct op_kernel<ops::transpose<D0, D1>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::transpose<D0, D1>&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> in) {
    shape_vec perm{};
    for (int d = 0; d < in.rank(); ++d) perm.push_back(d == D0 ? D1 : d == D1 ? D0 : d);
    detail::strided_copy(out, detail::permuted(in, perm));
  }
};

template <int... P>
struct op_kernel<ops::permute<P...>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::permute<P...>&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> in) {
    detail::strided_copy(out, detail::permuted(in, shape_vec{{P...}, static_cast<int>(sizeof...(P))}));
  }
};

template <int D>
struct op_kernel<ops::squeeze<D>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::squeeze<D>&, strided_view<T> out, const op_rank_info&, strided_view<const T> in) {
    detail::reshape_copy(out, in);
  }
};

template <int D>
struct op_kernel<ops::unsqueeze<D>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::unsqueeze<D>&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> in) {
    detail::reshape_copy(out, in);
  }
};

template <int S, int E>
struct op_kernel<ops::flatten<S, E>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::flatten<S, E>&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> in) {
    detail::reshape_copy(out, in);
  }
};

template <index_t... E>
struct op_kernel<ops::reshape<E...>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::reshape<E...>&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> in) {
    detail::reshape_copy(out, in);
  }
};

// ---- user functions ------------------------------------------------------------------
// Each has two forms: op<dims...>(x) and op<Forced, dims...>(x) with Forced a
// spmd::placements<...> for the output (a type cannot follow a pack of dims).

namespace detail {

template <class Forced, int D0, int D1, element T, class L, class Bk>
auto transpose_impl(const dtensor<T, L, Bk>& x) {
  constexpr int R = static_cast<int>(L::rank), a = dim_index(D0, R), b = dim_index(D1, R);
  static_assert(a >= 0 && a < R && b >= 0 && b < R,
                "spmd::transpose: a dim is out of range for the tensor's rank.");
  if constexpr (a >= 0 && a < R && b >= 0 && b < R) return apply<Forced>(ops::transpose<a, b>{}, x);
}

template <int R, int... P>
constexpr bool is_permutation() {
  const int p[]{P..., 0};
  if (static_cast<int>(sizeof...(P)) != R) return false;
  for (int i = 0; i < R; ++i) {
    const int v = p[i] < 0 ? p[i] + R : p[i];
    if (v < 0 || v >= R) return false;
    for (int j = 0; j < i; ++j)
      if ((p[j] < 0 ? p[j] + R : p[j]) == v) return false;
  }
  return true;
}

template <class Forced, int... P, element T, class L, class Bk>
auto permute_impl(const dtensor<T, L, Bk>& x) {
  constexpr int R = static_cast<int>(L::rank);
  constexpr bool ok = is_permutation<R, P...>();
  static_assert(ok, "spmd::permute: the dims are not a permutation of the tensor's dims.");
  if constexpr (ok) return apply<Forced>(ops::permute<dim_index(P, R)...>{}, x);
}

template <class Forced, int D, element T, class L, class Bk>
auto squeeze_impl(const dtensor<T, L, Bk>& x) {
  constexpr int R = static_cast<int>(L::rank), d = dim_index(D, R);
  static_assert(d >= 0 && d < R, "spmd::squeeze: the dim is out of range for the tensor's rank.");
  if constexpr (d >= 0 && d < R) {
    constexpr index_t e = L::extents_type::static_extent(static_cast<std::size_t>(d));
    static_assert(e == 1 || e == dyn, "spmd::squeeze: the squeezed dim must have extent 1.");
    if constexpr (e == 1 || e == dyn) {
      check_run_time_shapes<ops::squeeze<d>>(x);
      return apply<Forced>(ops::squeeze<d>{}, x);
    }
  }
}

template <class Forced, int D, element T, class L, class Bk>
auto unsqueeze_impl(const dtensor<T, L, Bk>& x) {
  constexpr int R = static_cast<int>(L::rank), d = D < 0 ? D + R + 1 : D;
  static_assert(d >= 0 && d <= R, "spmd::unsqueeze: the new dim's position is out of range [0, rank].");
  static_assert(R < max_tensor_dims, "spmd::unsqueeze: the result would have more than 8 dims.");
  if constexpr (d >= 0 && d <= R && R < max_tensor_dims) return apply<Forced>(ops::unsqueeze<d>{}, x);
}

template <class Forced, int S, int E, element T, class L, class Bk>
auto flatten_impl(const dtensor<T, L, Bk>& x) {
  constexpr int R = static_cast<int>(L::rank), s = dim_index(S, R), e = dim_index(E, R);
  constexpr bool ok = s >= 0 && e < R && s <= e;
  static_assert(ok, "spmd::flatten: the dims [Start, End] are out of range or out of order.");
  if constexpr (ok) {
    check_run_time_shapes<ops::flatten<s, e>>(x);
    return apply<Forced>(ops::flatten<s, e>{}, x);
  }
}

template <class L>
constexpr index_t static_count() {
  index_t n = 1;
  for (std::size_t d = 0; d < L::rank; ++d) {
    const index_t e = L::extents_type::static_extent(d);
    if (e == dyn) return dyn;
    n *= e;
  }
  return n;
}

template <class Forced, index_t... E, element T, class L, class Bk>
auto reshape_impl(const dtensor<T, L, Bk>& x) {
  static_assert(((E >= 0) && ...), "spmd::reshape: the new extents must be static and >= 0.");
  constexpr index_t n = static_count<L>(), m = (index_t{1} * ... * E);
  static_assert(n == dyn || n == m,
                "spmd::reshape: the new shape has a different number of elements than the tensor.");
  if constexpr ((n == dyn || n == m) && ((E >= 0) && ...)) {
    check_run_time_shapes<ops::reshape<E...>>(x);
    return apply<Forced>(ops::reshape<E...>{}, x);
  }
}

}  // namespace detail

/// Swaps dims D0 and D1.
template <int D0, int D1, element T, class L, class Bk>
auto transpose(const dtensor<T, L, Bk>& x) {
  return detail::transpose_impl<void, D0, D1>(x);
}
template <class Forced, int D0, int D1, element T, class L, class Bk>
auto transpose(const dtensor<T, L, Bk>& x) {
  return detail::transpose_impl<Forced, D0, D1>(x);
}

/// Output dim k is input dim P[k].
template <int... P, element T, class L, class Bk>
auto permute(const dtensor<T, L, Bk>& x) {
  return detail::permute_impl<void, P...>(x);
}
template <class Forced, int... P, element T, class L, class Bk>
auto permute(const dtensor<T, L, Bk>& x) {
  return detail::permute_impl<Forced, P...>(x);
}

/// Removes dim D (extent 1; a dynamic extent is checked at run time).
template <int D, element T, class L, class Bk>
auto squeeze(const dtensor<T, L, Bk>& x) {
  return detail::squeeze_impl<void, D>(x);
}
template <class Forced, int D, element T, class L, class Bk>
auto squeeze(const dtensor<T, L, Bk>& x) {
  return detail::squeeze_impl<Forced, D>(x);
}

/// Inserts a dim of extent 1 at position D (in [0, rank]; -1 appends).
template <int D, element T, class L, class Bk>
auto unsqueeze(const dtensor<T, L, Bk>& x) {
  return detail::unsqueeze_impl<void, D>(x);
}
template <class Forced, int D, element T, class L, class Bk>
auto unsqueeze(const dtensor<T, L, Bk>& x) {
  return detail::unsqueeze_impl<Forced, D>(x);
}

/// Merges dims [Start, End] into one (default: all of them).
template <int Start = 0, int End = -1, element T, class L, class Bk>
auto flatten(const dtensor<T, L, Bk>& x) {
  return detail::flatten_impl<void, Start, End>(x);
}
template <class Forced, int Start = 0, int End = -1, element T, class L, class Bk>
auto flatten(const dtensor<T, L, Bk>& x) {
  return detail::flatten_impl<Forced, Start, End>(x);
}

/// The same elements, row-major, in the static shape E... (a new tensor).
template <index_t... E, element T, class L, class Bk>
auto reshape(const dtensor<T, L, Bk>& x) {
  return detail::reshape_impl<void, E...>(x);
}
template <class Forced, index_t... E, element T, class L, class Bk>
auto reshape(const dtensor<T, L, Bk>& x) {
  return detail::reshape_impl<Forced, E...>(x);
}

/// reshape: every view here is a new tensor.
template <index_t... E, element T, class L, class Bk>
auto view(const dtensor<T, L, Bk>& x) {
  return detail::reshape_impl<void, E...>(x);
}
template <class Forced, index_t... E, element T, class L, class Bk>
auto view(const dtensor<T, L, Bk>& x) {
  return detail::reshape_impl<Forced, E...>(x);
}

template <int Dim, index_t Start, index_t Len>
struct op_kernel<ops::narrow<Dim, Start, Len>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static void run(const ops::narrow<Dim, Start, Len>&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> in) {
    if (out.empty()) return;
    shape_vec e = in.extents();
    e[Dim] = Len;
    detail::strided_copy(out, strided_view<const T>(in.data() + Start * in.stride(Dim), e, in.strides()));
  }
};

/// Elements [Start, Start + Len) of dim Dim (negative: from the end), as a new tensor.
template <int Dim, index_t Start, index_t Len, class Forced = void, element T, class L, class Bk>
auto narrow(const dtensor<T, L, Bk>& x) {
  constexpr int r = static_cast<int>(L::rank), d = Dim < 0 ? Dim + r : Dim;
  static_assert(d >= 0 && d < r, "spmd::narrow: the dim is outside the tensor's dims.");
  static_assert(L::extents_type::static_extent(static_cast<std::size_t>(d < 0 ? 0 : d)) == dyn ||
                    Start + Len <= L::extents_type::static_extent(static_cast<std::size_t>(d < 0 ? 0 : d)),
                "spmd::narrow: Start + Len is beyond the dim's extent.");
  if constexpr (d >= 0 && d < r) return apply<Forced>(ops::narrow<d, Start, Len>{}, x);
}

/// x cut along Dim into pieces of the static sizes Sizes... (their sum the dim's extent),
/// as a std::tuple of new tensors (torch.split with a list of sizes).
template <int Dim, index_t... Sizes, element T, class L, class Bk>
auto split(const dtensor<T, L, Bk>& x) {
  constexpr int r = static_cast<int>(L::rank), d = Dim < 0 ? Dim + r : Dim;
  static_assert(d >= 0 && d < r, "spmd::split: the dim is outside the tensor's dims.");
  static_assert(L::extents_type::static_extent(static_cast<std::size_t>(d < 0 ? 0 : d)) == (Sizes + ... + 0),
                "spmd::split: the sizes do not add up to the dim's static extent.");
  constexpr std::array<index_t, sizeof...(Sizes)> sizes{Sizes...};
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    constexpr auto start = [](std::size_t k) {
      index_t s = 0;
      for (std::size_t j = 0; j < k; ++j) s += std::array<index_t, sizeof...(Sizes)>{Sizes...}[j];
      return s;
    };
    return std::make_tuple(narrow<d, start(I), sizes[I]>(x)...);
  }(std::index_sequence_for<decltype(Sizes)...>{});
}

}  // namespace spmd::runtime
