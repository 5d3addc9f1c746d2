// spmd/runtime/autograd/view.hpp — transpose, permute and the reshapes on variables. Each
// backward is the inverse view of the gradient: transpose by the same dims, permute by the
// inverse permutation, and every reshape (reshape, view, flatten, squeeze, unsqueeze) by a
// reshape to the input's shape, which needs the input's extents to be static.
#pragma once

#include <array>

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/ops/cat.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace spmd::runtime {

namespace autograd_detail {
/// g reshaped to the static extents EX.
template <class EX, class G>
auto reshape_to(const G& g) {
  static_assert(EX::is_static(),
                "spmd::autograd: the backward of a reshape needs the input's extents to be static.");
  return []<index_t... E>(const G& h, extents<E...>*) { return runtime::reshape<E...>(h); }(
      g, static_cast<EX*>(nullptr));
}

template <class V, class Y>
auto reshape_result(const V& x, Y&& y, const char* name) {
  return make_result(
      std::forward<Y>(y), name,
      [x](const auto& g) { send(x, reshape_to<typename V::extents_type>(g)); }, x);
}

template <int... P>
constexpr std::array<int, sizeof...(P)> inverse_permutation() {
  constexpr int r = static_cast<int>(sizeof...(P));
  std::array<int, sizeof...(P)> p{P...}, inv{};
  for (int k = 0; k < r; ++k) inv[static_cast<std::size_t>(p[k] < 0 ? p[k] + r : p[k])] = k;
  return inv;
}
}  // namespace autograd_detail

template <int D0, int D1, element T, class L, class B, class GP>
auto transpose(const variable<T, L, B, GP>& x) {
  return autograd_detail::make_result(
      runtime::transpose<D0, D1>(x.value()), "transpose",
      [x](const auto& g) { autograd_detail::send(x, runtime::transpose<D0, D1>(g)); }, x);
}

template <int... P, element T, class L, class B, class GP>
auto permute(const variable<T, L, B, GP>& x) {
  return autograd_detail::make_result(
      runtime::permute<P...>(x.value()), "permute",
      [x](const auto& g) {
        constexpr auto inv = autograd_detail::inverse_permutation<P...>();
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          autograd_detail::send(x, runtime::permute<inv[I]...>(g));
        }(std::make_index_sequence<sizeof...(P)>{});
      },
      x);
}

template <index_t... E, element T, class L, class B, class GP>
auto reshape(const variable<T, L, B, GP>& x) {
  return autograd_detail::reshape_result(x, runtime::reshape<E...>(x.value()), "reshape");
}
template <index_t... E, element T, class L, class B, class GP>
auto view(const variable<T, L, B, GP>& x) {
  return autograd_detail::reshape_result(x, runtime::reshape<E...>(x.value()), "view");
}
template <int Start = 0, int End = -1, element T, class L, class B, class GP>
auto flatten(const variable<T, L, B, GP>& x) {
  return autograd_detail::reshape_result(x, runtime::flatten<Start, End>(x.value()), "flatten");
}
template <int D, element T, class L, class B, class GP>
auto squeeze(const variable<T, L, B, GP>& x) {
  return autograd_detail::reshape_result(x, runtime::squeeze<D>(x.value()), "squeeze");
}
template <int D, element T, class L, class B, class GP>
auto unsqueeze(const variable<T, L, B, GP>& x) {
  return autograd_detail::reshape_result(x, runtime::unsqueeze<D>(x.value()), "unsqueeze");
}

}  // namespace spmd::runtime

namespace spmd::runtime {

namespace autograd_detail {
/// Zeros of layout L's placements with dim D of extent N (and L's other static extents).
template <class L, int D, index_t N, element T, class B>
auto zeros_part() {
  using E = typename L::extents_type;
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    using LP = spmd::layout<typename L::mesh_type, typename L::placements_type,
                            extents<(static_cast<int>(I) == D ? N : E::static_extent(I))...>>;
    return factories<B>::template full<T>(T(0), LP{});
  }(std::make_index_sequence<L::rank>{});
}
/// g (the gradient of narrow<D, Start, Len> of an input of extent Ext on D) placed into zeros
/// of the input's shape: cat of zeros before, g, zeros after (the empty parts left out).
template <int D, index_t Start, index_t Len, index_t Ext, element T, class L, class B>
auto unnarrow(const dtensor<T, L, B>& g) {
  static_assert(L::extents_type::is_static(), "spmd::autograd: narrow's backward needs static extents.");
  constexpr index_t after = Ext - Start - Len;
  if constexpr (Start == 0 && after == 0) return g;
  else if constexpr (Start == 0) return runtime::cat<D>(g, zeros_part<L, D, after, T, B>());
  else if constexpr (after == 0) return runtime::cat<D>(zeros_part<L, D, Start, T, B>(), g);
  else return runtime::cat<D>(zeros_part<L, D, Start, T, B>(), g, zeros_part<L, D, after, T, B>());
}
}  // namespace autograd_detail

