// tests/autograd/grad_nn.cpp — layer_norm (with and without weight and bias), embedding (the
// weight's gradient, a vocabulary-sharded weight included), cross entropy and its
// vocabulary-parallel form (same values and gradients; no gather of the logits; the fused rows
// against the composition), one_hot, and local_map with a user's backward.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "../ops/common/op_test.hpp"
#include "gradcheck.hpp"

using namespace spmd;
namespace rt = spmd::runtime;

namespace {
template <class M, class P, index_t... E>
using L = layout<M, P, extents<E...>>;
template <class M>
using all_r = boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, M::ndim>>;
}  // namespace

TEMPLATE_TEST_CASE("layer_norm: gradients of x, weight and bias", "[autograd][nn]", (mesh<4>), (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(15, 91), w = gradcheck::values(3, 92), b = gradcheck::values(3, 93);
  const auto c = gradcheck::weights<L<M, all_r<M>, 5, 3>>(94);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x placements " << op_test::placements_text<P>());
    gradcheck::check<L<M, P, 5, 3>, L<M, all_r<M>, 3>, L<M, all_r<M>, 3>>(
        [&](auto x, auto wt, auto bias) {
          return rt::sum<>(rt::layer_norm<1>(x, wt, bias) * c) + rt::sum<>(rt::layer_norm<2>(x) * c);
        },
        {a, w, b});
  });
}

TEMPLATE_TEST_CASE("embedding: the weight's gradient is the scatter-add of the rows used", "[autograd][nn]",
                   (mesh<4>), (mesh<2, 2>)) {
  using M = TestType;
  const auto w = gradcheck::values(24, 101);  // (6, 4)
  using LI = L<M, all_r<M>, 5>;
  using LI2 = L<M, all_r<M>, 2, 3>;
  const auto idx = sim::distribute_tensor<LI>(std::vector<std::int64_t>{3, 0, 3, 5, 1});  // 3 twice, 2 and 4 never
  const auto idx2 = sim::distribute_tensor<LI2>(std::vector<std::int32_t>{1, 1, 4, 0, 5, 1});
  const auto c = gradcheck::weights<L<M, all_r<M>, 5, 4>>(102);
  const auto c2 = gradcheck::weights<L<M, all_r<M>, 2, 3, 4>>(103);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("weight placements " << op_test::placements_text<P>());
    gradcheck::check<L<M, P, 6, 4>>(
        [&](auto wt) { return rt::sum<>(rt::embedding(idx, wt) * c) + rt::sum<>(rt::embedding(idx2, wt) * c2); },
        {w});
  });
  // Indices sharded too (data parallel): the rows' gradients are summed over ranks.
  gradcheck::check<L<M, all_r<M>, 6, 4>>(
      [&](auto wt) {
        using LS = L<M, boost::mp11::mp_rename<boost::mp11::mp_replace_at_c<all_r<M>, 0, shard<0>>, placements>, 5>;
        return rt::sum<>(rt::embedding(rt::redistribute<typename LS::placements_type>(idx), wt) * c);
      },
      {w});
}

TEST_CASE("one_hot: classes of the indices; an index outside the classes is named", "[autograd][nn]") {
  using M = mesh<2>;
  const auto idx = sim::distribute_tensor<L<M, placements<shard<0>>, 3>>(std::vector<std::int32_t>{2, 0, 1});
  CHECK(rt::one_hot<float, 3>(idx).full_tensor() == std::vector<float>{0, 0, 1, 1, 0, 0, 0, 1, 0});
  const auto bad = sim::distribute_tensor<L<M, placements<shard<0>>, 3>>(std::vector<std::int32_t>{2, 0, 3});
  CHECK_THROWS_WITH((rt::one_hot<float, 3>(bad)), Catch::Contains("index 3") && Catch::Contains("of rank 1"));
}

TEMPLATE_TEST_CASE("cross entropy: both forms against finite differences", "[autograd][loss]", (mesh<4>),
                   (mesh<2, 2>)) {
  using M = TestType;
  const auto a = gradcheck::values(35, 111);  // (5, 7)
  const auto t = sim::distribute_tensor<L<M, all_r<M>, 5>>(std::vector<std::int64_t>{6, 0, 3, 3, 1});
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("logits placements " << op_test::placements_text<P>());
    gradcheck::check<L<M, P, 5, 7>>([&](auto x) { return rt::cross_entropy<7>(x, t); }, {a});
    gradcheck::check<L<M, P, 5, 7>>([&](auto x) { return rt::vocab_parallel_cross_entropy<7>(x, t); }, {a});
  });
}

