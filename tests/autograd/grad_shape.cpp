// tests/autograd/grad_shape.cpp — reductions (sum, mean over the global count, max/min with
// ties) and views (transpose, permute, reshape family; cat, split, narrow), over every
// placement on 1-d and 2-d meshes.
#include <catch2/catch.hpp>

#include "../ops/common/op_test.hpp"
#include "gradcheck.hpp"

using namespace spmd;
namespace rt = spmd::runtime;

namespace {
template <class M, class P, index_t... E>
using L = layout<M, P, extents<E...>>;
}  // namespace

TEMPLATE_TEST_CASE("reductions: sum, mean, max, min over a dim, keepdim, every dim",
                   "[autograd][reduction]", (mesh<4>), (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(15, 51);
  using R1 = boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, M::ndim>>;
  const auto c3 = gradcheck::weights<L<M, R1, 3>>(52);
  const auto c5 = gradcheck::weights<L<M, R1, 5, 1>>(53);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    using LX = L<M, P, 5, 3>;
    gradcheck::check<LX>([&](auto x) {
      return rt::sum<>(rt::sum<0>(x) * c3) + rt::sum<>(rt::mean<1>(x, rt::keepdim) * c5) +
             rt::mean<>(x) * 3.0;
    }, {a});
    gradcheck::check<LX>([&](auto x) {
      return rt::sum<>(rt::max<0>(x) * c3) + rt::sum<>(rt::min<-1>(x, rt::keepdim) * c5) + rt::max<>(x);
    }, {a});
  });
}

TEST_CASE("max/min: ties share the gradient evenly (torch.amax)", "[autograd][reduction]") {
  using M = mesh<2>;
  using LX = L<M, placements<shard<1>>, 2, 4>;
  auto x = sim::requires_grad(sim::distribute_tensor<LX>(std::vector<double>{3, 1, 3, 3, 0, 2, 2, -1}), "x");
  rt::sum<>(rt::max<1>(x)).backward();
  CHECK(x.grad().full_tensor() == std::vector<double>{1. / 3, 0, 1. / 3, 1. / 3, 0, 0.5, 0.5, 0});
  x.zero_grad();
  rt::min<>(x).backward();
  CHECK(x.grad().full_tensor() == std::vector<double>{0, 0, 0, 0, 0, 0, 0, 1});
}

TEMPLATE_TEST_CASE("views: transpose, permute, reshape, flatten, squeeze, unsqueeze",
                   "[autograd][views]", (mesh<4>), (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(24, 61);
  using R1 = boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, M::ndim>>;
  const auto c = gradcheck::weights<L<M, R1, 4, 3, 2>>(62);
  const auto c2 = gradcheck::weights<L<M, R1, 6, 4>>(63);
  op_test::for_each_placements<M, 3>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    using LX = L<M, P, 2, 3, 4>;
    gradcheck::check<LX>([&](auto x) {
      return rt::sum<>(rt::permute<2, 1, 0>(x) * c) + rt::sum<>(rt::transpose<0, 2>(x) * c) +
             rt::sum<>(rt::reshape<6, 4>(x) * c2) +
             rt::sum<>(rt::squeeze<0>(rt::unsqueeze<0>(rt::flatten<0, 1>(x))) * c2);
    }, {a});
  });
}

TEMPLATE_TEST_CASE("cat, split and narrow", "[autograd][views]", (mesh<4>), (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(15, 131), b = gradcheck::values(10, 132);
  using R1 = boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, M::ndim>>;
  const auto c = gradcheck::weights<L<M, R1, 5, 5>>(133);
  const auto c2 = gradcheck::weights<L<M, R1, 5, 2>>(134);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    gradcheck::check<L<M, P, 5, 3>, L<M, R1, 5, 2>>(
        [&](auto x, auto y) {
          auto [p, q] = rt::split<1, 1, 2>(x);
          return rt::sum<>(rt::cat<1>(x, y) * c) + rt::sum<>(q * c2) + rt::sum<>(rt::narrow<0, 1, 3>(p)) +
                 rt::sum<>(rt::cat<-1>(p, sim::distribute_tensor<L<M, R1, 5, 4>>(std::vector<double>(20, 0.5))) * c);
        },
        {a, b});
  });
}
