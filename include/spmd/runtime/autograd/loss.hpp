// spmd/runtime/autograd/loss.hpp — cross entropy over rows with integer targets, and its
// vocabulary-parallel form (DTensor's loss_parallel).
//
//   auto l = cross_entropy<C>(logits, targets);                 // logits (N, C), targets (N)
//   auto v = vocab_parallel_cross_entropy<C>(logits, targets);  // logits sharded on C: never gathered
//   auto s = cross_entropy<V>(logits3, targets2);               // logits (B, T, V), targets (B, T)
//
// The class dim is the last (a language model's (batch, position, vocabulary) logits need no
// flatten, which an uneven batch shard would not survive; torch puts it at dim 1 for 3-d
// input, spmd chooses the last: docs/training.md). Both are the mean over rows of logsumexp(x_i) − x_{i, t_i} (torch's cross_entropy with
// reduction='mean'). On host backends in float or double, logits whose class dim is whole go
// through one fused operator each way (ops::cross_entropy_rows: logsumexp − the target's
// logit per row; its backward g · (softmax − one_hot)); elsewhere they are composed of
// operators, whose backward ((softmax − one_hot) / N) comes from the same rules as everything
// else (composed_cross_entropy, composed_vocab_parallel_cross_entropy: the references the
// fused form is tested against). cross_entropy goes through log_softmax, whose class
// dim is never sharded: class-sharded logits are gathered first, as DTensor does outside
// loss_parallel. vocab_parallel_cross_entropy keeps the class dim sharded: the row max (for
// stability; a constant of the gradient) and the row sum of exp are Partial over the class
// dim and reduced by all_reduces of N values, and the target's logit is picked by a masked
// one_hot product on the rank that holds it, then summed — O(N) communication, no gather.
#pragma once

#include <cstdint>
#include <type_traits>

#include "spmd/runtime/autograd/elementwise.hpp"
#include "spmd/runtime/autograd/nn.hpp"
#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/autograd/redistribute.hpp"
#include "spmd/runtime/autograd/reduction.hpp"
#include "spmd/runtime/ops/nn.hpp"

