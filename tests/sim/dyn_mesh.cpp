// tests/sim/dyn_mesh.cpp — meshes whose sizes are given at run time (spmd::dyn): binding and
// its errors; redistributes over one instantiation per layout pair, swept over 1-d sizes
// 1-8 and 16 and every 2-d shape up to 4x4, against
//   - an obviously-correct reference: each rank's block cut from the global tensor by the
//     chunk rule written out here (torch.chunk's: ceil(n / size) rows a rank), and
//   - the static mesh of the same sizes: the same plan (steps, collectives, bytes), the same
//     bits on every rank, the same collective counts.
#include <cstdint>
#include <tuple>
#include <utility>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/plan/dynamic_plan.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/matmul.hpp"
#include "spmd/runtime/ops/reduction.hpp"

namespace {

using namespace spmd;
namespace sim = spmd::sim;

using D1 = mesh<dyn>;
using D2 = mesh<dyn, dyn>;
using E = extents<7, 5>;

std::vector<float> values(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.25f - 3.0f;
  return v;
}

/// torch.chunk's piece `r` of `n` over `len`: [begin, end).
std::pair<index_t, index_t> chunk_of(index_t len, index_t n, index_t r) {
  const index_t c = (len + n - 1) / n;
  const index_t b = std::min(len, r * c), e = std::min(len, (r + 1) * c);
  return {b, e};
}

/// Rank r's local of a 7 x 5 tensor `g` sharded on tensor dim `d` over n ranks (d < 0: whole).
std::vector<float> block_of(const std::vector<float>& g, int d, index_t n, index_t r) {
  index_t r0 = 0, r1 = 7, c0 = 0, c1 = 5;
  if (d == 0) std::tie(r0, r1) = chunk_of(7, n, r);
  if (d == 1) std::tie(c0, c1) = chunk_of(5, n, r);
  std::vector<float> out;
  for (index_t i = r0; i < r1; ++i)
    for (index_t j = c0; j < c1; ++j) out.push_back(g[static_cast<std::size_t>(i * 5 + j)]);
  return out;
}

template <class D>
std::vector<std::vector<float>> locals_of(const D& x) {
  std::vector<std::vector<float>> out;
  for (index_t r = 0; r < D::mesh_type::size; ++r) out.push_back(x.to_local(r).data);
  return out;
}

/// A static mesh's plan equals a dynamic one's: the same steps (kinds, mesh dims, states) and cost.
void same_plan(const plan& a, const plan& b) {
  REQUIRE(a.steps.size() == b.steps.size());
  CHECK(a.collectives() == b.collectives());
  CHECK(a.cost_us == b.cost_us);
  for (int i = 0; i < a.steps.size(); ++i) CHECK(a.steps[i] == b.steps[i]);
}

/// x (a dynamic mesh's) and y (the static mesh of the same sizes), both redistributed to P:
/// the same plan, locals and collective counts.
template <class P, class X, class Y>
void same_as_static(const X& x, const Y& y) {
  int nx = 0;
  std::int64_t bx = 0;
  const auto a = [&] {
    sim::comm_counter c;
    auto out = sim::redistribute<P>(x);
    nx = c.total();
    bx = c.bytes();
    return out;
  }();
  sim::comm_counter cy;
  const auto b = sim::redistribute<P>(y);
  CHECK(cy.total() == nx);
  CHECK(cy.bytes() == bx);
  CHECK(locals_of(a) == locals_of(b));
  using LX = typename X::layout_type;
  using LY = typename Y::layout_type;
  same_plan(dynamic_plan_of<LX, typename decltype(a)::layout_type, float>::value(),
            plan_of<LY, typename decltype(b)::layout_type, float>::value());
}

template <index_t N>
void sweep_1d() {
  INFO("mesh " << N);
  bind_mesh<D1>(N);
  REQUIRE(D1::size == N);
  const std::vector<float> g = values(35);
  using S0 = placements<shard<0>>;
  using S1 = placements<shard<1>>;
  using R = placements<replicate>;
  using PS = placements<partial<reduce_op::sum>>;
  const auto x0 = sim::distribute_tensor<layout<D1, S0, E>>(g);
  for (index_t r = 0; r < N; ++r) CHECK(x0.to_local(r).data == block_of(g, 0, N, r));
  const auto x1 = sim::redistribute<S1>(x0);
  const auto xr = sim::redistribute<R>(x1);
  const auto back = sim::redistribute<S0>(xr);
  for (index_t r = 0; r < N; ++r) {
    CHECK(x1.to_local(r).data == block_of(g, 1, N, r));
    CHECK(xr.to_local(r).data == g);
    CHECK(back.to_local(r).data == block_of(g, 0, N, r));
  }
  const auto p = sim::distribute_tensor<layout<D1, PS, E>>(g);
  CHECK(sim::redistribute<R>(p).full_tensor() == g);
  // The static mesh of the same size: the same plan, bits and counts.
  using M = mesh<N>;
  const auto y0 = sim::distribute_tensor<layout<M, S0, E>>(g);
  same_as_static<S1>(x0, y0);
  same_as_static<R>(x0, y0);
  same_as_static<S0>(sim::redistribute<S1>(x0), sim::redistribute<S1>(y0));
  same_as_static<S0>(p, sim::distribute_tensor<layout<M, PS, E>>(g));
  same_as_static<R>(p, sim::distribute_tensor<layout<M, PS, E>>(g));
}

template <index_t A, index_t B>
void sweep_2d() {
  INFO("mesh " << A << "x" << B);
  bind_mesh<D2>(dims<2>{A, B}, A * B);
  REQUIRE(D2::size == A * B);
  const std::vector<float> g = values(35);
  using SS = placements<shard<0>, shard<1>>;
  using S00 = placements<shard<0>, shard<0>>;
  using RS = placements<replicate, shard<1>>;
  using RR = placements<replicate, replicate>;
  using PR = placements<partial<reduce_op::sum>, replicate>;
  using M = mesh<A, B>;
  const auto x = sim::distribute_tensor<layout<D2, SS, E>>(g);
  const auto y = sim::distribute_tensor<layout<M, SS, E>>(g);
  CHECK(sim::redistribute<RR>(x).full_tensor() == g);
  same_as_static<RR>(x, y);
  same_as_static<S00>(x, y);
  same_as_static<RS>(x, y);
  const auto px = sim::distribute_tensor<layout<D2, PR, E>>(g);
  const auto py = sim::distribute_tensor<layout<M, PR, E>>(g);
  same_as_static<RR>(px, py);
  same_as_static<SS>(px, py);
}

/// Operators over the dynamic 1-d mesh bound to N against mesh<N>: the same placements (a
/// type, chosen as for a mesh larger than 1; N = 1 included, see docs/design.md) and the same
/// bits on every rank.
template <index_t N>
void ops_1d() {
  INFO("mesh " << N);
  bind_mesh<D1>(N);
  using M = mesh<N>;
  const std::vector<float> g = values(35), b = values(5), w = values(20);
  using S0 = placements<shard<0>>;
  using R = placements<replicate>;
  using S1 = placements<shard<1>>;
  const auto run = [&]<class Mesh>() {
    const auto x = sim::distribute_tensor<layout<Mesh, S0, E>>(g);
    const auto bias = sim::distribute_tensor<layout<Mesh, R, extents<5>>>(b);
    const auto wt = sim::distribute_tensor<layout<Mesh, S1, extents<5, 4>>>(w);
    const auto y = sim::relu(x + bias);        // S(0)
    const auto z = sim::matmul(y, wt);          // the weight gathered or the rows kept: the rule's choice
    const auto s = sim::sum<1>(z);              // a row sum
    return std::make_tuple(locals_of(y), locals_of(z), s.full_tensor(),
                           typename decltype(z)::placements_type{}, typename decltype(s)::placements_type{});
  };
  const auto [yd, zd, sd, pzd, psd] = run.template operator()<D1>();
  const auto [ys, zs, ss, pzs, pss] = run.template operator()<M>();
  CHECK(yd == ys);
  CHECK(zd == zs);
  CHECK(sd == ss);
  if constexpr (N > 1) {
    static_assert(std::is_same_v<decltype(pzd), decltype(pzs)>);
    static_assert(std::is_same_v<decltype(psd), decltype(pss)>);
  }
}

}  // namespace

