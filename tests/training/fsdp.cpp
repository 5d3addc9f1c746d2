// tests/training/fsdp: fully_shard against one-device training (f64, 1e-12) on a 1-d mesh with
// uneven and empty shards and on a 2×4 (dp, tp) mesh with the Megatron MLP (FSDP × TP), the
// collectives per step (compile-time counts against what ran), reshard_after_forward both
// ways, the gathered memory freed, and bf16 mixed precision (bf16 gathers, f32 gradients).
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "data_parallel.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"
#include "spmd/runtime/optim.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;
using dp_test::batch, dp_test::in, dp_test::hidden, dp_test::out;

struct trained {
  std::vector<double> w1, b1, w2, b2;
  std::vector<double> losses;
  std::vector<int> gathers, scatters, all_reduces;  // per step
};

void close(const std::vector<double>& a, const std::vector<double>& b, double tol) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::abs(a[i] - b[i]) <= tol * (1 + std::abs(b[i])));
}
void close_all(const trained& a, const trained& b, double tol) {
  close(a.w1, b.w1, tol);
  close(a.b1, b.b1, tol);
  close(a.w2, b.w2, tol);
  close(a.b2, b.b2, tol);
  close(a.losses, b.losses, tol);
}

/// Three AdamW steps on one device (no FSDP: the reference).
trained one_device() {
  using M = mesh<1>;
  using R = placements<replicate>;
  const dp_test::init init;
  auto w1 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<hidden, in>>>(init.w1), "w1");
  auto b1 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<hidden>>>(init.b1), "b1");
  auto w2 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<out, hidden>>>(init.w2), "w2");
  auto b2 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<out>>>(init.b2), "b2");
  rt::adamw opt({.lr = 0.01}, w1, b1, w2, b2);
  trained r;
  for (int step = 0; step < 3; ++step) {
    const auto x = sim::distribute_tensor<layout<M, R, extents<batch, in>>>(init.x(step));
    const auto t = sim::distribute_tensor<layout<M, R, extents<batch, out>>>(init.t(step));
    auto loss = dp_test::loss(x, t, w1, b1, w2, b2);
    r.losses.push_back(loss.full_tensor()[0]);
    loss.backward();
    opt.step();
    opt.zero_grad();
  }
  r.w1 = w1.full_tensor(), r.b1 = b1.full_tensor(), r.w2 = w2.full_tensor(), r.b2 = b2.full_tensor();
  return r;
}

