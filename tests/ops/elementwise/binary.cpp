// tests/ops/elementwise/binary: add, sub, mul, div, maximum, minimum (and + - * /) on two
// dtensors, same shape and broadcast, over placement pairs on 1-d meshes (even and uneven)
// and a 2-d mesh, against one device in double; the compiler's choices, including the Partial
// pass-throughs and a pair that must be redistributed; run-time shape errors.
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "ew_test.hpp"

namespace {

using namespace spmd;
using namespace ew_test;

struct add_case {
  static auto run(const auto& x, const auto& y) { return x + y; }
  static double ref(double a, double b) { return a + b; }
};
struct sub_case {
  static auto run(const auto& x, const auto& y) { return x - y; }
  static double ref(double a, double b) { return a - b; }
};
struct mul_case {
  static auto run(const auto& x, const auto& y) { return x * y; }
  static double ref(double a, double b) { return a * b; }
};
struct div_case {
  static auto run(const auto& x, const auto& y) { return x / y; }
  static double ref(double a, double b) { return a / b; }
};
struct maximum_case {
  static auto run(const auto& x, const auto& y) { return sim::maximum(x, y); }
  static double ref(double a, double b) { return a > b ? a : b; }
};
struct minimum_case {
  static auto run(const auto& x, const auto& y) { return sim::minimum(x, y); }
  static double ref(double a, double b) { return a < b ? a : b; }
};

template <class X, class Y>
struct pair_of {
  using x = X;
  using y = Y;
};

/// Case on x (shape SX) and y (shape SY) for every pair of placement lists.
template <class Case, class Mesh, class T, class SX, class SY, class... Pairs>
void sweep(const host_tensor<T>& a, const host_tensor<T>& b, double tol) {
  const auto want = map2(widen(a), widen(b), Case::ref);
  each<Pairs...>([&]<class PP>() {
    using PX = typename PP::x;
    using PY = typename PP::y;
    INFO("mesh " << Mesh::size << " x " << op_test::placements_text<PX>() << " y "
                 << op_test::placements_text<PY>());
    const auto x = sim::distribute_tensor<layout<Mesh, PX, SX>>(a.data);
    const auto y = sim::distribute_tensor<layout<Mesh, PY, SY>>(b.data);
    op_test::check_close(Case::run(x, y), want, tol);
  });
}

template <class A, class B>
using p1 = pair_of<placements<A>, placements<B>>;

/// The pairs every op is run on (1-d mesh): sharded alike, sharded differently (a
/// redistribution), replicated with sharded, and Partial on one or both sides, whether the
/// op passes that Partial or not.
template <class Case, class Mesh, index_t M, index_t N>
void sweep_pairs(double lo_y, unsigned seed) {
  const auto a = op_test::random<float>({M, N}, seed);
  const auto b = op_test::random<float>({M, N}, seed + 1, lo_y, 2);
  sweep<Case, Mesh, float, extents<M, N>, extents<M, N>, p1<shard<0>, shard<0>>, p1<shard<0>, shard<1>>,
        p1<replicate, shard<1>>, p1<psum, psum>, p1<psum, replicate>, p1<replicate, psum>, p1<pavg, pavg>,
        p1<pavg, replicate>, p1<pmax, replicate>, p1<replicate, pmax>, p1<pmax, pmax>, p1<pmin, replicate>,
        p1<replicate, pmin>, p1<pmin, pmin>, p1<psum, shard<1>>>(a, b, 1e-6);
}

template <class Case>
void sweep_op(double lo_y = -2) {
  sweep_pairs<Case, mesh<4>, 8, 4>(lo_y, 1);  // even
  sweep_pairs<Case, mesh<3>, 5, 7>(lo_y, 3);  // uneven
  // 2-d: representative pairs.
  using M = mesh<2, 3>;
  const auto a = op_test::random<float>({4, 5}, 5), b = op_test::random<float>({4, 5}, 6, lo_y, 2);
  sweep<Case, M, float, extents<4, 5>, extents<4, 5>,
        pair_of<placements<shard<0>, shard<1>>, placements<shard<0>, shard<1>>>,
        pair_of<placements<shard<0>, shard<1>>, placements<shard<1>, shard<0>>>,
        pair_of<placements<psum, shard<0>>, placements<psum, shard<0>>>,
        pair_of<placements<pmax, replicate>, placements<replicate, replicate>>,
        pair_of<placements<replicate, pmin>, placements<shard<1>, replicate>>>(a, b, 1e-6);
}

}  // namespace

TEST_CASE("binary ops over placement pairs", "[elementwise]") {
  sweep_op<add_case>();
  sweep_op<sub_case>();
  sweep_op<mul_case>();
  sweep_op<div_case>(0.5);  // denominators in [0.5, 2)
  sweep_op<maximum_case>();
  sweep_op<minimum_case>();
}

