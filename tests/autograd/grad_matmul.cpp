// tests/autograd/grad_matmul.cpp — matmul, matmul_t, bmm and linear: gradients against
// finite differences, every placement of one input (the other fixed) on a 1-d mesh of 4
// (uneven and empty shards) and a 2x2 mesh.
#include <catch2/catch.hpp>

#include "../ops/common/op_test.hpp"
#include "gradcheck.hpp"

using namespace spmd;
using spmd::sim::backend;
namespace rt = spmd::runtime;

namespace {
template <class M, class P, index_t... E>
using L = layout<M, P, extents<E...>>;
template <class M>
using all_r = boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, M::ndim>>;
}  // namespace

TEMPLATE_TEST_CASE("matmul: gradients of both operands over every placement", "[autograd][matmul]",
                   (mesh<4>), (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(15, 1), b = gradcheck::values(12, 2);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    using LC = L<M, all_r<M>, 5, 4>;
    const auto c = gradcheck::weights<LC>(3);
    gradcheck::check<L<M, P, 5, 3>, L<M, all_r<M>, 3, 4>>(
        [&](auto x, auto w) { return rt::sum<>(rt::matmul(x, w) * c); }, {a, b});
    gradcheck::check<L<M, all_r<M>, 5, 3>, L<M, P, 3, 4>>(
        [&](auto x, auto w) { return rt::sum<>(rt::matmul(x, w) * c); }, {a, b});
  });
}

TEMPLATE_TEST_CASE("matmul_t and linear: gradients of x, W and b", "[autograd][matmul]", (mesh<4>),
                   (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(15, 4), w = gradcheck::values(12, 5), b = gradcheck::values(4, 6);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("W placements " << op_test::placements_text<P>());
    using LC = L<M, all_r<M>, 5, 4>;
    const auto c = gradcheck::weights<LC>(7);
    gradcheck::check<L<M, all_r<M>, 5, 3>, L<M, P, 4, 3>, L<M, all_r<M>, 4>>(
        [&](auto x, auto wt, auto bias) { return rt::sum<>(rt::linear(x, wt, bias) * c); }, {a, w, b});
  });
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    using LC = L<M, all_r<M>, 5, 4>;
    const auto c = gradcheck::weights<LC>(8);
    gradcheck::check<L<M, P, 5, 3>, L<M, all_r<M>, 4, 3>>(
        [&](auto x, auto wt) { return rt::sum<>(rt::matmul_t(x, wt) * c); }, {a, w});
  });
}

TEST_CASE("bmm: gradients over the batch, row and inner placements", "[autograd][matmul]") {
  using M = mesh<3>;
  const auto a = gradcheck::values(24, 9), b = gradcheck::values(24, 10);
  op_test::for_each_placements<M, 3>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    using LC = L<M, placements<replicate>, 2, 3, 3>;
    const auto c = gradcheck::weights<LC>(11);
    gradcheck::check<L<M, P, 2, 3, 4>, L<M, placements<shard<0>>, 2, 4, 3>>(
        [&](auto x, auto w) { return rt::sum<>(rt::bmm(x, w) * c); }, {a, b});
  });
}

TEST_CASE("bmm with two batch dims: gradients with (batch, heads) on (dp, tp)", "[autograd][matmul]") {
  using M = mesh<2, 2>;
  const auto a = gradcheck::values(2 * 2 * 3 * 4, 12), b = gradcheck::values(2 * 2 * 4 * 3, 13);
  using LC = L<M, placements<replicate, replicate>, 2, 2, 3, 3>;
  const auto c = gradcheck::weights<LC>(14);
  gradcheck::check<L<M, placements<shard<0>, shard<1>>, 2, 2, 3, 4>, L<M, placements<shard<0>, shard<1>>, 2, 2, 4, 3>>(
      [&](auto x, auto w) { return rt::sum<>(rt::bmm(x, w) * c); }, {a, b});
  gradcheck::check<L<M, placements<replicate, shard<3>>, 2, 2, 3, 4>, L<M, placements<shard<1>, replicate>, 2, 2, 4, 3>>(
      [&](auto x, auto w) { return rt::sum<>(rt::bmm(x, w) * c); }, {a, b});
}
