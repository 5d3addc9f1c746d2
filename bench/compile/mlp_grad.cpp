// bench/compile/mlp_grad.cpp — the compile-time cost of gradients: the TP MLP of the demo on
// 2x4 (column- then row-parallel, relu, a mean loss) with -DWITH_GRAD (trainable weights,
// variables, backward) and without (plain dtensors, forward only). bench/RESULTS.md has the
// figures: g++ -std=c++20 -O2 -c, with and without -DWITH_GRAD.
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/reduction.hpp"
#include "spmd/runtime/ops/tp.hpp"
#ifdef WITH_GRAD
#include "spmd/runtime/autograd.hpp"
#endif

using namespace spmd;
namespace rt = spmd::runtime;
using Mesh = mesh<2, 4>::named<"dp", "tp">;
using X = layout<Mesh, placements<shard<0>, replicate>, extents<16, 32>>;
using Up = rt::column_parallel_linear<float, Mesh, 1, 32, 64, sim::backend>;
using Down = rt::row_parallel_linear<float, Mesh, 1, 64, 32, sim::backend>;

float run(const std::vector<float>& x0, const std::vector<float>& w1, const std::vector<float>& b1,
          const std::vector<float>& w2, const std::vector<float>& b2) {
#ifdef WITH_GRAD
  auto up = rt::trainable<Up>::from_full(w1, b1, "up");
  auto down = rt::trainable<Down>::from_full(w2, b2, "down");
  auto x = rt::requires_grad(sim::distribute_tensor<X>(x0), "x");
  auto loss = rt::mean<>(down(rt::relu(up(x))));
  loss.backward();
  return up.weight.grad().full_tensor()[0] + x.grad().full_tensor()[0];
#else
  const Up up = Up::from_full(w1, b1);
  const Down down = Down::from_full(w2, b2);
  const auto x = sim::distribute_tensor<X>(x0);
  return rt::mean<>(down(rt::relu(up(x)))).full_tensor()[0];
#endif
}