TEST_CASE("cross entropy: the value of torch's formula; the parallel form gathers no logits",
          "[autograd][loss]") {
  using M = mesh<2, 4>;
  using LX = L<M, placements<shard<0>, shard<1>>, 4, 10>;  // rows on dim 0, classes on dim 1
  std::vector<double> x0(40);
  for (std::size_t i = 0; i < x0.size(); ++i) x0[i] = std::sin(0.7 * static_cast<double>(i)) * 3;
  const std::vector<std::int64_t> t0{9, 2, 0, 5};
  const auto t = sim::distribute_tensor<L<M, placements<shard<0>, replicate>, 4>>(t0);
  double want = 0;
  for (int i = 0; i < 4; ++i) {
    double m = -1e300, s = 0;
    for (int k = 0; k < 10; ++k) m = std::max(m, x0[i * 10 + k]);
    for (int k = 0; k < 10; ++k) s += std::exp(x0[i * 10 + k] - m);
    want += (std::log(s) + m - x0[i * 10 + t0[i]]) / 4;
  }
  auto x = sim::requires_grad(sim::distribute_tensor<LX>(x0), "logits");
  sim::comm_counter comm;
  auto l = rt::vocab_parallel_cross_entropy<10>(x, t);
  CHECK(comm.count(step_kind::all_gather) == 0);
  CHECK(comm.count(step_kind::all_to_all) == 0);
  l.backward();
  CHECK(comm.count(step_kind::all_gather) == 0);
  CHECK(comm.count(step_kind::all_to_all) == 0);
  CHECK(l.full_tensor()[0] == Approx(want).epsilon(1e-13));
  static_assert(std::is_same_v<decltype(x)::grad_layout, LX>);  // the gradient stays class-sharded
  auto y = sim::requires_grad(sim::distribute_tensor<LX>(x0), "logits");
  auto l2 = rt::cross_entropy<10>(y, t);
  CHECK(l2.full_tensor()[0] == Approx(want).epsilon(1e-13));
  l2.backward();
  const auto gx = x.grad().full_tensor(), gy = y.grad().full_tensor();
  for (std::size_t i = 0; i < gx.size(); ++i) CHECK(gx[i] == Approx(gy[i]).margin(1e-15));
}

TEMPLATE_TEST_CASE("cross entropy: the fused rows give the composition's loss and gradient; a target outside the classes is named",
                   "[autograd][loss]", float, double) {
  using T = TestType;
  using M = mesh<2>;
  using LX = L<M, placements<shard<0>>, 2, 3, 10>;  // (batch, positions, classes), the batch sharded
  using LT = L<M, placements<shard<0>>, 2, 3>;
  std::vector<T> x0(60);
  for (std::size_t i = 0; i < x0.size(); ++i) x0[i] = static_cast<T>(std::sin(0.37 * static_cast<double>(i)) * 4);
  const auto t = sim::distribute_tensor<LT>(std::vector<std::int32_t>{9, 2, 0, 5, 7, 1});
  const double tol = std::is_same_v<T, float> ? 2e-6 : 1e-13;
  auto check = [&](auto fused, auto composed) {
    auto x = sim::requires_grad(sim::distribute_tensor<LX>(x0), "logits");
    auto y = sim::requires_grad(sim::distribute_tensor<LX>(x0), "logits");
    auto l = fused(x), l2 = composed(y);
    CHECK(l.full_tensor()[0] == Approx(l2.full_tensor()[0]).epsilon(tol));
    l.backward();
    l2.backward();
    const auto gx = x.grad().full_tensor(), gy = y.grad().full_tensor();
    for (std::size_t i = 0; i < gx.size(); ++i) CHECK(gx[i] == Approx(gy[i]).margin(tol));
  };
  check([&](auto& x) { return rt::cross_entropy<10>(x, t); }, [&](auto& y) { return rt::composed_cross_entropy<10>(y, t); });
  check([&](auto& x) { return rt::vocab_parallel_cross_entropy<10>(x, t); },
        [&](auto& y) { return rt::composed_vocab_parallel_cross_entropy<10>(y, t); });
  // A class masked with -inf (not a target): probability 0, a finite loss, as torch's (the
  // composition's logits · one_hot makes its 0 · -inf a NaN; docs/training.md)
  x0[17] = -std::numeric_limits<T>::infinity();
  {
    const std::vector<std::int32_t> t0{9, 2, 0, 5, 7, 1};
    double want = 0;
    for (int i = 0; i < 6; ++i) {
      double m = -1e300, sum = 0;
      for (int k = 0; k < 10; ++k) m = std::max(m, static_cast<double>(x0[i * 10 + k]));
      for (int k = 0; k < 10; ++k) sum += std::exp(static_cast<double>(x0[i * 10 + k]) - m);
      want += (std::log(sum) + m - static_cast<double>(x0[i * 10 + t0[i]])) / 6;
    }
    auto x = sim::requires_grad(sim::distribute_tensor<LX>(x0), "logits");
    auto l = rt::cross_entropy<10>(x, t);
    CHECK(l.full_tensor()[0] == Approx(want).epsilon(tol));
    l.backward();
    CHECK(x.grad().full_tensor()[17] == 0);
  }
  const auto bad = sim::distribute_tensor<LT>(std::vector<std::int32_t>{9, 2, 0, 5, 10, 1});
  auto x = sim::requires_grad(sim::distribute_tensor<LX>(x0), "logits");
  CHECK_THROWS_WITH(rt::cross_entropy<10>(x, bad), Catch::Contains("target 10") && Catch::Contains("of rank 1"));
}

