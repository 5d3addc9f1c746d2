// tests/training/dyn_mesh: data parallelism over a (dp, tp) mesh whose sizes are given at run
// time (spmd::dyn), one instantiation bound to every 2-d shape up to 4x4:
//   - FSDP x TP with AdamW and DDP x TP (buckets under a small cap) with SGD, two steps of a
//     Megatron MLP, against one device (mesh<1, 1>: f64, 1e-12) and, on the shapes listed
//     below, against the static mesh of the same sizes: bit for bit, and on 2x2 (where the
//     nominal sizes the compiler decides with are the sizes) the same collectives of every
//     kind in every step (elsewhere an operator may choose another compute layout for the
//     static mesh's sizes: docs/design.md);
//   - the three coalesced collectives (all_gather with uneven, empty and nested shards,
//     reduce_scatter, all_reduce): the same bits and collective counts as the static mesh.
#include <catch2/catch.hpp>

#include <array>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/coalesce.hpp"
#include "spmd/runtime/data_parallel/ddp.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"
#include "spmd/runtime/optim.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;
using D2 = mesh<dyn, dyn>;

std::vector<double> values(std::size_t n, double scale) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * (static_cast<double>((i * 7) % 11) - 5.0);
  return v;
}

/// Collectives of one step, by kind (all_gather, all_reduce, reduce_scatter, all_to_all).
using counts = std::array<int, 4>;
counts counted(const sim::comm_counter& c) {
  return {c.count(step_kind::all_gather), c.count(step_kind::all_reduce), c.count(step_kind::reduce_scatter),
          c.count(step_kind::all_to_all)};
}

struct trained {
  std::vector<std::vector<double>> params;  // w1, b1, w2, b2 after two steps
  std::vector<counts> steps;                // collectives of each step
};

/// The Megatron MLP (8 -> 12 -> 8, 5 samples: uneven over dp) trained two steps on Mesh:
/// FSDP x TP with AdamW, or DDP x TP with SGD and momentum, buckets of at most 512 bytes.
template <class Mesh, bool Fsdp>
trained mlp_trained() {
  using PX = placements<shard<0>, replicate>;
  using Col = std::conditional_t<Fsdp, placements<shard<0, 1>, shard<0, 0>>, placements<replicate, shard<0>>>;
  using Row = std::conditional_t<Fsdp, placements<shard<0>, shard<1>>, placements<replicate, shard<1>>>;
  using RowBias = std::conditional_t<Fsdp, placements<shard<0>, replicate>, placements<replicate, replicate>>;
  auto w1 = rt::requires_grad(sim::distribute_tensor<layout<Mesh, Col, extents<12, 8>>>(values(96, 0.05)), "w1");
  auto b1 = rt::requires_grad(sim::distribute_tensor<layout<Mesh, Col, extents<12>>>(values(12, 0.1)), "b1");
  auto w2 = rt::requires_grad(sim::distribute_tensor<layout<Mesh, Row, extents<8, 12>>>(values(96, 0.04)), "w2");
  auto b2 = rt::requires_grad(sim::distribute_tensor<layout<Mesh, RowBias, extents<8>>>(values(8, 0.1)), "b2");
  trained r;
  auto step = [&](auto& opt, int k) {
    const auto x = sim::distribute_tensor<layout<Mesh, PX, extents<5, 8>>>(values(40, 0.2 + 0.1 * k));
    auto layer1 = [&](const auto& a, const auto& b) { return rt::relu(rt::linear(rt::as_variable(x), a, b)); };
    auto layer2 = [&](const auto& h, const auto& a, const auto& b) { return rt::add<PX>(rt::matmul_t(h, a), b); };
    sim::comm_counter comm;
    if constexpr (Fsdp) {
      auto up = rt::fully_shard<0>(w1, b1);
      auto down = rt::fully_shard<0>(w2, b2);
      auto h = up.forward(layer1);
      auto y = down.forward([&](const auto& a, const auto& b) { return layer2(h, a, b); });
      rt::mean<>(rt::gelu(y)).backward();
    } else {
      auto model = rt::ddp<0, 512>(w1, b1, w2, b2);
      const auto [a1, c1, a2, c2] = model.params();
      rt::mean<>(rt::gelu(layer2(layer1(a1, c1), a2, c2))).backward();
    }
    r.steps.push_back(counted(comm));
    opt.step();
    opt.zero_grad();
  };
  if constexpr (Fsdp) {
    rt::adamw opt({.lr = 0.01}, w1, b1, w2, b2);
    for (int k = 0; k < 2; ++k) step(opt, k);
  } else {
    rt::sgd opt({.lr = 0.05, .momentum = 0.9}, w1, b1, w2, b2);
    for (int k = 0; k < 2; ++k) step(opt, k);
  }
  r.params = {w1.full_tensor(), b1.full_tensor(), w2.full_tensor(), b2.full_tensor()};
  return r;
}

