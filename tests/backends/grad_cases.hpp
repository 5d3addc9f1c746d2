// tests/backends/grad_cases.hpp — the typed suite's gradient and training cases: the same
// recorded program (and optimizer steps) on backend B and on the simulation, every gradient's
// (parameter's) locals compared (bit for bit on host
// backends, within close_locals' tolerance on a device).
#pragma once

#include <tuple>
#include <vector>

#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/clip_grad.hpp"
#include "spmd/runtime/optim.hpp"

namespace suite {

namespace grad_detail {

/// The Megatron MLP with a mean loss; returns the gradients of x, W1, b1, W2, b2.
template <class B, class Mesh>
auto tp_mlp_grads() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  constexpr int tp = 1;
  using Up = rt::trainable<rt::column_parallel_linear<double, Mesh, tp, 8, 12, B>>;
  using Down = rt::trainable<rt::row_parallel_linear<double, Mesh, tp, 12, 8, B>>;
  using LX = layout<Mesh, placements<shard<0>, replicate>, extents<5, 8>>;  // 5 rows: uneven on dp
  auto up = Up::from_full(global_values<double>(96), global_values<double>(12), "up");
  auto down = Down::from_full(global_values<double>(96), global_values<double>(8), "down");
  auto x = rt::requires_grad(F::template distribute_tensor<LX>(global_values<double>(40)), "x");
  rt::mean<>(rt::gelu(down(rt::relu(up(x))))).backward();
  return std::make_tuple(x.grad(), up.weight.grad(), up.bias.grad(), down.weight.grad(),
                         down.bias.grad());
}

/// The same MLP trained: three steps of clip_grad_norm_ and AdamW (the weights' gradients are
/// Partial on dp: each step reduces them into the parameters' layout); the parameters after.
template <class B, class Mesh>
auto tp_mlp_trained() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  using Up = rt::trainable<rt::column_parallel_linear<double, Mesh, 1, 8, 12, B>>;
  using Down = rt::trainable<rt::row_parallel_linear<double, Mesh, 1, 12, 8, B>>;
  using LX = layout<Mesh, placements<shard<0>, replicate>, extents<5, 8>>;
  auto up = Up::from_full(global_values<double>(96), global_values<double>(12), "up");
  auto down = Down::from_full(global_values<double>(96), global_values<double>(8), "down");
  const auto x = F::template distribute_tensor<LX>(global_values<double>(40));
  rt::adamw opt(rt::adamw_options{.lr = 0.01}, up.weight, up.bias, down.weight, down.bias);
  for (int step = 0; step < 3; ++step) {
    rt::mean<>(rt::gelu(down(rt::relu(up(rt::as_variable(x)))))).backward();
    rt::clip_grad_norm_(0.05, up.weight, up.bias, down.weight, down.bias);
    opt.step();
    opt.zero_grad();
  }
  return std::make_tuple(up.weight.value(), up.bias.value(), down.weight.value(), down.bias.value());
}

/// Elementwise with broadcasting, reductions, views, softmax and a redistribute whose backward
/// runs in bfloat16; x starts Partial.
template <class B, class Mesh>
auto chain_grads() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  using LX = layout<Mesh, placements<shard<0>, partial<reduce_op::sum>>, extents<6, 8>>;
  using LR = layout<Mesh, placements<replicate, shard<0>>, extents<8>>;
  std::vector<float> gx(48), gr(8);
  for (std::size_t i = 0; i < gx.size(); ++i) gx[i] = 0.25f * static_cast<float>(i % 11) - 1.2f;
  for (std::size_t i = 0; i < gr.size(); ++i) gr[i] = 0.5f + 0.125f * static_cast<float>(i);
  auto x = rt::requires_grad(F::template distribute_tensor<LX>(gx), "x");
  auto r = rt::requires_grad(F::template distribute_tensor<LR>(gr), "row");
  auto y = rt::softmax<1>(x * r) + rt::log_softmax<0>(x - r) + rt::tanh(x) / r;
  auto z = rt::redistribute<placements<shard<1>, replicate>>(rt::transpose<0, 1>(y),
                                                                rt::backward_dtype<spmd::bfloat16>);
  auto loss = rt::sum<>(rt::max<1>(z)) + rt::mean<>(rt::reshape<4, 12>(y)) + rt::sum<>(rt::sigmoid(rt::sum<0>(y)));
  loss.backward();
  return std::make_tuple(x.grad(), r.grad());
}

