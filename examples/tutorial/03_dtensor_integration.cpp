// LocalTensor tutorial, example 3: DTensors in the simulation. Distribute and reconstruct;
// a matmul and a linear layer on DTensors, their output placements chosen by the compiler.
// docs/tutorial.md quotes the marked regions.
#include <cstdio>
#include <type_traits>

#include <spmd/runtime/ops/elementwise.hpp>
#include <spmd/runtime/ops/matmul.hpp>
#include <spmd/backends/sim/sim.hpp>

#include "tutorial_support.hpp"

using spmd::extents;
using spmd::index_t;
using spmd::layout;
using spmd::placements;
using spmd::replicate;
using spmd::shard;
using spmd::sim::host_tensor;
using tutorial::expect;
namespace sim = spmd::sim;

void distribute_and_verify() {
  // [docs:distribute]
  using M = spmd::mesh<4>;
  using Sharded = layout<M, placements<shard<0>>, extents<4, 4>>;
  using Replicated = layout<M, placements<replicate>, extents<4, 4>>;
  static_assert(Sharded{}.local_shape(3) == spmd::dims<2>{1, 4});  // one row per rank

  const auto tensor = host_tensor<float>::arange({4, 4});
  auto dt_sharded = sim::distribute_tensor<Sharded>(tensor.data);
  auto dt_replicated = sim::distribute_tensor<Replicated>(tensor.data);

  // full_tensor() on every rank is an all_gather to Replicate; reconcile checks they agree.
  auto sharded_actual =
      sim::to_local_tensor(dt_sharded.redistribute<placements<replicate>>()).reconcile();
  auto replicated_actual = sim::to_local_tensor(dt_replicated).reconcile();
  // [/docs:distribute]
  expect(sharded_actual == tensor, "Shard(0): the gathered tensor equals arange(16).reshape(4, 4)");
  expect(replicated_actual == tensor, "Replicate: every rank's local equals the input");
  expect(dt_sharded.full_tensor() == tensor.data, "full_tensor() equals the input");
}

void dtensor_matmul() {
  // [docs:matmul]
  using M = spmd::mesh<4>;
  using A = layout<M, placements<shard<0>>, extents<8, 4>>;
  using B = layout<M, placements<replicate>, extents<4, 6>>;

  const auto a = tutorial::randn({8, 4}, 1), b = tutorial::randn({4, 6}, 2);
  auto da = sim::distribute_tensor<A>(a.data);
  auto db = sim::distribute_tensor<B>(b.data);
  auto dc = sim::matmul(da, db);  // each rank: its 2 rows of a times b; no communication
  static_assert(std::is_same_v<decltype(dc)::placements_type, placements<shard<0>>>);

  const auto expected = tutorial::matmul(a.view(), b.view());  // on one device
  // [/docs:matmul]
  const float diff = tutorial::max_abs_diff(dc.full_tensor(), expected.data);
  expect(diff <= 1e-5f, "a @ b matches one device (max |diff| " + std::to_string(diff) + ")");
}

void dtensor_linear_layer() {
  // [docs:linear]
  using M = spmd::mesh<4>;
  constexpr index_t batch = 16, in = 8, out = 4;
  using X = layout<M, placements<shard<0>>, extents<batch, in>>;
  using W = layout<M, placements<replicate>, extents<in, out>>;
  using Bias = layout<M, placements<replicate>, extents<out>>;

  const auto x = tutorial::randn({batch, in}, 3), w = tutorial::randn({in, out}, 4),
             b = tutorial::randn({out}, 5);
  auto dx = sim::distribute_tensor<X>(x.data);
  auto dw = sim::distribute_tensor<W>(w.data);
  auto db = sim::distribute_tensor<Bias>(b.data);
  auto dy = sim::relu(sim::matmul(dx, dw) + db);  // every op keeps the batch split: no communication
  static_assert(std::is_same_v<decltype(dy)::placements_type, placements<shard<0>>>);

  const auto expected = tutorial::linear_relu(x.view(), w.view(), b.view());  // on one device
  // [/docs:linear]
  const float diff = tutorial::max_abs_diff(dy.full_tensor(), expected.data);
  expect(diff <= 1e-5f,
         "relu(x @ w + b) matches one device (max |diff| " + std::to_string(diff) + ")");
}

int main() {
  std::printf("distribute_and_verify\n");
  distribute_and_verify();
  std::printf("dtensor_matmul\n");
  dtensor_matmul();
  std::printf("dtensor_linear_layer\n");
  dtensor_linear_layer();
  return tutorial::exit_code();
}
