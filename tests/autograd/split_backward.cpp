// tests/autograd/split_backward.cpp — the split backward (runtime/autograd/split_backward.hpp)
// against one backward: a two-layer block (linear, layer_norm, tanh, a residual, a second
// linear) on a 2-rank mesh, its weights replicated and its input's rows split.
//   - after backward_input, the input's gradient is there and no weight's; after run(), every
//     weight's; each equal to one backward's bit for bit;
//   - no inputs: everything waits for run(); run twice and a freed graph are refused;
//   - gradients accumulate over several split backwards as over backwards.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/autograd/split_backward.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
using M = mesh<2>;
using LX = layout<M, placements<shard<0>>, extents<4, 6>>;
using LW = layout<M, placements<replicate>, extents<6, 6>>;
using LN = layout<M, placements<replicate>, extents<6>>;

std::vector<double> values(int seed, std::size_t n) {
  std::vector<double> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = 0.1 * double((int(i) * 7 + seed * 13) % 11 - 5);
  return v;
}

struct two_layers {
  decltype(sim::requires_grad(sim::distribute_tensor<LW>(std::vector<double>{}))) w1, w2;
  decltype(sim::requires_grad(sim::distribute_tensor<LN>(std::vector<double>{}))) gamma, beta;
  two_layers()
      : w1(sim::requires_grad(sim::distribute_tensor<LW>(values(1, 36)), "w1")),
        w2(sim::requires_grad(sim::distribute_tensor<LW>(values(2, 36)), "w2")),
        gamma(sim::requires_grad(sim::distribute_tensor<LN>(values(3, 6)), "gamma")),
        beta(sim::requires_grad(sim::distribute_tensor<LN>(values(4, 6)), "beta")) {}
  template <class X>
  auto operator()(const X& x) const {
    const auto h = rt::tanh(rt::layer_norm<1>(rt::matmul_t(x, w1), gamma, beta));
    return rt::matmul_t(x + h, w2);
  }
  std::vector<std::vector<double>> grads() const {
    return {w1.grad().full_tensor(), w2.grad().full_tensor(), gamma.grad().full_tensor(), beta.grad().full_tensor()};
  }
  bool any_grad() const { return w1.has_grad() || w2.has_grad() || gamma.has_grad() || beta.has_grad(); }
};

}  // namespace

TEST_CASE("the split backward gives one backward's gradients, the input's first", "[autograd][split]") {
  const auto g = sim::distribute_tensor<LX>(values(5, 24));
  two_layers one;
  auto x1 = sim::requires_grad(sim::distribute_tensor<LX>(values(6, 24)), "x");
  one(x1).backward(g);

  two_layers two;
  auto x2 = sim::requires_grad(sim::distribute_tensor<LX>(values(6, 24)), "x");
  const auto y = two(x2);
  rt::comm_counter before;
  rt::weight_backward w = rt::backward_input(y, g, x2);
  CHECK(x2.has_grad());
  CHECK_FALSE(two.any_grad());
  CHECK(w.pending());
  CHECK(x2.grad().full_tensor() == x1.grad().full_tensor());
  w.run();
  CHECK_FALSE(w.pending());
  CHECK(two.grads() == one.grads());
  CHECK_THROWS_AS(w.run(), std::logic_error);
}

TEST_CASE("without inputs the first pass computes nothing, and a loss splits as well", "[autograd][split]") {
  two_layers one, two;
  const auto x = sim::distribute_tensor<LX>(values(6, 24));  // data: no gradient
  rt::sum<>(one(x) * one(x)).backward();
  const auto loss = rt::sum<>(two(x) * two(x));
  rt::weight_backward w = rt::backward_input_of_loss(loss);
  CHECK_FALSE(two.any_grad());
  w.run();
  CHECK(two.grads() == one.grads());
  // the graph is freed after the second pass: another backward through it is refused
  CHECK_THROWS_AS(loss.backward(), std::logic_error);
}

TEST_CASE("gradients accumulate over split backwards as over backwards", "[autograd][split]") {
  two_layers one, two;
  const auto g = sim::distribute_tensor<LX>(values(5, 24));
  for (int m = 0; m < 3; ++m) {
    auto x = sim::requires_grad(sim::distribute_tensor<LX>(values(6 + m, 24)), "x");
    one(x).backward(g);
  }
  std::vector<rt::weight_backward> pending;
  for (int m = 0; m < 3; ++m) {
    auto x = sim::requires_grad(sim::distribute_tensor<LX>(values(6 + m, 24)), "x");
    pending.push_back(rt::backward_input(two(x), g, x));
  }
  CHECK_FALSE(two.any_grad());
  for (auto& w : pending) w.run();  // in the order of the inputs, as the schedules run them
  CHECK(two.grads() == one.grads());
}