/// bmm with its batch split, both operands differentiated.
template <class B, class Mesh>
auto bmm_grads() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  using LA = layout<Mesh, placements<shard<0>, replicate>, extents<4, 3, 5>>;
  using LB = layout<Mesh, placements<shard<0>, shard<2>>, extents<4, 5, 6>>;
  auto a = rt::requires_grad(F::template distribute_tensor<LA>(global_values<double>(60)), "a");
  auto b = rt::requires_grad(F::template distribute_tensor<LB>(global_values<double>(120)), "b");
  rt::sum<>(rt::relu(rt::bmm(a, b))).backward();
  return std::make_tuple(a.grad(), b.grad());
}

/// Causal attention with the batch on mesh dim 0 and the positions on dim 1 (context
/// parallelism: 7 positions, uneven), q, k and v differentiated; the non-causal one beside it.
/// Method: the all-gather or the ring (every backend).
template <class B, class Mesh, spmd::runtime::context_method Method = spmd::runtime::context_method::all_gather>
auto cp_attention_grads() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  using L = layout<Mesh, placements<shard<0>, shard<1>>, extents<2, 7, 8>>;  // 4 heads of 2
  std::vector<double> base = global_values<double>(112), kx(base.rbegin(), base.rend()), vx(112);
  for (std::size_t i = 0; i < vx.size(); ++i) vx[i] = 0.5 * base[(i * 5) % base.size()] - 0.25;
  auto q = rt::requires_grad(F::template distribute_tensor<L>(base), "q");
  auto k = rt::requires_grad(F::template distribute_tensor<L>(kx), "k");
  auto v = rt::requires_grad(F::template distribute_tensor<L>(vx), "v");
  const auto w = F::template distribute_tensor<L>(vx);
  (rt::sum<>(rt::causal_attention<2, Method>(q, k, v) * w) + rt::sum<>(rt::attention<2, false, Method>(v, q, k) * w))
      .backward();
  return std::make_tuple(q.grad(), k.grad(), v.grad());
}

template <class TB, class TS, std::size_t... I>
void compare_all(report& rep, const TB& b, const TS& s, const std::string& what, std::index_sequence<I...>) {
  (close_locals(rep, std::get<I>(b), std::get<I>(s), what + " " + std::to_string(I)), ...);
}
template <class TB, class TS>
void compare_all(report& rep, const TB& b, const TS& s, const std::string& what) {
  compare_all(rep, b, s, what, std::make_index_sequence<std::tuple_size_v<TB>>{});
}

}  // namespace grad_detail

/// Gradients on backend B against the simulation's.
template <class B, class Mesh>
void grad_cases(report& rep) {
  using S = spmd::sim::backend;
  grad_detail::compare_all(rep, grad_detail::tp_mlp_grads<B, Mesh>(), grad_detail::tp_mlp_grads<S, Mesh>(),
                           "TP MLP gradient");
  grad_detail::compare_all(rep, grad_detail::chain_grads<B, Mesh>(), grad_detail::chain_grads<S, Mesh>(),
                           "elementwise/reduction/view chain gradient");
  grad_detail::compare_all(rep, grad_detail::bmm_grads<B, Mesh>(), grad_detail::bmm_grads<S, Mesh>(), "bmm gradient");
  grad_detail::compare_all(rep, grad_detail::cp_attention_grads<B, Mesh>(), grad_detail::cp_attention_grads<S, Mesh>(),
                           "attention with the positions split (cp), gradient");
  grad_detail::compare_all(rep, grad_detail::cp_attention_grads<B, Mesh, spmd::runtime::context_method::ring>(),
                           grad_detail::cp_attention_grads<S, Mesh, spmd::runtime::context_method::ring>(),
                           "attention with the positions split, the ring, gradient");
  grad_detail::compare_all(rep, grad_detail::tp_mlp_trained<B, Mesh>(), grad_detail::tp_mlp_trained<S, Mesh>(),
                           "TP MLP after 3 steps of clip_grad_norm_ and AdamW, parameter");
}

}  // namespace suite