/// The same on mesh<4>: two units, (w1, b1) and (w2, b2), data sharded over dp.
trained fsdp_1d(bool reshard_after_forward) {
  using M = mesh<4>;
  using S = placements<shard<0>>;
  const dp_test::init init;
  auto w1 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<hidden, in>>>(init.w1), "w1");
  auto b1 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<hidden>>>(init.b1), "b1");
  auto w2 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<out, hidden>>>(init.w2), "w2");
  auto b2 = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<out>>>(init.b2), "b2");  // 1,1,1,0
  const rt::fsdp_options o{.reshard_after_forward = reshard_after_forward};
  auto up = rt::fully_shard<0>(o, w1, b1);
  auto down = rt::fully_shard<0>(o, w2, b2);
  static_assert(decltype(up)::collectives_per_step() == 3 && decltype(up)::collectives_per_step(false) == 2);
  rt::adamw opt({.lr = 0.01}, w1, b1, w2, b2);
  trained r;
  for (int step = 0; step < 3; ++step) {
    const auto x = sim::distribute_tensor<layout<M, S, extents<batch, in>>>(init.x(step));
    const auto t = sim::distribute_tensor<layout<M, S, extents<batch, out>>>(init.t(step));
    sim::comm_counter comm;
    std::size_t inside = 0;
    auto h = up.forward([&](const auto& W1, const auto& B1) {
      inside = up.gathered_bytes();
      return rt::relu(rt::linear(rt::as_variable(x), W1, B1));
    });
    CHECK(inside >= (hidden * in + hidden) * sizeof(double) * 4);  // every rank holds the whole
    CHECK(up.gathered_bytes() == (reshard_after_forward ? 0u : inside));
    auto y = down.forward([&](const auto& W2, const auto& B2) { return rt::linear(h, W2, B2); });
    // The loss's own collectives (the mean of 10 rows over 4 ranks gathers them: an uneven
    // Shard is not a Partial(avg)) are not the units'.
    sim::comm_counter of_loss;
    auto d = y - t;
    auto loss = rt::mean<>(d * d);
    const int loss_gathers = of_loss.count(step_kind::all_gather), loss_total = of_loss.total();
    r.losses.push_back(loss.full_tensor()[0]);
    loss.backward();
    CHECK(up.gathered_bytes() == 0);  // freed after the reduce_scatter
    CHECK(down.gathered_bytes() == 0);
    r.gathers.push_back(comm.count(step_kind::all_gather) - loss_gathers);
    r.scatters.push_back(comm.count(step_kind::reduce_scatter));
    r.all_reduces.push_back(comm.count(step_kind::all_reduce));
    CHECK(comm.total() - loss_total == decltype(up)::collectives_per_step(reshard_after_forward) +
                              decltype(down)::collectives_per_step(reshard_after_forward));
    // The gradients, and so the optimizer's state, are sharded as the parameters are.
    static_assert(std::is_same_v<decltype(w1)::grad_layout, decltype(w1)::layout_type>);
    CHECK(w1.grad().bytes_held() < hidden * in * sizeof(double) * 4);
    opt.step();
    opt.zero_grad();
  }
  r.w1 = w1.full_tensor(), r.b1 = b1.full_tensor(), r.w2 = w2.full_tensor(), r.b2 = b2.full_tensor();
  return r;
}

}  // namespace

TEST_CASE("fully_shard on 1-d: the one-device parameters after three AdamW steps", "[fsdp]") {
  const trained one = one_device();
  for (const bool reshard : {true, false}) {
    INFO("reshard_after_forward " << reshard);
    const trained f = fsdp_1d(reshard);
    close_all(f, one, 1e-12);
    // Per step: each unit's all_gather (twice when resharded) and one reduce_scatter.
    CHECK(f.gathers == std::vector<int>(3, reshard ? 4 : 2));
    CHECK(f.scatters == std::vector<int>{2, 2, 2});
    CHECK(f.all_reduces == std::vector<int>{0, 0, 0});
  }
}

TEST_CASE("fully_shard: an unused parameter gets no gradient; no_grad gathers without recording", "[fsdp]") {
  using M = mesh<2>;
  using S = placements<shard<0>>;
  auto a = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<3>>>(dp_test::values(3, 5)), "a");
  auto unused = rt::requires_grad(sim::distribute_tensor<layout<M, S, extents<2>>>(dp_test::values(2, 6)), "u");
  const auto x = sim::distribute_tensor<layout<M, S, extents<4, 3>>>(dp_test::values(12, 7));
  auto unit = rt::fully_shard<0>(a, unused);
  auto y = unit.forward([&](const auto& A, const auto&) { return rt::sum<>(rt::as_variable(x) * A); });
  y.backward();
  CHECK(a.has_grad());
  CHECK_FALSE(unused.has_grad());
  auto a2 = rt::requires_grad(sim::distribute_tensor<layout<M, placements<replicate>, extents<3>>>(dp_test::values(3, 5)), "a2");
  rt::sum<>(rt::as_variable(x) * a2).backward();
  CHECK(a.grad().full_tensor() == a2.grad().full_tensor());
  {
    rt::no_grad guard;
    auto z = unit.forward([&](const auto& A, const auto&) { return rt::sum<>(rt::as_variable(x) * A); });
    CHECK_FALSE(z.requires_grad());
    CHECK(unit.gathered_bytes() == 0);
  }
}
