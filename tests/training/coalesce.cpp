// tests/training/coalesce: redistribute_coalesced against the per-tensor redistributes (the
// reference: each tensor's own compile-time plan) — the same bits, one collective of the right
// kind for all of them — for all_gather, reduce_scatter and all_reduce, on 1-d and 2-d meshes,
// with uneven, empty and nested (FSDP × TP) shards, and tensors that need no change.
#include <catch2/catch.hpp>

#include <tuple>
#include <vector>

#include "../common/values.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/coalesce.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;

using test_values::values;

template <class D>
std::vector<std::vector<float>> locals_of(const D& d) {
  std::vector<std::vector<float>> out;
  for (index_t r = 0; r < D::mesh_type::size; ++r) out.push_back(d.to_local(r).data);
  return out;
}

/// Every tensor of `got` has the locals of the per-tensor redistribute of the same input.
template <class Got, class Want>
void same_locals(const Got& got, const Want& want) {
  static_assert(std::tuple_size_v<Got> == std::tuple_size_v<Want>);
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    const std::vector<std::vector<std::vector<float>>> g{locals_of(std::get<I>(got))...};
    const std::vector<std::vector<std::vector<float>>> w{locals_of(std::get<I>(want))...};
    for (std::size_t t = 0; t < g.size(); ++t) {
      INFO("tensor " << t);
      CHECK(g[t] == w[t]);
    }
  }(std::make_index_sequence<std::tuple_size_v<Got>>{});
}

/// The number of distinct buffers among a dtensor's ranks (the simulation shares equal ones).
template <class D>
int distinct(const D& d) {
  const auto& s = d.locals();
  int n = 0;
  for (index_t i = 0; i < s.ranks(); ++i) {
    bool seen = false;
    for (index_t j = 0; j < i; ++j) seen = seen || s.shares(i, j);
    n += seen ? 0 : 1;
  }
  return n;
}

}  // namespace

TEST_CASE("coalesced all_gather: FSDP's unshard over dp, uneven, empty and nested shards", "[coalesce]") {
  using M = mesh<2, 4>;
  using S0 = placements<shard<0>, replicate>;
  using R = placements<replicate, replicate>;
  using LW = layout<M, S0, extents<5, 6>>;   // 3 + 2 rows
  using LE = layout<M, S0, extents<1, 3>>;   // rank 1 of dp holds nothing
  using LV = layout<M, S0, extents<7>>;
  // Column-parallel weight under FSDP × TP: tp splits rows first, dp splits each tp block.
  using LC = layout<M, placements<shard<0, 1>, shard<0, 0>>, extents<11, 2>>;
  using CT = placements<replicate, shard<0>>;
  // Row-parallel weight: dp on rows, tp on columns.
  using LRow = layout<M, placements<shard<0>, shard<1>>, extents<6, 9>>;
  using RT = placements<replicate, shard<1>>;
  const auto w = sim::distribute_tensor<LW>(values(30, 1));
  const auto e = sim::distribute_tensor<LE>(values(3, 2));
  const auto v = sim::distribute_tensor<LV>(values(7, 3));
  const auto c = sim::distribute_tensor<LC>(values(22, 4));
  const auto rw = sim::distribute_tensor<LRow>(values(54, 5));
  using Plan = rt::coalesced_plan<rt::to<R, R, R, CT, RT>, LW, LE, LV, LC, LRow>;
  static_assert(Plan::change().kind == step_kind::all_gather && Plan::change().mesh_dims == 0b01);
  static_assert(Plan::collectives() == 1);
  sim::comm_counter comm;
  const auto got = rt::redistribute_coalesced<rt::to<R, R, R, CT, RT>>(w, e, v, c, rw);
  CHECK(comm.count(step_kind::all_gather, 0b01) == 1);
  CHECK(comm.total() == 1);
  same_locals(got, std::make_tuple(sim::redistribute<R>(w), sim::redistribute<R>(e), sim::redistribute<R>(v),
                                   sim::redistribute<CT>(c), sim::redistribute<RT>(rw)));
}

