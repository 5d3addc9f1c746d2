// tests/ops/views/propagation.cpp — what the compiler chooses for the view operators and cat
// (static_asserts on ops::resolved), the rules' dim maps, and the run-time misuse errors.
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "../common/op_test.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/cat.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace {

using namespace spmd;
using R_ = replicate;
template <int D>
using S = shard<D>;
using Psum = partial<reduce_op::sum>;

template <class Op, class Mesh, class P, index_t... E>
using resolved1 = ops::resolved<Op, float, void, layout<Mesh, P, extents<E...>>>;

template <class A, class B>
constexpr bool same = std::is_same_v<A, B>;

// transpose of S(0) -> S(1), nothing moves.
using T01 = resolved1<ops::transpose<0, 1>, mesh<4>, placements<S<0>>, 8, 3>;
static_assert(same<T01::out_placements, placements<S<1>>> && !T01::input_moves<0>);
// permute moves every shard with its dim, on a 2-d mesh too.
using P201 = resolved1<ops::permute<2, 0, 1>, mesh<2, 2>, placements<S<0>, S<2>>, 4, 3, 6>;
static_assert(same<P201::out_placements, placements<S<1>, S<0>>> && !P201::input_moves<0>);

// flatten of (8, 3) S(0) on mesh<4>: 2 rows each, flat pieces 6 = 24 / 4 — stays S(0).
using F83 = resolved1<ops::flatten<0, 1>, mesh<4>, placements<S<0>>, 8, 3>;
static_assert(same<F83::out_placements, placements<S<0>>> && !F83::input_moves<0>);
// flatten of (5, 3) S(0) on mesh<4>: rows 2, 2, 1, 0 would be 6, 6, 3, 0 flat elements where
// the output's chunks of 15 are 4, 4, 4, 3 — the flattened dim is not sharded; the input is
// gathered first.
using F53 = resolved1<ops::flatten<0, 1>, mesh<4>, placements<S<0>>, 5, 3>;
static_assert(same<F53::out_placements, placements<R_>> && F53::input_moves<0>);
static_assert(same<F53::input_placements<0>, placements<R_>>);
// flatten of (8, 3) S(1): a non-leftmost dim of the group is fixed — never relabelled; the
// input moves (here to S(0) by an all-to-all, cheaper than a gather), then flattens as above.
using F83s1 = resolved1<ops::flatten<0, 1>, mesh<4>, placements<S<1>>, 8, 3>;
static_assert(F83s1::input_moves<0> && !same<F83s1::input_placements<0>, placements<S<1>>>);
// flatten of (1, 8) S(1): the size-1 dim does not count; the group is a relabel of dim 1.
using F18 = resolved1<ops::flatten<0, 1>, mesh<4>, placements<S<1>>, 1, 8>;
static_assert(same<F18::out_placements, placements<S<0>>> && !F18::input_moves<0>);
// flatten of dims 1..2 of (5, 4, 2) S(0) on mesh<4>: dim 0 is outside the group, any shard.
using F542 = resolved1<ops::flatten<1, 2>, mesh<4>, placements<S<0>>, 5, 4, 2>;
static_assert(same<F542::out_placements, placements<S<0>>> && !F542::input_moves<0>);

// unsqueeze keeps the shards, shifted past the new dim.
using U0 = resolved1<ops::unsqueeze<0>, mesh<2, 2>, placements<S<0>, S<1>>, 4, 6>;
static_assert(same<U0::out_placements, placements<S<1>, S<2>>> && !U0::input_moves<0>);
using U1 = resolved1<ops::unsqueeze<1>, mesh<4>, placements<S<1>>, 4, 6>;
static_assert(same<U1::out_placements, placements<S<2>>>);
// squeeze shifts them back.
using Q1 = resolved1<ops::squeeze<1>, mesh<4>, placements<S<2>>, 4, 1, 6>;
static_assert(same<Q1::out_placements, placements<S<1>>> && !Q1::input_moves<0>);

// reshape (4, 6) -> (2, 2, 6): groups [4]->[2, 2] and [6]->[6]. S(0) on mesh<2> divides
// (4 / 2 and 2 / 2): stays S(0). On mesh<4>, 2 rows do not split 4 ways: gathered first.
using RS2 = resolved1<ops::reshape<2, 2, 6>, mesh<2>, placements<S<0>>, 4, 6>;
static_assert(same<RS2::out_placements, placements<S<0>>> && !RS2::input_moves<0>);
using RS4 = resolved1<ops::reshape<2, 2, 6>, mesh<4>, placements<S<0>>, 4, 6>;
static_assert(!same<RS4::out_placements, placements<S<0>>> && RS4::input_moves<0>);
// ... while the untouched group keeps its shard as a relabel: S(1) -> S(2).
using RS1 = resolved1<ops::reshape<2, 2, 6>, mesh<4>, placements<S<1>>, 4, 6>;
static_assert(same<RS1::out_placements, placements<S<2>>> && !RS1::input_moves<0>);
// (6, 4) -> (4, 6) is one group (flatten then split): S(0) needs 6 and 4 to divide.
using RG2 = resolved1<ops::reshape<4, 6>, mesh<2>, placements<S<0>>, 6, 4>;
static_assert(same<RG2::out_placements, placements<S<0>>>);
using RG3 = resolved1<ops::reshape<4, 6>, mesh<3>, placements<S<0>>, 6, 4>;
static_assert(RG3::input_moves<0> && !same<RG3::out_placements, placements<S<0>>>);