TEST_CASE("a dynamic mesh: bound from the world size or a shape, every bad size named", "[dyn]") {
  using U = mesh<dyn, 4>::named<"dp", "tp">;
  static_assert(!U::is_static && mesh<2, 4>::is_static);
  static_assert(U::nominal_shape_vec() == mesh_shape_vec{{nominal_dyn_size, 4}, 2});
  static_assert(layout<U, placements<shard<0>, replicate>, E>::nominal_spec().mesh[1] == 4);
  REQUIRE_THROWS_WITH(U::shape_vec(), Catch::Contains("mesh<?x4>: its dynamic sizes are not bound yet"));
  REQUIRE_THROWS_WITH(bind_mesh<U>(6), "spmd::bind_mesh: a world of 6 ranks does not fill mesh<?x4>: its static "
                                       "sizes hold 4 ranks, which must divide the world size");
  REQUIRE_THROWS_WITH(bind_mesh<U>(dims<2>{0, 4}), Catch::Contains("dim 0 has size 0, not >= 1"));
  REQUIRE_THROWS_WITH(bind_mesh<U>(dims<2>{2, 2}), Catch::Contains("dim 1 is 4 in its type"));
  REQUIRE_THROWS_WITH(bind_mesh<U>(dims<2>{2, 4}, 6), "spmd::bind_mesh: the shape 2x4 holds 8 ranks, the world has 6");
  CHECK_FALSE(U::bound());  // a refused shape leaves the mesh unbound
  bind_mesh<U>(12);
  CHECK(U::shape() == dims<2>{3, 4});
  CHECK(U::size == 12);
  CHECK(U::coord_of(7).value == dims<2>{1, 3});
  CHECK(U::group_size(U::mask<"dp">()) == 3);
  const auto g0 = U::generation();
  bind_mesh<U>(dims<2>{2, 4}, 8);
  CHECK(U::generation() != g0);
  CHECK(layout<U, placements<shard<0>, replicate>, E>::spec().mesh == mesh_shape_vec{{2, 4}, 2});
}

