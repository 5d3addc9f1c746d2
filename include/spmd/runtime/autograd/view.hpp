// spmd/runtime/autograd/view.hpp — transpose, permute and the reshapes on variables. Each
// backward is the inverse view of the gradient: transpose by the same dims, permute by the
// inverse permutation, and every reshape (reshape, view, flatten, squeeze, unsqueeze) by a
// reshape to the input's shape, which needs the input's extents to be static.
#pragma once

#include <array>

#include "spmd/runtime/autograd/operand.hpp"
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