TEST_CASE("add: every placement pair on a 1-d mesh", "[elementwise]") {
  const auto a = op_test::random<float>({5, 7}, 7), b = op_test::random<float>({5, 7}, 8);
  const auto want = map2(widen(a), widen(b), add_case::ref);
  op_test::for_each_placements<mesh<3>, 2, true>([&]<class PX>() {
    op_test::for_each_placements<mesh<3>, 2, true>([&]<class PY>() {
      INFO("x " << op_test::placements_text<PX>() << " y " << op_test::placements_text<PY>());
      const auto x = sim::distribute_tensor<layout<mesh<3>, PX, extents<5, 7>>>(a.data);
      const auto y = sim::distribute_tensor<layout<mesh<3>, PY, extents<5, 7>>>(b.data);
      op_test::check_close(x + y, want, 1e-6);
    });
  });
}

TEST_CASE("broadcasting", "[elementwise]") {
  const auto x = op_test::random<float>({6, 4}, 11);
  const auto row = op_test::random<float>({4}, 12);      // (4): a bias
  const auto col = op_test::random<float>({6, 1}, 13);   // (6, 1): stretched along dim 1
  const auto tall = op_test::random<float>({3, 1, 4}, 14);  // (3, 1, 4) with (6, 4): (3, 6, 4)
  using M = mesh<4>;
  using E = extents<6, 4>;
  sweep<add_case, M, float, E, extents<4>, p1<replicate, replicate>, p1<shard<0>, replicate>,
        p1<shard<1>, replicate>, p1<shard<1>, shard<0>>, p1<psum, psum>, p1<pmax, replicate>,
        p1<psum, replicate>>(x, row, 1e-6);
  sweep<mul_case, M, float, E, extents<6, 1>, p1<replicate, replicate>, p1<shard<0>, shard<0>>,
        p1<shard<1>, replicate>, p1<shard<1>, shard<0>>, p1<psum, replicate>, p1<replicate, psum>>(x, col, 1e-6);
  sweep<maximum_case, M, float, extents<3, 1, 4>, E, p1<shard<0>, shard<1>>, p1<shard<2>, shard<0>>,
        p1<pmax, pmax>, p1<replicate, pmax>>(tall, x, 1e-6);
  // The scalar-like operand first: (4) - (6, 4), and a 0-d tensor with a matrix.
  sweep<sub_case, M, float, extents<4>, E, p1<shard<0>, shard<1>>, p1<replicate, pmax>>(row, x, 1e-6);
  const host_tensor<float> zero_d{{}, {0.75f}};
  sweep<div_case, mesh<2, 2>, float, E, extents<>,
        pair_of<placements<shard<0>, shard<1>>, placements<replicate, replicate>>,
        pair_of<placements<psum, shard<1>>, placements<replicate, replicate>>>(x, zero_d, 1e-6);
}

TEST_CASE("other element types", "[elementwise]") {
  using M = mesh<3>;
  using E = extents<5, 7>;
  const auto ad = op_test::random<double>({5, 7}, 21), bd = op_test::random<double>({5, 7}, 22);
  sweep<mul_case, M, double, E, E, p1<psum, replicate>, p1<shard<1>, shard<0>>>(ad, bd, 1e-12);
  const auto ah = op_test::random<bfloat16>({5, 7}, 23), bh = op_test::random<bfloat16>({5, 7}, 24, 0.5, 2);
  sweep<div_case, M, bfloat16, E, E, p1<psum, replicate>, p1<shard<0>, shard<1>>>(ah, bh, 1e-2);
  sweep<add_case, M, bfloat16, E, E, p1<pmax, replicate>>(ah, bh, 1e-2);
  const auto ai = op_test::random<std::int32_t>({5, 7}, 25, -50, 50);
  const auto bi = op_test::random<std::int32_t>({5, 7}, 26, -50, 50);
  sweep<sub_case, M, std::int32_t, E, E, p1<psum, psum>, p1<shard<0>, shard<1>>>(ai, bi, 0);
  sweep<maximum_case, M, std::int32_t, E, E, p1<pmax, replicate>, p1<replicate, shard<0>>>(ai, bi, 0);
  const auto al = op_test::random<std::int64_t>({5, 7}, 27, -50, 50);
  const auto bl = op_test::random<std::int64_t>({5, 7}, 28, -50, 50);
  sweep<mul_case, M, std::int64_t, E, E, p1<replicate, psum>, p1<shard<1>, shard<1>>>(al, bl, 0);
  sweep<minimum_case, M, std::int64_t, E, E, p1<pmin, pmin>>(al, bl, 0);
}

