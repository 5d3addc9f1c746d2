// tests/autograd/grad_redistribute.cpp — redistribute's backward (every pair on a 1-d mesh of
// 4, every source to four targets on 2x2) and softmax/log_softmax, over every placement.
#include <catch2/catch.hpp>

#include "../ops/common/op_test.hpp"
#include "gradcheck.hpp"

using namespace spmd;
namespace rt = spmd::runtime;

namespace {
template <class M, class P, index_t... E>
using L = layout<M, P, extents<E...>>;
}  // namespace

TEMPLATE_TEST_CASE("softmax and log_softmax", "[autograd][nn]", (mesh<4>), (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(15, 71);
  using R1 = boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, M::ndim>>;
  const auto c = gradcheck::weights<L<M, R1, 5, 3>>(72);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    gradcheck::check<L<M, P, 5, 3>>([&](auto x) {
      return rt::sum<>(rt::softmax<1>(x) * c) + rt::sum<>(rt::log_softmax<0>(x) * c);
    }, {a});
  });
}

namespace {
template <class M, class From, class To, class C>
void check_redistribute(const std::vector<double>& a, const C& c) {
  INFO(op_test::placements_text<From>() << " -> " << op_test::placements_text<To>());
  gradcheck::check<L<M, From, 5, 3>>([&](auto x) { return rt::sum<>(rt::redistribute<To>(x) * c); },
                                     {a});
}
}  // namespace

TEST_CASE("redistribute: the gradient comes back to the input's placements", "[autograd][redistribute]") {
  const auto a = gradcheck::values(15, 81);
  {  // every pair on a 1-d mesh of 4 (uneven and empty shards)
    using M = mesh<4>;
    const auto c = gradcheck::weights<L<M, placements<replicate>, 5, 3>>(82);
    op_test::for_each_placements<M, 2>([&]<class From>() {
      op_test::for_each_placements<M, 2>([&]<class To>() { check_redistribute<M, From, To>(a, c); });
    });
  }
  {  // every source on 2x2, to four targets (nested sharding, Partial, transposed)
    using M = mesh<2, 2>;
    const auto c = gradcheck::weights<L<M, placements<replicate, replicate>, 5, 3>>(83);
    op_test::for_each_placements<M, 2>([&]<class From>() {
      check_redistribute<M, From, placements<replicate, replicate>>(a, c);
      check_redistribute<M, From, placements<shard<0>, shard<0>>>(a, c);
      check_redistribute<M, From, placements<partial<>, shard<1>>>(a, c);
      check_redistribute<M, From, placements<shard<1>, shard<0>>>(a, c);
    });
  }
}

