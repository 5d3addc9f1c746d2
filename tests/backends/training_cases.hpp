// tests/backends/training_cases.hpp — the typed suite's data-parallel cases: coalesced
// collectives (one collective for many tensors) on backend B against the simulation's, and
// against B's own per-tensor redistributes, with the collective count asserted.
#pragma once

#include <string>
#include <tuple>

#include "spmd/runtime/coalesce.hpp"
#include "spmd/runtime/comm_counter.hpp"

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
}

}  // namespace suite
