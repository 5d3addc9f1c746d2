// tests/backends/training_cases.hpp — the typed suite's data-parallel cases: coalesced
// collectives (one collective for many tensors) on backend B against the simulation's, and
// against B's own per-tensor redistributes, with the collective count asserted.
#pragma once

#include <string>
#include <tuple>

#include <boost/hana/define_struct.hpp>

#include "spmd/nn/modules.hpp"
#include "spmd/nn/parallelize.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/coalesce.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/data_parallel/ddp.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"
#include "spmd/runtime/optim.hpp"

namespace suite {

namespace training_detail {

/// FSDP's three coalesced collectives on a (dp, tp) mesh: the unshard's all_gather (even,
/// uneven, empty and nested shards), the gradients' reduce_scatter, DDP's all_reduce; each
/// returns the outputs and how many collectives ran.
template <class B, class Mesh>
auto coalesced_all_gather() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  using S0 = placements<shard<0>, replicate>;
  using R = placements<replicate, replicate>;
  using LW = layout<Mesh, S0, extents<5, 6>>;
  using LE = layout<Mesh, S0, extents<1, 3>>;
  using LC = layout<Mesh, placements<shard<0, 1>, shard<0, 0>>, extents<11, 2>>;
  using LRow = layout<Mesh, placements<shard<0>, shard<1>>, extents<6, 9>>;
  const auto w = F::template distribute_tensor<LW>(global_values<float>(30));
  const auto e = F::template distribute_tensor<LE>(global_values<float>(3));
  const auto c = F::template distribute_tensor<LC>(global_values<float>(22));
  const auto rw = F::template distribute_tensor<LRow>(global_values<float>(54));
  using To = rt::to<R, R, placements<replicate, shard<0>>, placements<replicate, shard<1>>>;
  rt::comm_counter comm;
  auto out = rt::redistribute_coalesced<To>(w, e, c, rw);
  return std::make_tuple(out, comm.total(), rt::coalesced_plan<To, LW, LE, LC, LRow>::collectives());
}

template <class B, class Mesh>
auto coalesced_reduce_scatter() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  using P = placements<partial<reduce_op::sum>, shard<1>>;
  using S = placements<shard<0>, shard<1>>;
  using LA = layout<Mesh, P, extents<7, 5>>;
  using LB = layout<Mesh, P, extents<1, 3>>;
  const auto a = F::template distribute_tensor<LA>(global_values<float>(35));
  const auto b = F::template distribute_tensor<LB>(global_values<float>(3));
  rt::comm_counter comm;
  auto out = rt::redistribute_coalesced<rt::to<S, S>>(a, b);
  return std::make_tuple(out, comm.total(), rt::coalesced_plan<rt::to<S, S>, LA, LB>::collectives());
}

template <class B, class Mesh>
auto coalesced_all_reduce() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  using P = placements<partial<reduce_op::sum>, replicate>;
  using R = placements<replicate, replicate>;
  using LA = layout<Mesh, P, extents<4, 3>>;
  using LB = layout<Mesh, P, extents<9>>;
  const auto a = F::template distribute_tensor<LA>(global_values<double>(12));
  const auto b = F::template distribute_tensor<LB>(global_values<double>(9));
  rt::comm_counter comm;
  auto out = rt::redistribute_coalesced<rt::to<R, R>>(a, b);
  return std::make_tuple(out, comm.total(), rt::coalesced_plan<rt::to<R, R>, LA, LB>::collectives());
}

template <class Bk, class Mesh, class B, class S>
void compare_coalesced(report& rep, const B& on_b, const S& on_sim, const std::string& what) {
  // A process outside the mesh takes no part.
  const int want = Bk::template held<Mesh>().count() == 0 ? 0 : std::get<2>(on_b);
  const int ran = std::get<1>(on_b);
  rep.check(ran == want && want <= 1, what + ": " + std::to_string(want) + " collective(s) planned, " +
                                          std::to_string(ran) + " ran");
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (close_locals(rep, std::get<I>(std::get<0>(on_b)), std::get<I>(std::get<0>(on_sim)), what + " tensor " + std::to_string(I)),
     ...);
  }(std::make_index_sequence<std::tuple_size_v<std::remove_cvref_t<decltype(std::get<0>(on_b))>>>{});
}