TEST_CASE("local_map: the user's backward, in the declared placements", "[autograd][local_map]") {
  using M = mesh<2, 2>;
  using LX = L<M, placements<shard<0>, replicate>, 5, 3>;
  const auto a = gradcheck::values(15, 121);
  const auto c = gradcheck::weights<L<M, placements<replicate, replicate>, 5, 3>>(122);
  // y = x^3 per block, computed on S(0), S(1) blocks; dy/dx = 3 x^2.
  auto cube = [](host::strided_view<double> out, host::strided_view<const double> x) {
    for (index_t k = 0; k < out.size(); ++k) out.data()[k] = x.data()[k] * x.data()[k] * x.data()[k];
  };
  auto dcube = [](host::strided_view<double> gx, host::strided_view<const double> g,
                  host::strided_view<const double> x) {
    for (index_t k = 0; k < gx.size(); ++k) gx.data()[k] = 3 * x.data()[k] * x.data()[k] * g.data()[k];
  };
  using Out = L<M, placements<shard<0>, shard<1>>, 5, 3>;
  gradcheck::check<LX>(
      [&](auto x) {
        return rt::sum<>(rt::local_map<Out, rt::in_placements<placements<shard<0>, shard<1>>>>(
                             cube, rt::grad_fns(dcube), x) *
                         c);
      },
      {a});
}

TEMPLATE_TEST_CASE("causal_attention: gradients of q, k and v; the composition's values", "[autograd][attention]",
                   (mesh<2>), (mesh<2, 2>)) {
  using M = TestType;
  // (batch 2, positions 3, 2 heads of 2)
  const auto q = gradcheck::values(24, 95), k = gradcheck::values(24, 96), v = gradcheck::values(24, 97);
  const auto c = gradcheck::weights<L<M, all_r<M>, 2, 3, 4>>(98);
  op_test::for_each_placements<M, 3>([&]<class P>() {
    INFO("q placements " << op_test::placements_text<P>());
    gradcheck::check<L<M, P, 2, 3, 4>, L<M, all_r<M>, 2, 3, 4>, L<M, P, 2, 3, 4>>(
        [&](auto x, auto y, auto z) { return rt::sum<>(rt::causal_attention<2>(x, y, z) * c); }, {q, k, v});
  });
  // The fused operator against bmm and softmax composed (what a device runs)
  using LX = L<M, all_r<M>, 2, 3, 4>;
  const auto qd = sim::distribute_tensor<LX>(q), kd = sim::distribute_tensor<LX>(k), vd = sim::distribute_tensor<LX>(v);
  const auto fused = rt::causal_attention<2>(qd, kd, vd, 1 / std::sqrt(2.0)).full_tensor();
  auto split = [](const auto& y) { return rt::permute<0, 2, 1, 3>(rt::reshape<2, 3, 2, 2>(y)); };
  std::vector<double> m(9, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = i + 1; j < 3; ++j) m[static_cast<std::size_t>(i * 3 + j)] = -std::numeric_limits<double>::infinity();
  const auto mask = sim::distribute_tensor<L<M, all_r<M>, 3, 3>>(m);
  const auto s = rt::bmm(split(qd), rt::transpose<2, 3>(split(kd))) / std::sqrt(2.0) + mask;
  const auto composed =
      rt::reshape<2, 3, 4>(rt::permute<0, 2, 1, 3>(rt::bmm(rt::softmax<3>(s), split(vd)))).full_tensor();
  for (std::size_t e = 0; e < composed.size(); ++e) CHECK(std::fabs(fused[e] - composed[e]) <= 1e-14);
}