/// narrow on a variable: the gradient is g in the slice, zeros elsewhere.
template <int Dim, index_t Start, index_t Len, class Forced = void, element T, class L, class B, class GP>
auto narrow(const variable<T, L, B, GP>& x) {
  constexpr int r = static_cast<int>(L::rank), d = Dim < 0 ? Dim + r : Dim;
  return autograd_detail::make_result(
      runtime::narrow<Dim, Start, Len, Forced>(x.value()), "narrow",
      [x](const auto& g) {
        constexpr index_t ext = L::extents_type::static_extent(static_cast<std::size_t>(d));
        autograd_detail::send(x, autograd_detail::unnarrow<d, Start, Len, ext>(g));
      },
      x);
}

/// split on a variable: each piece is a narrow (its own node).
template <int Dim, index_t... Sizes, element T, class L, class B, class GP>
auto split(const variable<T, L, B, GP>& x) {
  constexpr int r = static_cast<int>(L::rank), d = Dim < 0 ? Dim + r : Dim;
  static_assert(L::extents_type::static_extent(static_cast<std::size_t>(d < 0 ? 0 : d)) == (Sizes + ... + 0),
                "spmd::split: the sizes do not add up to the dim's static extent.");
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    constexpr std::array<index_t, sizeof...(Sizes)> sizes{Sizes...};
    constexpr auto start = [](std::size_t k) {
      index_t s = 0;
      for (std::size_t j = 0; j < k; ++j) s += std::array<index_t, sizeof...(Sizes)>{Sizes...}[j];
      return s;
    };
    return std::make_tuple(narrow<d, start(I), sizes[I]>(x)...);
  }(std::index_sequence_for<decltype(Sizes)...>{});
}

/// cat on variables (and dtensors as constants): input k's gradient is g's slice at its place.
template <int Dim, class X0, class... X>
  requires grad_operands<X0, X...>
auto cat(const X0& x0, const X&... x) {
  auto y = runtime::cat<Dim>(value_of(x0), value_of(x)...);
  using Y = decltype(y);
  // used only inside the backward lambda, which g++ 12's -Wunused-but-set-variable misses
  [[maybe_unused]] constexpr int d = Dim < 0 ? Dim + static_cast<int>(Y::rank) : Dim;
  return autograd_detail::make_result(
      std::move(y), "cat",
      [ins = std::make_tuple(autograd_detail::keep(x0), autograd_detail::keep(x)...)](const auto& g) {
        using Ins = std::remove_cvref_t<decltype(ins)>;
        constexpr std::size_t n_in = std::tuple_size_v<Ins>;
        // The extent of each input on the cat dim, and where it starts.
        constexpr std::array<index_t, n_in> ext = []<std::size_t... I>(std::index_sequence<I...>) {
          static_assert((std::tuple_element_t<I, Ins>::extents_type::is_static() && ...),
                        "spmd::autograd: cat's backward needs static extents.");
          return std::array<index_t, n_in>{
              std::tuple_element_t<I, Ins>::extents_type::static_extent(static_cast<std::size_t>(d))...};
        }(std::make_index_sequence<n_in>{});
        constexpr auto start = [ext](std::size_t k) {
          index_t s = 0;
          for (std::size_t j = 0; j < k; ++j) s += ext[j];
          return s;
        };
        [&]<std::size_t... I>(std::index_sequence<I...>) {
          (
              [&] {
                const auto& in = std::get<I>(ins);
                if (autograd_detail::wants(in))
                  autograd_detail::send(in, runtime::narrow<d, start(I), ext[I]>(g));
              }(),
              ...);
        }(std::make_index_sequence<n_in>{});
      },
      x0, x...);
}

}  // namespace spmd::runtime