TEST_CASE("coalesced reduce_scatter: gradients P(sum) -> S(0), and P(avg)", "[coalesce]") {
  using M = mesh<4>;
  using P = placements<partial<reduce_op::sum>>;
  using S = placements<shard<0>>;
  using L1 = layout<M, P, extents<6, 5>>;
  using L2 = layout<M, P, extents<3>>;  // the last rank keeps nothing
  using L3 = layout<M, P, extents<9, 2, 2>>;
  const auto a = sim::distribute_tensor<L1>(values(30, 6));
  const auto b = sim::distribute_tensor<L2>(values(3, 7));
  const auto d = sim::distribute_tensor<L3>(values(36, 8));
  sim::comm_counter comm;
  const auto got = rt::redistribute_coalesced<rt::to<S, S, S>>(a, b, d);
  CHECK(comm.count(step_kind::reduce_scatter) == 1);
  CHECK(comm.total() == 1);
  same_locals(got, std::make_tuple(sim::redistribute<S>(a), sim::redistribute<S>(b), sim::redistribute<S>(d)));

  using PA = placements<partial<reduce_op::avg>>;
  const auto x = sim::distribute_tensor<layout<M, PA, extents<5, 3>>>(values(15, 9));
  const auto y = sim::distribute_tensor<layout<M, PA, extents<2>>>(values(2, 10));
  const auto avg = rt::redistribute_coalesced<rt::to<S, S>>(x, y);
  same_locals(avg, std::make_tuple(sim::redistribute<S>(x), sim::redistribute<S>(y)));
}

TEST_CASE("coalesced all_reduce: DDP's bucket over dp on a 2-d mesh, a tensor already there", "[coalesce]") {
  using M = mesh<2, 2>;
  using PR = placements<partial<reduce_op::sum>, replicate>;
  using PS = placements<partial<reduce_op::sum>, shard<1>>;
  using R = placements<replicate, replicate>;
  using RS = placements<replicate, shard<1>>;
  const auto a = sim::distribute_tensor<layout<M, PR, extents<4, 3>>>(values(12, 11));
  const auto b = sim::distribute_tensor<layout<M, PS, extents<3, 5>>>(values(15, 12));  // uneven on tp
  const auto done = sim::distribute_tensor<layout<M, R, extents<2>>>(values(2, 13));
  sim::comm_counter comm;
  const auto got = rt::redistribute_coalesced<rt::to<R, RS, R>>(a, b, done);
  CHECK(comm.count(step_kind::all_reduce, 0b01) == 1);
  CHECK(comm.total() == 1);
  same_locals(got, std::make_tuple(sim::redistribute<R>(a), sim::redistribute<RS>(b), done));
}

TEST_CASE("coalesced: nothing to do moves nothing", "[coalesce]") {
  using M = mesh<2>;
  using S = placements<shard<0>>;
  const auto a = sim::distribute_tensor<layout<M, S, extents<4>>>(values(4, 14));
  static_assert(rt::coalesced_plan<rt::to<S>, layout<M, S, extents<4>>>::collectives() == 0);
  sim::comm_counter comm;
  const auto [b] = rt::redistribute_coalesced<rt::to<S>>(a);
  CHECK(comm.total() == 0);
  CHECK(locals_of(b) == locals_of(a));
}

TEST_CASE("coalesced all_gather on the simulation: ranks whose gathered tensors are equal hold one block",
          "[coalesce]") {
  using M = mesh<2, 4>;
  using S0 = placements<shard<0>, replicate>;
  using R = placements<replicate, replicate>;
  using LW = layout<M, S0, extents<6, 5>>;  // FSDP over dp, replicated over tp
  using LRow = layout<M, placements<shard<0>, shard<1>>, extents<6, 8>>;
  using RT = placements<replicate, shard<1>>;
  const auto w = sim::distribute_tensor<LW>(values(30, 1));
  const auto row = sim::distribute_tensor<LRow>(values(48, 2));
  REQUIRE(distinct(w) == 2);
  // The same values in a buffer of its own on every rank, as an optimizer's in-place update
  // leaves a replicated parameter's shards.
  auto own = w;
  for (index_t r = 0; r < 8; ++r) {
    auto v = own.local(r);
    v.data()[0] = v.data()[0];
  }
  REQUIRE(distinct(own) == 8);
  // Rank 5's shard (dp 1, tp 1) differs: tp column 1 gathers another tensor.
  auto odd = w;
  odd.local(5).data()[1] += 1.0f;
  const auto got = rt::redistribute_coalesced<rt::to<R, RT, R, R>>(w, row, own, odd);
  same_locals(got, std::make_tuple(sim::redistribute<R>(w), sim::redistribute<RT>(row), sim::redistribute<R>(own),
                                   sim::redistribute<R>(odd)));
  CHECK(distinct(std::get<0>(got)) == 1);
  CHECK(distinct(std::get<1>(got)) == 4);  // one per tp column
  CHECK(distinct(std::get<2>(got)) == 1);  // equal bits in buffers of their own: one block
  CHECK(distinct(std::get<3>(got)) == 2);  // tp column 1 and the rest
  // A write to one rank's gathered tensor is that rank's only.
  auto g0 = std::get<0>(got);
  auto before = locals_of(g0);
  g0.local(3).data()[2] = 99.0f;
  before[3][2] = 99.0f;
  CHECK(locals_of(g0) == before);
}
