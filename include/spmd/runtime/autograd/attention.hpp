// spmd/runtime/autograd/attention.hpp — causal self-attention on variables.
//
//   auto y = spmd::runtime::causal_attention<64>(q, k, v);   // q, k, v (b, c, heads x 64)
//
// Each head: softmax(q kᵀ / √HeadDim + causal mask) v, the heads side by side as in q: what
// a transformer block writes as split heads, bmm, mask, softmax, bmm, merge heads. On host
// backends in float or double this is one operator each way (runtime/ops/attention.hpp: the
// products read the heads where they lie, the softmax and its backward are one pass over each
// head's scores, the backward recomputes them), so no transposed or split copy of a head is
// made and nothing of c x c per head is kept between the forward and the backward. Elsewhere
// (the devices, bfloat16) it is the composition of those operators, with the same sharding:
// the batch on any mesh dim, the width by whole heads (Megatron's column-parallel q, k, v).
#pragma once

#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/runtime/autograd/elementwise.hpp"
#include "spmd/runtime/autograd/matmul.hpp"
#include "spmd/runtime/autograd/nn.hpp"
#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/autograd/view.hpp"
#include "spmd/runtime/ops/attention.hpp"

namespace spmd::runtime {

namespace autograd_detail {

/// The causal mask (positions C): 0 on and below the diagonal, −inf above, replicated.
template <class T, class Mesh, index_t C, class B>
auto causal_mask() {
  std::vector<T> m(static_cast<std::size_t>(C * C));
  for (index_t i = 0; i < C; ++i)
    for (index_t j = 0; j < C; ++j)
      m[static_cast<std::size_t>(i * C + j)] =
          j > i ? static_cast<T>(-std::numeric_limits<float>::infinity()) : T(0);
  using R = decltype([]<std::size_t... I>(std::index_sequence<I...>) {
    return placements<decltype((void(I), replicate{}))...>{};
  }(std::make_index_sequence<static_cast<std::size_t>(Mesh::ndim)>{}));
  return factories<B>::template distribute_tensor<layout<Mesh, R, extents<C, C>>>(m);
}

}  // namespace autograd_detail

template <index_t HeadDim, class Q, class K, class V>
  requires grad_operands<Q, K, V>
auto causal_attention(const Q& q, const K& k, const V& v) {
  using QV = decltype(autograd_detail::keep(q));
  using T = typename QV::element_type;
  using B = typename QV::backend_type;
  using L = typename QV::layout_type;
  static_assert(L::rank == 3, "spmd::causal_attention: q, k and v must be (batch, positions, heads x head dim).");
  const double scale = 1.0 / std::sqrt(static_cast<double>(HeadDim));
  if constexpr (host_memory<B> && (std::is_same_v<T, float> || std::is_same_v<T, double>)) {
    auto qv = autograd_detail::keep(q);
    auto kv = autograd_detail::keep(k);
    auto vv = autograd_detail::keep(v);
    auto y = runtime::causal_attention<HeadDim>(qv.value(), kv.value(), vv.value(), scale);
    return autograd_detail::make_result(
        std::move(y), "causal_attention",
        [qv, kv, vv, scale](const auto& g) {
          using namespace autograd_detail;
          const auto d = runtime::causal_attention_backward<HeadDim>(g, qv.value(), kv.value(), vv.value(), scale);
          if (wants(qv)) send(qv, runtime::squeeze<0>(runtime::narrow<0, 0, 1>(d)));
          if (wants(kv)) send(kv, runtime::squeeze<0>(runtime::narrow<0, 1, 1>(d)));
          if (wants(vv)) send(vv, runtime::squeeze<0>(runtime::narrow<0, 2, 1>(d)));
        },
        q, k, v);
  } else {
    using E = typename L::extents_type;
    static_assert(E::is_static(), "spmd::causal_attention: composed (on a device, or of bfloat16) it needs static extents.");
    constexpr index_t batch = E::static_extent(0), ctx = E::static_extent(1), width = E::static_extent(2);
    static_assert(width % HeadDim == 0, "spmd::causal_attention: the width must be a multiple of the head dim.");
    constexpr index_t heads = width / HeadDim;
    auto split = [](const auto& y) { return runtime::permute<0, 2, 1, 3>(runtime::reshape<batch, ctx, heads, HeadDim>(y)); };
    const auto mask = autograd_detail::causal_mask<T, typename L::mesh_type, ctx, B>();
    auto scores = runtime::bmm(split(q), runtime::transpose<2, 3>(split(k))) / std::sqrt(double(HeadDim)) + mask;
    auto o = runtime::bmm(runtime::softmax<3>(scores), split(v));
    return runtime::reshape<batch, ctx, width>(runtime::permute<0, 2, 1, 3>(o));
  }
}

}  // namespace spmd::runtime