// Partials pass through every view: P(op) -> P(op).
using PT = resolved1<ops::transpose<0, 1>, mesh<4>, placements<Psum>, 8, 3>;
static_assert(same<PT::out_placements, placements<Psum>> && !PT::input_moves<0>);
using PM = resolved1<ops::flatten<0, 1>, mesh<4>, placements<partial<reduce_op::max>>, 5, 3>;
static_assert(same<PM::out_placements, placements<partial<reduce_op::max>>> && !PM::input_moves<0>);
using PR = resolved1<ops::reshape<3, 5>, mesh<2, 2>, placements<R_, partial<reduce_op::avg>>, 5, 3>;
static_assert(same<PR::out_placements, placements<R_, partial<reduce_op::avg>>> && !PR::input_moves<0>);
// An input without partials never becomes one to pass through: the rule lists P(op) only
// when the input holds it (ops/view.hpp, dim_map), so (5, 3) S(0) above was gathered to R.

// cat along a sharded dim: the cat dim is fixed, so the inputs are redistributed.
template <class P0, class P1, index_t A, index_t B>
using cat2 = ops::resolved<ops::cat<0>, float, void, layout<mesh<4>, P0, extents<A, 3>>,
                           layout<mesh<4>, P1, extents<B, 3>>>;
using C00 = cat2<placements<S<0>>, placements<S<0>>, 8, 4>;
static_assert(C00::input_moves<0> && C00::input_moves<1> && !same<C00::out_placements, placements<S<0>>>);
// ... along another dim the shard stays.
using C11 = cat2<placements<S<1>>, placements<S<1>>, 8, 4>;
static_assert(same<C11::out_placements, placements<S<1>>> && !C11::input_moves<0> && !C11::input_moves<1>);
// cat of partials with one op is that partial of the cat; mixed with R it is not.
using CPP = cat2<placements<Psum>, placements<Psum>, 8, 4>;
static_assert(same<CPP::out_placements, placements<Psum>> && !CPP::input_moves<0>);
// With P(sum) and R, the R input is never made P(sum) (that would defer a reduction no cost
// accounts for): the partial input is reduced (here reduce-scattered along the other dim,
// with the replicated input chunked to match).
using CPR = cat2<placements<Psum>, placements<R_>, 8, 4>;
static_assert(!same<CPR::out_placements, placements<Psum>> && CPR::input_moves<0>);

// The rules as dim maps.
constexpr ops::op_context ctx(shape_vec s) {
  ops::op_context c{};
  c.in_shape.push_back(s);
  return c;
}
constexpr ops::op_rule rs = ops::reshape<2, 2, 6>::rule(ctx(shape_vec{{4, 6}, 2}));
static_assert(rs.ok && rs.factors.size() == 3 && rs.factors[0].even_only && !rs.factors[1].even_only &&
              rs.factors[2].fixed && rs.partials.size() == 0);
constexpr ops::op_rule fl = ops::flatten<0, 2>::rule(ctx(shape_vec{{4, 1, 6}, 3}));
static_assert(fl.ok && fl.in[0][1] == ops::no_factor && fl.factors.size() == 2 && fl.factors[0].even_only &&
              fl.factors[1].fixed);

}  // namespace

TEST_CASE("run-time misuse throws, naming the values", "[views]") {
  using L = layout<mesh<2>, placements<replicate>, extents<dyn, 3>>;
  const std::vector<float> six(6, 1.f);
  const auto x = sim::distribute_tensor<L>(six, L(extents<dyn, 3>(2)));
  CHECK_THROWS_WITH((sim::reshape<4, 2>(x)), (Catch::Contains("[2, 3] has 6 elements") &&
                                             Catch::Contains("[4, 2] has 8")));
  CHECK_THROWS_WITH(sim::squeeze<0>(x), Catch::Contains("has extent 2, not 1"));
  using L3 = layout<mesh<2>, placements<replicate>, extents<dyn, dyn>>;
  const auto y = sim::distribute_tensor<L3>(std::vector<float>(8, 1.f), L3(extents<dyn, dyn>(2, 4)));
  CHECK_THROWS_WITH(sim::cat<0>(x, y), Catch::Contains("dim 1 differs (4 vs 3)"));
  // A static output (cat of (2, 3) and (2, dyn) along 0 is (4, 3)) is still checked.
  using L4 = layout<mesh<2>, placements<replicate>, extents<2, dyn>>;
  const auto z = sim::distribute_tensor<L4>(std::vector<float>(8, 1.f), L4(extents<2, dyn>(4)));
  using L23 = layout<mesh<2>, placements<replicate>, extents<2, 3>>;
  const auto w = sim::distribute_tensor<L23>(six);
  CHECK_THROWS_WITH(sim::cat<0>(w, z), Catch::Contains("dim 1 differs (4 vs 3)"));
  // The good cases still run.
  CHECK(sim::reshape<3, 2>(x).full_tensor() == six);
  CHECK(sim::cat<0>(x, x).shape()[0] == 4);
}