/// The Megatron MLP (8 -> 12 -> 8, 5 samples: uneven over dp) trained two steps: FSDP × TP
/// with AdamW, or DDP (replicated parameters) with SGD and momentum. The parameters after.
template <class B, class Mesh, bool Fsdp>
auto mlp_trained() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  using PX = placements<shard<0>, replicate>;
  using Col = std::conditional_t<Fsdp, placements<shard<0, 1>, shard<0, 0>>, placements<replicate, shard<0>>>;
  using Row = std::conditional_t<Fsdp, placements<shard<0>, shard<1>>, placements<replicate, shard<1>>>;
  using RowBias = std::conditional_t<Fsdp, placements<shard<0>, replicate>, placements<replicate, replicate>>;
  auto w1 = rt::requires_grad(F::template distribute_tensor<layout<Mesh, Col, extents<12, 8>>>(global_values<double>(96)), "w1");
  auto b1 = rt::requires_grad(F::template distribute_tensor<layout<Mesh, Col, extents<12>>>(global_values<double>(12)), "b1");
  auto w2 = rt::requires_grad(F::template distribute_tensor<layout<Mesh, Row, extents<8, 12>>>(global_values<double>(96)), "w2");
  auto b2 = rt::requires_grad(F::template distribute_tensor<layout<Mesh, RowBias, extents<8>>>(global_values<double>(8)), "b2");
  auto step = [&](auto& opt) {
    const auto x = F::template distribute_tensor<layout<Mesh, PX, extents<5, 8>>>(global_values<double>(40));
    auto layer1 = [&](const auto& a, const auto& b) { return rt::relu(rt::linear(rt::as_variable(x), a, b)); };
    auto layer2 = [&](const auto& h, const auto& a, const auto& b) { return rt::add<PX>(rt::matmul_t(h, a), b); };
    if constexpr (Fsdp) {
      auto up = rt::fully_shard<0>(w1, b1);
      auto down = rt::fully_shard<0>(w2, b2);
      down.prefetch();  // NCCL: beside up's compute; elsewhere now, in order
      down.prefetch_in_backward(up);
      auto h = up.forward(layer1);
      auto y = down.forward([&](const auto& a, const auto& b) { return layer2(h, a, b); });
      rt::mean<>(rt::gelu(y)).backward();
    } else {
      auto model = rt::ddp<0, 1024>(w1, b1, w2, b2);  // two buckets
      const auto [a1, c1, a2, c2] = model.params();
      rt::mean<>(rt::gelu(layer2(layer1(a1, c1), a2, c2))).backward();
    }
    opt.step();
    opt.zero_grad();
  };
  if constexpr (Fsdp) {
    rt::adamw opt({.lr = 0.01}, w1, b1, w2, b2);
    for (int k = 0; k < 2; ++k) step(opt);
  } else {
    rt::sgd opt({.lr = 0.05, .momentum = 0.9}, w1, b1, w2, b2);
    for (int k = 0; k < 2; ++k) step(opt);
  }
  return std::make_tuple(w1.value(), b1.value(), w2.value(), b2.value());
}

/// A model of spmd::nn's modules (linear colwise, layer_norm, linear rowwise), placed by
/// parallelize with an FSDP unit per linear and the model's own (the norm), trained two AdamW
/// steps. Its parameters after.
struct nn_model {
  BOOST_HANA_DEFINE_STRUCT(nn_model, (spmd::nn::linear<8, 12, true, double>, up), (spmd::nn::layer_norm<12, double>, norm),
                           (spmd::nn::linear<12, 8, true, double>, down));
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    return get<"down">(m)(spmd::runtime::relu(get<"norm">(m)(get<"up">(m)(x))));
  }
};

template <class B, class Unnamed>
auto nn_trained() {
  using namespace spmd;
  namespace rt = spmd::runtime;
  using F = rt::factories<B>;
  // parallelize names its mesh dims: the suite's mesh, named (bound to its sizes when dynamic)
  using Mesh = typename Unnamed::template named<"dp", "tp">;
  if constexpr (!Mesh::is_static) bind_mesh<Mesh>(dims<2>{Unnamed::extent(0), Unnamed::extent(1)});
  nn_model host;
  host.up.weight.data = global_values<double>(96);
  host.up.bias.data = global_values<double>(12);
  host.down.weight.data = global_values<double>(96);
  host.down.bias.data = global_values<double>(8);
  using plan = nn::tp_plan<nn::rule<"up.*", nn::colwise>, nn::rule<"down.*", nn::rowwise>>;
  auto m = nn::parallelize<Mesh, B, nn::tensor_parallel<"tp", plan>, nn::fsdp<"dp", nn::units<"up", "down", "">>>(host);
  auto opt = std::apply([](auto&... p) { return rt::adamw({.lr = 0.01}, p...); }, nn::parameters(m));
  const auto x = F::template distribute_tensor<layout<Mesh, placements<shard<0>, replicate>, extents<5, 8>>>(
      global_values<double>(40));
  for (int k = 0; k < 2; ++k) {
    rt::mean<>(rt::gelu(m(rt::as_variable(x)))).backward();
    opt.step();
    opt.zero_grad();
  }
  return std::apply([](const auto&... p) { return std::make_tuple(p.value()...); }, nn::parameters(m));
}

template <class TB, class TS>
void compare_params(report& rep, const TB& b, const TS& s, const std::string& what) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (close_locals(rep, std::get<I>(b), std::get<I>(s), what + " " + std::to_string(I)), ...);
  }(std::make_index_sequence<std::tuple_size_v<TB>>{});
}

}  // namespace training_detail

/// Data-parallel cases on backend B against the simulation's.
template <class B, class Mesh>
void training_cases(report& rep) {
  using S = spmd::sim::backend;
  namespace td = training_detail;
  td::compare_coalesced<B, Mesh>(rep, td::coalesced_all_gather<B, Mesh>(), td::coalesced_all_gather<S, Mesh>(),
                        "coalesced all_gather");
  td::compare_coalesced<B, Mesh>(rep, td::coalesced_reduce_scatter<B, Mesh>(), td::coalesced_reduce_scatter<S, Mesh>(),
                        "coalesced reduce_scatter");
  td::compare_coalesced<B, Mesh>(rep, td::coalesced_all_reduce<B, Mesh>(), td::coalesced_all_reduce<S, Mesh>(),
                        "coalesced all_reduce");
  td::compare_params(rep, td::mlp_trained<B, Mesh, true>(), td::mlp_trained<S, Mesh, true>(),
                     "FSDP x TP MLP after 2 AdamW steps, parameter");
  td::compare_params(rep, td::mlp_trained<B, Mesh, false>(), td::mlp_trained<S, Mesh, false>(),
                     "DDP x TP MLP (two buckets) after 2 SGD steps, parameter");
  // spmd::nn over the run-time mesh only: its one instantiation runs every shape the suite
  // binds (a static mesh's would add the same code again per mesh; tests/nn has those).
  if constexpr (!Mesh::is_static)
    td::compare_params(rep, td::nn_trained<B, Mesh>(), td::nn_trained<S, Mesh>(),
                       "spmd::nn model (TP x FSDP units) after 2 AdamW steps, parameter");
}

}  // namespace suite