// What the compiler chose.
namespace {
template <class Case, class PX, class SX, class PY, class SY, class Mesh = mesh<4>>
using out_of = placements_of<decltype(Case::run(std::declval<const sim::dtensor<float, layout<Mesh, PX, SX>>&>(),
                                                std::declval<const sim::dtensor<float, layout<Mesh, PY, SY>>&>()))>;
using E48 = extents<4, 8>;
template <class P>
using pl = placements<P>;
static_assert(std::is_same_v<out_of<add_case, pl<shard<0>>, E48, pl<shard<0>>, E48>, pl<shard<0>>>,
              "x S(0) + y S(0) -> S(0)");
static_assert(std::is_same_v<out_of<add_case, pl<shard<1>>, E48, pl<replicate>, extents<8>>, pl<shard<1>>>,
              "x (4, 8) S(1) + b (8) R -> S(1)");
static_assert(std::is_same_v<out_of<add_case, pl<shard<0>>, extents<4, 8>, pl<replicate>, extents<4, 1>>,
                             pl<shard<0>>>,
              "a (4, 1) column broadcasts along dim 1");
static_assert(std::is_same_v<out_of<add_case, pl<psum>, E48, pl<psum>, E48>, pl<psum>>);
static_assert(std::is_same_v<out_of<sub_case, pl<pavg>, E48, pl<pavg>, E48>, pl<pavg>>);
static_assert(std::is_same_v<out_of<add_case, pl<replicate>, E48, pl<pmax>, E48>, pl<pmax>>);
static_assert(std::is_same_v<out_of<sub_case, pl<replicate>, E48, pl<pmax>, E48>, pl<pmin>>, "R - P(max) -> P(min)");
static_assert(std::is_same_v<out_of<sub_case, pl<pmin>, E48, pl<replicate>, E48>, pl<pmin>>);
static_assert(std::is_same_v<out_of<mul_case, pl<replicate>, E48, pl<psum>, E48>, pl<psum>>);
static_assert(std::is_same_v<out_of<div_case, pl<pavg>, E48, pl<replicate>, E48>, pl<pavg>>);
static_assert(std::is_same_v<out_of<maximum_case, pl<pmax>, E48, pl<pmax>, E48>, pl<pmax>>);
static_assert(std::is_same_v<out_of<maximum_case, pl<replicate>, E48, pl<pmax>, E48>, pl<pmax>>);
static_assert(std::is_same_v<out_of<minimum_case, pl<pmin>, E48, pl<replicate>, E48>, pl<pmin>>);
// x S(0) + y S(1): no candidate takes both as they are, so one input is redistributed (the
// sweeps above check the values).
using add_01 = ops::resolved<ops::binary<ops::add_fn>, float, void, layout<mesh<4>, pl<shard<0>>, E48>,
                             layout<mesh<4>, pl<shard<1>>, E48>>;
static_assert(add_01::result.costed && (add_01::input_moves<0> || add_01::input_moves<1>));
// Not passed: the partial input is reduced first (the result is never partial).
static_assert(not_partial<decltype(div_case::run(std::declval<const sim::dtensor<float, layout<mesh<4>, pl<replicate>, E48>>&>(),
                                                 std::declval<const sim::dtensor<float, layout<mesh<4>, pl<psum>, E48>>&>()))>(),
              "a P(sum) denominator is summed first");
// x P(sum) * y P(sum): one side is summed first (then the other's P(sum) may pass).
using mul_pp = ops::resolved<ops::binary<ops::mul_fn>, float, void, layout<mesh<4>, pl<psum>, E48>,
                             layout<mesh<4>, pl<psum>, E48>>;
static_assert(!(std::is_same_v<mul_pp::input_placements<0>, pl<psum>> &&
                std::is_same_v<mul_pp::input_placements<1>, pl<psum>>),
              "a product of two sums is not a sum of products");
static_assert(!std::is_same_v<out_of<maximum_case, pl<pmin>, E48, pl<replicate>, E48>, pl<pmin>>);
}  // namespace

TEST_CASE("shapes checked at run time", "[elementwise]") {
  using M = mesh<4>;
  using LD = layout<M, placements<shard<0>>, extents<dyn, 4>>;
  using LS = layout<M, placements<replicate>, extents<6, 4>>;
  std::vector<float> five(20, 1.f), six(24, 2.f);
  const auto x5 = sim::distribute_tensor<LD>(five, LD{extents<dyn, 4>(5)});
  const auto x6 = sim::distribute_tensor<LD>(six, LD{extents<dyn, 4>(6)});
  const auto y = sim::distribute_tensor<LS>(six);
  op_test::check_close(x6 + y, host_tensor<double>{{6, 4}, std::vector<double>(24, 4.0)}, 0);
  CHECK_THROWS_AS(x5 + y, std::invalid_argument);
  CHECK_THROWS_WITH(x5 * y, Catch::Contains("5") && Catch::Contains("6"));
  // A dynamic 1 does not broadcast against a dynamic 6 (the rule was fixed at compile time).
  std::vector<float> one(4, 1.f);
  const auto x1 = sim::distribute_tensor<LD>(one, LD{extents<dyn, 4>(1)});
  CHECK_THROWS_AS(x1 - x6, std::invalid_argument);
}