/// The coalesced collectives of training_cases (tests/backends): outputs as full tensors, and
/// the collectives each ran.
template <class Mesh>
std::pair<std::vector<std::vector<float>>, std::vector<int>> coalesced() {
  using S0 = placements<shard<0>, replicate>;
  using R = placements<replicate, replicate>;
  std::vector<std::vector<float>> out;
  std::vector<int> ran;
  auto full = [&](const auto& t) { std::apply([&](const auto&... x) { (out.push_back(x.full_tensor()), ...); }, t); };
  const auto f = [](std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f - 2.0f;
    return v;
  };
  {
    const auto w = sim::distribute_tensor<layout<Mesh, S0, extents<5, 6>>>(f(30));
    const auto e = sim::distribute_tensor<layout<Mesh, S0, extents<1, 3>>>(f(3));
    const auto c = sim::distribute_tensor<layout<Mesh, placements<shard<0, 1>, shard<0, 0>>, extents<11, 2>>>(f(22));
    const auto rw = sim::distribute_tensor<layout<Mesh, placements<shard<0>, shard<1>>, extents<6, 9>>>(f(54));
    sim::comm_counter comm;
    full(rt::redistribute_coalesced<rt::to<R, R, placements<replicate, shard<0>>, placements<replicate, shard<1>>>>(w, e, c, rw));
    ran.push_back(comm.total());
  }
  {
    using P = placements<partial<reduce_op::sum>, shard<1>>;
    using S = placements<shard<0>, shard<1>>;
    const auto a = sim::distribute_tensor<layout<Mesh, P, extents<7, 5>>>(f(35));
    const auto b = sim::distribute_tensor<layout<Mesh, P, extents<1, 3>>>(f(3));
    sim::comm_counter comm;
    full(rt::redistribute_coalesced<rt::to<S, S>>(a, b));
    ran.push_back(comm.total());
  }
  {
    using P = placements<partial<reduce_op::sum>, replicate>;
    const auto a = sim::distribute_tensor<layout<Mesh, P, extents<4, 3>>>(f(12));
    const auto b = sim::distribute_tensor<layout<Mesh, P, extents<9>>>(f(9));
    sim::comm_counter comm;
    full(rt::redistribute_coalesced<rt::to<R, R>>(a, b));
    ran.push_back(comm.total());
  }
  return {out, ran};
}

void close_to(const trained& a, const trained& ref) {
  REQUIRE(a.params.size() == ref.params.size());
  for (std::size_t p = 0; p < a.params.size(); ++p) {
    REQUIRE(a.params[p].size() == ref.params[p].size());
    for (std::size_t i = 0; i < a.params[p].size(); ++i) CHECK(a.params[p][i] == Approx(ref.params[p][i]).margin(1e-12));
  }
}

/// Mesh<A, B>'s training against the dynamic mesh bound to A x B: bits and counts.
template <index_t A, index_t B>
void against_static() {
  INFO("mesh " << A << "x" << B);
  bind_mesh<D2>(dims<2>{A, B}, A * B);
  using M = mesh<A, B>;
  for (const bool fsdp : {true, false}) {
    INFO((fsdp ? "FSDP" : "DDP"));
    const trained d = fsdp ? mlp_trained<D2, true>() : mlp_trained<D2, false>();
    const trained s = fsdp ? mlp_trained<M, true>() : mlp_trained<M, false>();
    CHECK(d.params == s.params);
    if (A == nominal_dyn_size && B == nominal_dyn_size) CHECK(d.steps == s.steps);
  }
  const auto [dv, dn] = coalesced<D2>();
  const auto [sv, sn] = coalesced<M>();
  CHECK(dv == sv);
  CHECK(dn == sn);
}

}  // namespace

TEST_CASE("FSDP and DDP over a dynamic 2-d mesh, every shape up to 4x4, against one device", "[dyn]") {
  using One = mesh<1, 1>;
  const trained fsdp_ref = mlp_trained<One, true>();
  const trained ddp_ref = mlp_trained<One, false>();
  for (index_t a = 1; a <= 4; ++a)
    for (index_t b = 1; b <= 4; ++b) {
      INFO("mesh " << a << "x" << b);
      bind_mesh<D2>(dims<2>{a, b}, a * b);
      const trained f = mlp_trained<D2, true>();
      close_to(f, fsdp_ref);
      const trained d = mlp_trained<D2, false>();
      close_to(d, ddp_ref);
      // FSDP: a gather per unit forward and backward, a reduce_scatter per unit, when dp > 1.
      CHECK(f.steps[1][0] == (a > 1 ? 4 : 0));
      CHECK(f.steps[1][2] == (a > 1 ? 2 : 0));
      CHECK(d.steps[1][0] == 0);
      CHECK(d.steps[1][2] == 0);
    }
}

TEST_CASE("FSDP, DDP and coalesced collectives over a dynamic mesh: the static mesh's bits and counts", "[dyn]") {
  against_static<1, 1>();
  against_static<1, 3>();
  against_static<2, 1>();
  against_static<2, 2>();
  against_static<3, 2>();
  against_static<2, 4>();
  against_static<4, 4>();
}
