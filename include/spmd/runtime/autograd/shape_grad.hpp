// spmd/runtime/autograd/shape_grad.hpp — moving gradients between shapes: summing a
// broadcast result's gradient back to an operand's shape (sum_to), and spreading a reduced
// gradient over the reduced dims (expand_to). Both are ordinary operators (sum, unsqueeze,
// add), so the compiler picks their sharding.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/reduction.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace spmd::runtime::autograd_detail {

/// A compile-time list of dims.
struct dim_list {
  std::array<int, max_tensor_dims> d{};
  int n = 0;
};

/// Reduce (sum, keepdim as given) over the dims of D; nothing when D is empty.
template <dim_list D, bool KeepDim, class G, std::size_t... I>
auto sum_dims(const G& g, std::index_sequence<I...>) {
  if constexpr (D.n == 0) return g;
  else return runtime::reduce<ops::reduce_kind::sum, over<D.d[I]...>, KeepDim>(g);
}
template <dim_list D, bool KeepDim, class G>
auto sum_dims(const G& g) {
  return sum_dims<D, KeepDim>(g, std::make_index_sequence<static_cast<std::size_t>(D.n)>{});
}

/// The leading dims of a rank-R result that a rank-RX operand lacks.
template <int R, int RX>
constexpr dim_list leading_dims() {
  dim_list l{};
  for (int d = 0; d < R - RX; ++d) l.d[l.n++] = d;
  return l;
}
/// The operand's dims of static extent 1 that the result stretched (its extent not a static 1).
template <class EX, class EG>
constexpr dim_list stretched_dims() {
  dim_list l{};
  constexpr int rx = static_cast<int>(EX::rank()), rg = static_cast<int>(EG::rank());
  for (int k = 0; k < rx; ++k)
    if (EX::static_extent(static_cast<std::size_t>(k)) == 1 &&
        EG::static_extent(static_cast<std::size_t>(k + rg - rx)) != 1)
      l.d[l.n++] = k;
  return l;
}

/// The gradient g of a broadcast result, summed to the shape of an operand of layout LX
/// (torch's sum_to_size): over the dims the operand lacks, then (keeping them) over the
/// dims it stretched from 1.
template <class LX, element T, class LG, class B>
auto sum_to(const dtensor<T, LG, B>& g) {
  constexpr int r = static_cast<int>(LG::rank), rx = static_cast<int>(LX::rank);
  auto lead = sum_dims<leading_dims<r, rx>(), false>(g);
  using EL = typename decltype(lead)::extents_type;
  return sum_dims<stretched_dims<typename LX::extents_type, EL>(), true>(lead);
}

/// Dims of a rank-R tensor listed (possibly negative, empty: all) as Dims, sorted.
template <int R, int... Dims>
constexpr dim_list reduced_dims() {
  dim_list l{};
  if constexpr (sizeof...(Dims) == 0) {
    for (int d = 0; d < R; ++d) l.d[l.n++] = d;
  } else {
    for (int d : {Dims...}) l.d[l.n++] = d < 0 ? d + R : d;
    for (int i = 1; i < l.n; ++i)  // insertion sort: at most 8
      for (int j = i; j > 0 && l.d[j - 1] > l.d[j]; --j) std::swap(l.d[j - 1], l.d[j]);
  }
  return l;
}

/// True when the (sorted) dims of D are 0, 1, ..., D.n - 1.
constexpr bool is_leading(const dim_list& D) {
  for (int k = 0; k < D.n; ++k)
    if (D.d[k] != k) return false;
  return true;
}

/// g with extent-1 dims inserted at the (sorted) positions of D.
template <dim_list D, int K = 0, class G>
auto unsqueeze_at(const G& g) {
  if constexpr (K == D.n) return g;
  else return unsqueeze_at<D, K + 1>(runtime::unsqueeze<D.d[K]>(g));
}

/// g (broadcastable to x's shape) spread over x's shape, in one pass that reads g only: the
/// binary op expand_as(x, g), whose sharding the compiler chooses as for x + g. A Partial x
/// would be reduced first, only to go unread: there the shape comes from a tensor of x's
/// layout with each Partial read as Replicate (the layout a Partial tensor's gradient takes),
/// made on every rank without communication. (Zeros in x's own Partial layout plus g, as it
/// was, made the add reduce-scatter the zeros and the next reader gather them back: two
/// collectives of nothing, found by the automatic sharding search's prediction, docs/auto.md.)
template <element T, class LX, class LG, class B>
auto expand_to(const dtensor<T, LG, B>& g, const dtensor<T, LX, B>& x) {
  using P = typename LX::placements_type;
  if constexpr (std::is_same_v<P, default_grad_placements_t<P>>) {  // no Partial
    return ew_detail::binary_apply<ops::expand_as_fn, void>(x, g);
  } else {
    using Whole = layout<typename LX::mesh_type, default_grad_placements_t<P>, typename LX::extents_type>;
    return ew_detail::binary_apply<ops::expand_as_fn, void>(
        factories<B>::template full<T>(T(0), Whole{x.layout().extents()}), g);
  }
}

/// The product of the global extents of `shape` at the dims of D.
template <dim_list D, class Shape>
index_t count_over(const Shape& shape) {
  index_t n = 1;
  for (int k = 0; k < D.n; ++k) n *= shape[static_cast<std::size_t>(D.d[k])];
  return n;
}

}  // namespace spmd::runtime::autograd_detail