TEST_CASE("redistributes over a dynamic 1-d mesh of 1-8 and 16 ranks: one instantiation", "[dyn]") {
  sweep_1d<1>();
  sweep_1d<2>();
  sweep_1d<3>();
  sweep_1d<4>();
  sweep_1d<5>();
  sweep_1d<6>();
  sweep_1d<7>();
  sweep_1d<8>();
  sweep_1d<16>();
}

TEST_CASE("redistributes over a dynamic 2-d mesh, every shape up to 4x4: one instantiation", "[dyn]") {
  [&]<index_t... I>(std::integer_sequence<index_t, I...>) {
    (sweep_2d<I / 4 + 1, I % 4 + 1>(), ...);
  }(std::make_integer_sequence<index_t, 16>{});
}

TEST_CASE("operators over a dynamic 1-d mesh: the static mesh's placements and bits", "[dyn]") {
  ops_1d<1>();
  ops_1d<2>();
  ops_1d<3>();
  ops_1d<4>();
  ops_1d<5>();
  ops_1d<7>();
  ops_1d<8>();
  ops_1d<16>();
}

namespace {

/// Rank r's block of the n x n tensor `g` split by columns over `ranks` (torch.chunk's rule).
std::vector<float> columns_of(const std::vector<float>& g, index_t n, index_t ranks, index_t r) {
  const auto [c0, c1] = chunk_of(n, ranks, r);
  std::vector<float> out;
  for (index_t i = 0; i < n; ++i)
    for (index_t j = c0; j < c1; ++j) out.push_back(g[static_cast<std::size_t>(i * n + j)]);
  return out;
}

/// An all_to_all S(0) -> S(1) of an N x N f32 tensor over mesh<dyn> bound to 8: the compact
/// form of its one step (execute.hpp's compact_of), and every rank's block.
template <index_t N>
sim::detail::compact_step all_to_all_of_8() {
  bind_mesh<D1>(8);
  using L = layout<D1, placements<shard<0>>, extents<N, N>>;
  using LT = layout<D1, placements<shard<1>>, extents<N, N>>;
  const plan& p = dynamic_plan_of<L, LT, float>::value();
  REQUIRE(p.steps.size() == 1);
  const auto scheds = build_schedules(p, extents<N, N>{}.to_vec(), "test");
  const std::vector<float> g = values(static_cast<std::size_t>(N * N));
  const auto y = sim::redistribute<placements<shard<1>>>(sim::distribute_tensor<L>(g));
  for (index_t r = 0; r < 8; ++r) CHECK(y.to_local(r).data == columns_of(g, N, 8, r));
  return sim::detail::compact_of(scheds[0]);
}

}  // namespace

TEST_CASE("a run-time plan's small copy steps run from their compact form", "[dyn]") {
  // 32 x 32 over 8: 64 pieces of 4 rows of 4 (each rank's 4 x 32 block cut into 8)
  const auto even = all_to_all_of_8<32>();
  CHECK(even.run == 4);
  CHECK(even.rows == 4);
  CHECK(even.ops.size() == 64);
  CHECK(even.elems == 32 * 32);
  // 30 x 30 over 8: blocks of 4 and 2 rows and columns, runs of two lengths: no compact form
  // (the ops run one by one), the same values
  CHECK(all_to_all_of_8<30>().run == 0);
  // a reduction has none either
  using LP = layout<D1, placements<partial<reduce_op::sum>>, extents<32, 32>>;
  const plan& p = dynamic_plan_of<LP, layout<D1, placements<replicate>, extents<32, 32>>, float>::value();
  for (const step_schedule& s : build_schedules(p, extents<32, 32>{}.to_vec(), "test"))
    CHECK(sim::detail::compact_of(s).run == 0);
}
