// tests/training/ddp: DDP's bucketed gradient all_reduce against one-device training (the same
// model on mesh<1>; f64, 1e-12) and against the per-parameter reduction (bit for bit), with
// the buckets and collectives per step asserted; buckets assigned in reverse order under a cap.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "data_parallel.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/data_parallel/ddp.hpp"
#include "spmd/runtime/optim.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;
using dp_test::close;
using dp_test::batch, dp_test::in, dp_test::hidden, dp_test::out;

struct trained {
  std::vector<double> w1, b1, w2, b2;
  std::vector<double> losses;
  std::vector<int> collectives;  // per step
  rt::training_bytes held;       // rank 0's after the last step, gradients still held
};

/// Three steps of SGD(momentum) on mesh<N>, data sharded over it, parameters replicated;
/// Bucket = 0: no DDP (each gradient reduced on its own as it arrives).
template <index_t N, std::size_t Bucket>
trained train() {
  using M = mesh<N>;
  using R = placements<replicate>;
  using S = placements<shard<0>>;
  const dp_test::init init;
  auto w1 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<hidden, in>>>(init.w1), "w1");
  auto b1 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<hidden>>>(init.b1), "b1");
  auto w2 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<out, hidden>>>(init.w2), "w2");
  auto b2 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<out>>>(init.b2), "b2");
  rt::sgd opt({.lr = 0.1, .momentum = 0.9}, w1, b1, w2, b2);
  trained r;
  for (int step = 0; step < 3; ++step) {
    const auto x = sim::distribute_tensor<layout<M, S, extents<batch, in>>>(init.x(step));
    const auto t = sim::distribute_tensor<layout<M, S, extents<batch, out>>>(init.t(step));
    sim::comm_counter comm;
    if constexpr (Bucket == 0) {
      auto loss = dp_test::loss(x, t, w1, b1, w2, b2);
      r.losses.push_back(loss.full_tensor()[0]);
      loss.backward();
    } else {
      // [docs:ddp-step]
      auto model = rt::ddp<0, Bucket>(w1, b1, w2, b2);  // mesh dim 0 is data parallel
      const auto [W1, B1, W2, B2] = model.params();     // w1 itself, gradient kept Partial
      auto loss = dp_test::loss(x, t, W1, B1, W2, B2);
      r.losses.push_back(loss.full_tensor()[0]);
      loss.backward();  // each bucket: one all_reduce once its last gradient is computed
      // [/docs:ddp-step]
    }
    r.collectives.push_back(comm.count(step_kind::all_reduce));
    opt.step();
    r.held = opt.bytes_of_rank(0);
    opt.zero_grad();
  }
  r.w1 = w1.full_tensor();
  r.b1 = b1.full_tensor();
  r.w2 = w2.full_tensor();
  r.b2 = b2.full_tensor();
  return r;
}

}  // namespace

TEST_CASE("ddp: buckets assigned at compile time, in reverse order, under the cap", "[ddp]") {
  using M = mesh<4>;
  using R = placements<replicate>;
  using W = rt::variable<double, layout<M, R, extents<6, 4>>, sim::backend>;   // 192 bytes
  using Bv = rt::variable<double, layout<M, R, extents<6>>, sim::backend>;     // 48 bytes
  using Big = rt::ddp_model<0, rt::default_bucket_bytes, W, Bv, W, Bv>;
  static_assert(Big::buckets == 1 && Big::collectives_per_step == 1);
  using Small = rt::ddp_model<0, 250, W, Bv, W, Bv>;   // [b, w] [b, w] from the end
  static_assert(Small::buckets == 2 && Small::collectives_per_step == 2);
  static_assert(Small::bucket_of_param<3> == 0 && Small::bucket_of_param<2> == 0 &&
                Small::bucket_of_param<1> == 1 && Small::bucket_of_param<0> == 1);
  using Tiny = rt::ddp_model<0, 8, W, Bv>;             // larger than the cap: one bucket each
  static_assert(Tiny::buckets == 2);
  using One = rt::ddp_model<0, rt::default_bucket_bytes, rt::variable<double, layout<mesh<1>, placements<replicate>, extents<3>>, sim::backend>>;
  static_assert(One::collectives_per_step == 0);  // one rank: nothing to reduce
}

TEST_CASE("ddp: the one-device parameters after three steps, one all_reduce per bucket", "[ddp]") {
  const trained one = train<1, 0>();
  const trained per_param = train<4, 0>();
  const trained one_bucket = train<4, rt::default_bucket_bytes>();
  const trained two_buckets = train<4, 250>();
  for (const trained* t : {&per_param, &one_bucket, &two_buckets}) {
    close(t->w1, one.w1, 1e-12);
    close(t->b1, one.b1, 1e-12);
    close(t->w2, one.w2, 1e-12);
    close(t->b2, one.b2, 1e-12);
    close(t->losses, one.losses, 1e-12);
  }
  // The same reductions in the same group order: the bits of the per-parameter all_reduces.
  CHECK(one_bucket.w1 == per_param.w1);
  CHECK(two_buckets.w2 == per_param.w2);
  CHECK(two_buckets.b1 == per_param.b1);
  CHECK(per_param.collectives == std::vector<int>{4, 4, 4});
  CHECK(one_bucket.collectives == std::vector<int>{1, 1, 1});
  CHECK(two_buckets.collectives == std::vector<int>{2, 2, 2});
  // Every rank holds every parameter, its gradient and its momentum buffer.
  constexpr std::size_t param_bytes = (hidden * in + hidden + out * hidden + out) * sizeof(double);
  CHECK(one_bucket.held.parameters == param_bytes);
  CHECK(one_bucket.held.gradients == param_bytes);
  CHECK(one_bucket.held.state == param_bytes);
  CHECK(one_bucket.held.total() == 3 * param_bytes);
}

TEST_CASE("ddp: an unused parameter gets no gradient, the others are reduced when backward ends", "[ddp]") {
  using M = mesh<2>;
  using R = placements<replicate>;
  using S = placements<shard<0>>;
  auto a = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<3>>>(dp_test::values(3, 5)), "a");
  auto unused = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<2>>>(dp_test::values(2, 6)), "unused");
  const auto x = sim::distribute_tensor<layout<M, S, extents<4, 3>>>(dp_test::values(12, 7));
  auto model = rt::ddp<0>(a, unused);
  const auto [A, U] = model.params();
  sim::comm_counter comm;
  rt::sum<>(rt::as_variable(x) * A).backward();
  CHECK(comm.count(step_kind::all_reduce) == 1);
  CHECK(a.has_grad());
  CHECK_FALSE(unused.has_grad());
  // Against the gradient computed without DDP.
  auto a2 = rt::requires_grad(sim::distribute_tensor<layout<M, R, extents<3>>>(dp_test::values(3, 5)), "a2");
  rt::sum<>(rt::as_variable(x) * a2).backward();
  CHECK(a.grad().full_tensor() == a2.grad().full_tensor());
}
