// spmd/runtime/autograd/attention.hpp — attention, causal or not, on variables.
//
//   auto y = spmd::runtime::causal_attention<64>(q, k, v);   // q, k, v (b, c, heads x 64)
//   auto z = spmd::runtime::attention<64>(q, k, v);          // no mask
//
// Each head: softmax(q kᵀ / √HeadDim + causal mask) v, the heads side by side as in q: what
// a transformer block writes as split heads, bmm, mask, softmax, bmm, merge heads. On host
// backends in float or double this is one operator each way (runtime/ops/attention.hpp: the
// products read the heads where they lie, the softmax and its backward are one pass over each
// head's scores, the backward recomputes them), so no transposed or split copy of a head is
// made and nothing of c x c per head is kept between the forward and the backward. Elsewhere
// (the devices, bfloat16) it is the composition of those operators, with the same sharding:
// the batch on any mesh dim, the width by whole heads (Megatron's column-parallel q, k, v),
// the positions on any mesh dim (context parallelism: the queries stay split, K and V are
// all-gathered, dK and dV reduce-scattered back; docs/context_parallel.md).
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
#include "spmd/runtime/ops/ring_attention.hpp"

namespace spmd::runtime {

namespace autograd_detail {

/// The causal mask (Q x K positions): 0 where key j <= query i, −inf after, replicated.
template <class T, class Mesh, index_t Q, index_t K, class B>
auto causal_mask() {
  std::vector<T> m(static_cast<std::size_t>(Q * K));
  for (index_t i = 0; i < Q; ++i)
    for (index_t j = 0; j < K; ++j)
      m[static_cast<std::size_t>(i * K + j)] =
          j > i ? static_cast<T>(-std::numeric_limits<float>::infinity()) : T(0);
  using R = decltype([]<std::size_t... I>(std::index_sequence<I...>) {
    return placements<decltype((void(I), replicate{}))...>{};
  }(std::make_index_sequence<static_cast<std::size_t>(Mesh::ndim)>{}));
  return factories<B>::template distribute_tensor<layout<Mesh, R, extents<Q, K>>>(m);
}

/// Whether layout L splits the positions on this run's mesh (a dim of one rank splits nothing;
/// whether it may at all is attention_detail::splits_positions, in the compiler).
template <class L>
bool splits_positions() {
  const placement_vec p = L::placements_type::value();
  const mesh_shape_vec shape = L::mesh_type::shape_vec();
  for (int d = 0; d < p.size(); ++d)
    if (p[d].is_shard(1) && shape[d] > 1) return true;
  return false;
}

}  // namespace autograd_detail

/// Attention over heads of HeadDim (scale 1/√HeadDim) on variables: q (batch, positions, heads x
/// HeadDim), k and v (batch, key positions, heads x HeadDim); Causal: query i sees keys j <= i.
/// Method: with the positions split, how the keys of other ranks are reached
/// (runtime/ops/ring_attention.hpp's context_method: gathered, or passed around a ring).
template <index_t HeadDim, bool Causal = false, context_method Method = context_method::all_gather, class Q, class K,
          class V>
  requires grad_operands<Q, K, V>
auto attention(const Q& q, const K& k, const V& v) {
  using QV = decltype(autograd_detail::keep(q));
  using T = typename QV::element_type;
  using B = typename QV::backend_type;
  using L = typename QV::layout_type;
  static_assert(L::rank == 3, "spmd::attention: q, k and v must be (batch, positions, heads x head dim).");
  const double scale = 1.0 / std::sqrt(static_cast<double>(HeadDim));
  constexpr bool float_kinds = std::is_same_v<T, float> || std::is_same_v<T, double>;
  constexpr bool host_kernels = host_memory<B> && float_kinds;
  constexpr bool ring_kernels = float_kinds && (host_memory<B> || runtime::device_ring<B>);
  constexpr bool ring = Method == context_method::ring || Method == context_method::ring_head_tail;
  constexpr bool head_tail = Method == context_method::ring_head_tail;
  static_assert(!ring || ring_kernels,
                "spmd::attention: the ring computes in float or double (on the simulation, MPI, CUDA and NCCL); "
                "in bfloat16, or on a backend without a ring, use context_method::all_gather.");
  if constexpr (ring && ring_kernels) {
    auto qv = autograd_detail::keep(q);
    auto kv = autograd_detail::keep(k);
    auto vv = autograd_detail::keep(v);
    // K and V travel in the queries' placements (no step where they are already)
    using P = typename L::placements_type;
    auto kr = runtime::redistribute<P>(kv.value());
    auto vr = runtime::redistribute<P>(vv.value());
    auto [y, lse] = runtime::ring_attention<HeadDim, Causal, head_tail>(qv.value(), kr, vr, scale);
    auto saved = y;  // shares the buffers (copied on write)
    return autograd_detail::make_result(
        std::move(y), Causal ? "causal_attention" : "attention",
        [qv, kv, vv, kr, vr, saved, lse = std::move(lse), scale](const auto& g) {
          using namespace autograd_detail;
          auto [dq, dk, dv] =
              runtime::ring_attention_backward<HeadDim, Causal, head_tail>(g, qv.value(), kr, vr, saved, lse, scale);
          if (wants(qv)) send(qv, std::move(dq));
          if (wants(kv)) send(kv, std::move(dk));
          if (wants(vv)) send(vv, std::move(dv));
        },
        q, k, v);
  } else if constexpr (host_kernels) {
    auto qv = autograd_detail::keep(q);
    auto kv = autograd_detail::keep(k);
    auto vv = autograd_detail::keep(v);
    auto y = runtime::attention<HeadDim, Causal>(qv.value(), kv.value(), vv.value(), scale);
    using Y = typename decltype(y)::layout_type;
    // The fused backward takes one length for the queries and the keys: keys of another
    // length (attention without a mask) take the split one, decided here where both
    // lengths are static and at run time where one is not.
    constexpr index_t cq = L::extents_type::static_extent(1);
    constexpr index_t ck = decltype(kv)::layout_type::extents_type::static_extent(1);
    constexpr bool fused_compiles = cq == dyn || ck == dyn || cq == ck;
    constexpr bool lengths_may_differ = cq == dyn || ck == dyn ? true : cq != ck;
    return autograd_detail::make_result(
        std::move(y), Causal ? "causal_attention" : "attention",
        [qv, kv, vv, scale](const auto& g) {
          using namespace autograd_detail;
          // Queries split over ranks (context parallelism), or keys of another length: dq
          // where q is, dk and dv summed over the ranks' queries (Partial, reduce-scattered to
          // k's layout by send); else the three from one recomputed softmax.
          if constexpr (runtime::attention_detail::splits_positions<Y>() || lengths_may_differ) {
            if (!fused_compiles || splits_positions<Y>() || qv.value().shape()[1] != kv.value().shape()[1]) {
              // K and V gathered once for both operators; dK and dV reduce-scattered in one
              // collective, stacked, to K's layout (each then a view of it)
              using P = typename runtime::attention_detail::whole_positions<typename Y::placements_type>::type;
              const auto kw = runtime::redistribute<P>(kv.value());
              const auto vw = runtime::redistribute<P>(vv.value());
              if (wants(qv)) send(qv, runtime::attention_backward_q<HeadDim, Causal>(g, qv.value(), kw, vw, scale));
              if (wants(kv) || wants(vv)) {
                using Stacked = typename decltype(runtime::unsqueeze<0>(kv.value()))::layout_type::placements_type;
                const auto d = runtime::redistribute<Stacked>(
                    runtime::attention_backward_kv<HeadDim, Causal>(g, qv.value(), kw, vw, scale));
                if (wants(kv)) send(kv, runtime::squeeze<0>(runtime::narrow<0, 0, 1>(d)));
                if (wants(vv)) send(vv, runtime::squeeze<0>(runtime::narrow<0, 1, 1>(d)));
              }
              return;
            }
          }
          if constexpr (fused_compiles) {
            const auto d = [&] {
              if constexpr (runtime::attention_detail::splits_positions<Y>()) {
                // a layout that may split the positions, on a mesh that does not: each input
                // gathered (no step on a dim of one rank) to the layout with the positions
                // whole, so the fused operator's resolution has nothing to search
                using P = typename runtime::attention_detail::whole_positions<typename Y::placements_type>::type;
                return runtime::attention_backward<HeadDim, Causal>(
                    runtime::redistribute<P>(g), runtime::redistribute<P>(qv.value()),
                    runtime::redistribute<P>(kv.value()), runtime::redistribute<P>(vv.value()), scale);
              } else {
                return runtime::attention_backward<HeadDim, Causal>(g, qv.value(), kv.value(), vv.value(), scale);
              }
            }();
            if (wants(qv)) send(qv, runtime::squeeze<0>(runtime::narrow<0, 0, 1>(d)));
            if (wants(kv)) send(kv, runtime::squeeze<0>(runtime::narrow<0, 1, 1>(d)));
            if (wants(vv)) send(vv, runtime::squeeze<0>(runtime::narrow<0, 2, 1>(d)));
          }
        },
        q, k, v);
  } else {
    using E = typename L::extents_type;
    using KE = typename decltype(autograd_detail::keep(k))::layout_type::extents_type;
    static_assert(E::is_static() && KE::is_static(),
                  "spmd::attention: composed (on a device, or of bfloat16) it needs static extents.");
    constexpr index_t batch = E::static_extent(0), ctx = E::static_extent(1), width = E::static_extent(2);
    constexpr index_t kctx = KE::static_extent(1);
    static_assert(width % HeadDim == 0, "spmd::attention: the width must be a multiple of the head dim.");
    static_assert(!Causal || ctx == kctx, "spmd::causal_attention: q, k and v must have one number of positions.");
    constexpr index_t heads = width / HeadDim;
    auto split = []<index_t C>(const auto& y, std::integral_constant<index_t, C>) {
      return runtime::permute<0, 2, 1, 3>(runtime::reshape<batch, C, heads, HeadDim>(y));
    };
    using cq = std::integral_constant<index_t, ctx>;
    using ck = std::integral_constant<index_t, kctx>;
    auto scores = runtime::bmm(split(q, cq{}), runtime::transpose<2, 3>(split(k, ck{}))) / std::sqrt(double(HeadDim));
    auto o = [&] {
      if constexpr (Causal) {
        const auto mask = autograd_detail::causal_mask<T, typename L::mesh_type, ctx, kctx, B>();
        return runtime::bmm(runtime::softmax<3>(scores + mask), split(v, ck{}));
      } else {
        return runtime::bmm(runtime::softmax<3>(scores), split(v, ck{}));
      }
    }();
    return runtime::reshape<batch, ctx, width>(runtime::permute<0, 2, 1, 3>(o));
  }
}

/// Causal self-attention: each head softmax(q kᵀ / √HeadDim + causal mask) v.
template <index_t HeadDim, context_method Method = context_method::all_gather, class Q, class K, class V>
  requires grad_operands<Q, K, V>
auto causal_attention(const Q& q, const K& k, const V& v) {
  return attention<HeadDim, true, Method>(q, k, v);
}

}  // namespace spmd::runtime
