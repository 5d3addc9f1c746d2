// tests/autograd/grad_pointwise.cpp — the elementwise family: unary functions, binary
// functions with broadcasting (gradients summed over the broadcast dims), scalars on either
// side, and the tie rule of maximum/minimum.
#include <catch2/catch.hpp>

#include "../ops/common/op_test.hpp"
#include "gradcheck.hpp"

using namespace spmd;
namespace rt = spmd::runtime;

namespace {
template <class M, class P, index_t... E>
using L = layout<M, P, extents<E...>>;
}  // namespace

TEMPLATE_TEST_CASE("unary functions: gradients over every placement", "[autograd][elementwise]",
                   (mesh<4>), (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(15, 21);
  auto pos = a;
  for (double& v : pos) v = std::fabs(v) + 0.1;
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    using LX = L<M, P, 5, 3>;
    using LC = L<M, typename rt::grad_layout_t<LX>::placements_type, 5, 3>;
    const auto c = gradcheck::weights<LC>(22);
    gradcheck::check<LX>([&](auto x) {
      auto y = rt::relu(x) + rt::gelu(x) + rt::gelu_tanh(x) + rt::tanh(x) + rt::sigmoid(x) +
               rt::abs(x) - x;
      return rt::sum<>(y * c);
    }, {a});
    gradcheck::check<LX>([&](auto x) {
      return rt::sum<>((rt::exp(x) + rt::log(x) + rt::sqrt(x)) * c);
    }, {pos});
  });
}

TEST_CASE("binary functions: broadcasting operands get gradients of their own shape",
          "[autograd][elementwise]") {
  using M = mesh<2, 2>;
  const auto a = gradcheck::values(15, 31), b = gradcheck::values(3, 32), col = gradcheck::values(5, 33);
  auto bpos = b;
  for (double& v : bpos) v = std::fabs(v) + 0.5;
  using LC = L<M, placements<replicate, replicate>, 5, 3>;
  const auto c = gradcheck::weights<LC>(34);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    // x (5, 3) with a row (3), every op.
    gradcheck::check<L<M, P, 5, 3>, L<M, placements<shard<0>, replicate>, 3>>(
        [&](auto x, auto y) { return rt::sum<>((x + y) * c + (x - y) * (x * y) + x / y); }, {a, bpos});
    // x (5, 3) with a column (5, 1): stretched, not missing.
    gradcheck::check<L<M, P, 5, 3>, L<M, placements<replicate, shard<0>>, 5, 1>>(
        [&](auto x, auto y) { return rt::sum<>((x * y + y / (x * x + 1.0)) * c); }, {a, col});
  });
  op_test::for_each_placements<M, 1>([&]<class P>() {
    INFO("row placements " << op_test::placements_text<P>());
    gradcheck::check<L<M, placements<shard<0>, shard<1>>, 5, 3>, L<M, P, 3>>(
        [&](auto x, auto y) { return rt::sum<>((x * y - y) * c); }, {a, bpos});
  });
}

TEST_CASE("scalars on either side", "[autograd][elementwise]") {
  using M = mesh<4>;
  auto a = gradcheck::values(15, 41);
  for (double& v : a) v = std::fabs(v) + 0.2;
  using LC = L<M, placements<replicate>, 5, 3>;
  const auto c = gradcheck::weights<LC>(42);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    gradcheck::check<L<M, P, 5, 3>>([&](auto x) {
      auto y = (x + 2.0) * 3.0 - (1.5 - x) / 4.0 + 2.0 / x + rt::maximum(x, 1.0) + rt::minimum(0.7, x);
      return rt::sum<>(y * c);
    }, {a});
  });
}

TEST_CASE("maximum and minimum: the winner takes the gradient, ties split it", "[autograd][elementwise]") {
  using M = mesh<2>;
  using LX = L<M, placements<shard<0>>, 2, 3>;
  const std::vector<double> x0{1, 2, 3, 4, 5, 6}, y0{1, 0, 4, 4, 9, -1};  // ties at 0 and 3
  auto x = sim::requires_grad(sim::distribute_tensor<LX>(x0), "x");
  auto y = sim::requires_grad(sim::distribute_tensor<LX>(y0), "y");
  rt::sum<>(rt::maximum(x, y) + 2.0 * rt::minimum(x, y)).backward();
  // maximum: x wins at 1, 4 (x 2 > 0, 5 > -1), y at 2, 4 (4 > 3, 9 > 5); ties 0, 3 give 0.5 each.
  // minimum: the other way round, times 2.
  CHECK(x.grad().full_tensor() == std::vector<double>{1.5, 1, 2, 1.5, 2, 1});
  CHECK(y.grad().full_tensor() == std::vector<double>{1.5, 2, 1, 1.5, 1, 2});
}