namespace spmd::runtime {

namespace autograd_detail {
/// The number of rows of logits in layout L (every dim but the last), or dyn when one is.
template <class L>
constexpr index_t rows_of() {
  index_t n = 1;
  for (std::size_t d = 0; d + 1 < L::rank; ++d) {
    if (L::extents_type::static_extent(d) == dyn) return dyn;
    n *= L::extents_type::static_extent(d);
  }
  return n;
}
}  // namespace autograd_detail

/// The mean of the per-row losses v as sum / rows: a sum stays Partial(sum) over any batch
/// shard, where a mean (Partial(avg)) holds only for equal pieces and would gather the rows of
/// an uneven one (mesh 3: 3, 3 and 2 sequences) first. torch's mean is the same sum / rows.
template <class L, class V>
auto row_mean(const V& v) {
  using T = typename V::element_type;
  constexpr index_t rows = autograd_detail::rows_of<L>();
  if constexpr (rows == dyn || rows == 0) return mean<>(v);  // counted at run time
  else return sum<>(v) / static_cast<T>(rows);
}

namespace autograd_detail {
template <index_t C, class X, class Targets>
constexpr void check_cross_entropy() {
  using LX = typename X::layout_type;
  using LT = typename Targets::layout_type;
  static_assert(LX::rank >= 2, "spmd::cross_entropy: the logits must be (rows..., classes).");
  static_assert(LT::rank + 1 == LX::rank,
                "spmd::cross_entropy: the targets must have the logits' dims but the last (one class per row).");
  static_assert(std::is_same_v<typename Targets::value_type, std::int32_t> ||
                    std::is_same_v<typename Targets::value_type, std::int64_t>,
                "spmd::cross_entropy: the targets must be int32 or int64 class indices.");
  static_assert(LX::extents_type::static_extent(LX::rank - 1) == C,
                "spmd::cross_entropy: C must be the logits' static class extent (the last dim).");

}
}  // namespace autograd_detail

namespace autograd_detail {
/// On host backends in float or double, cross entropy is one operator each way
/// (ops::cross_entropy_rows: a row's logsumexp and its target's logit in one pass; the
/// backward softmax − one_hot in one more), not the dozen composed ops and their gradients.
template <class T, class B>
inline constexpr bool fused_cross_entropy = host_memory<B> && (std::is_same_v<T, float> || std::is_same_v<T, double>);

/// True when no mesh dim of more than one rank shards the logits' class dim (the last); a
/// dynamic mesh size counts as more than one (the choice is a type, made at compile time).
template <class L>
constexpr bool class_dim_whole() {
  constexpr layout_spec s = L::nominal_spec();
  for (int m : s.shard_order(static_cast<int>(L::rank) - 1))
    if (s.mesh[m] != 1) return false;
  return true;
}

template <index_t C, class T, class L, class B, class GP, class I, class LT>
auto fused_cross_entropy_mean(const variable<T, L, B, GP>& logits, const dtensor<I, LT, B>& targets) {
  auto lv = keep(logits);
  auto rows = runtime::cross_entropy_rows<C>(lv.value(), targets);
  auto per_row = make_result(
      std::move(rows), "cross_entropy",
      [lv, targets](const auto& g) {
        if (wants(lv)) send(lv, runtime::cross_entropy_rows_backward<C>(g, lv.value(), targets));
      },
      logits);
  return row_mean<L>(per_row);
}
}  // namespace autograd_detail

/// The composition cross_entropy is elsewhere (the devices, bfloat16), and the reference its
/// fused form is tested against (tests/autograd).
template <index_t C, element T, class L, class B, class GP, element I, class LT>
auto composed_cross_entropy(const variable<T, L, B, GP>& logits, const dtensor<I, LT, B>& targets) {
  autograd_detail::check_cross_entropy<C, dtensor<T, L, B>, dtensor<I, LT, B>>();
  constexpr int c = static_cast<int>(L::rank) - 1;
  const auto onehot = one_hot<T, C>(targets);
  return -row_mean<L>(sum<c>(log_softmax<c>(logits) * onehot));
}

/// vocab_parallel_cross_entropy's composition (class-sharded logits, the devices, bfloat16).
template <index_t C, element T, class L, class B, class GP, element I, class LT>
auto composed_vocab_parallel_cross_entropy(const variable<T, L, B, GP>& logits, const dtensor<I, LT, B>& targets) {
  autograd_detail::check_cross_entropy<C, dtensor<T, L, B>, dtensor<I, LT, B>>();
  using XP = typename L::placements_type;
  constexpr int c = static_cast<int>(L::rank) - 1;
  // Row statistics (N values) are reduced explicitly and the logits' ops keep the logits'
  // placements, so the cost model cannot prefer gathering small logits.
  auto reduced = [](const auto& v) {
    using V = std::remove_cvref_t<decltype(v)>;
    return redistribute<default_grad_placements_t<typename V::placements_type>>(v);
  };
  // The row max shifts the exponent only: logsumexp's gradient does not depend on it.
  const auto m = runtime::redistribute<default_grad_placements_t<
      typename decltype(runtime::max<c>(logits.value(), keepdim))::placements_type>>(
      runtime::max<c>(logits.value(), keepdim));
  auto lse = log(reduced(sum<c>(exp(sub<XP>(logits, m)), keepdim))) + m;
  auto picked = reduced(sum<c>(mul<XP>(logits, one_hot<T, C>(targets)), keepdim));
  return row_mean<L>(lse - picked);
}

/// mean_i(−log_softmax(x)_{i, t_i}): logits (N..., C) and targets (N...) in [0, C).
template <index_t C, element T, class L, class B, class GP, element I, class LT>
auto cross_entropy(const variable<T, L, B, GP>& logits, const dtensor<I, LT, B>& targets) {
  autograd_detail::check_cross_entropy<C, dtensor<T, L, B>, dtensor<I, LT, B>>();
  if constexpr (autograd_detail::fused_cross_entropy<T, B>) return autograd_detail::fused_cross_entropy_mean<C>(logits, targets);
  else return composed_cross_entropy<C>(logits, targets);
}

/// The same value, with logits sharded on the class dim kept so (loss_parallel): see above.
/// Logits whose class dim is whole take cross_entropy's fused operator on host backends.
template <index_t C, element T, class L, class B, class GP, element I, class LT>
auto vocab_parallel_cross_entropy(const variable<T, L, B, GP>& logits, const dtensor<I, LT, B>& targets) {
  autograd_detail::check_cross_entropy<C, dtensor<T, L, B>, dtensor<I, LT, B>>();
  if constexpr (autograd_detail::fused_cross_entropy<T, B> && autograd_detail::class_dim_whole<L>())
    return autograd_detail::fused_cross_entropy_mean<C>(logits, targets);
  else return composed_vocab_parallel_cross_entropy<C>(logits, targets);
}

}  // namespace spmd::runtime
