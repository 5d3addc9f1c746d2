// bench/compile/mlp_train.cpp — the compile-time cost of data parallelism: one AdamW training
// step of the TP MLP on 2x4 (column- then row-parallel, relu, a mean loss), the weights under
// FSDP × TP (-DFSDP: two fully_shard units, their coalesced all_gathers and reduce_scatters)
// or TP only with their gradients reduced over dp per parameter (without). bench/RESULTS.md
// has the figures: g++ -std=c++20 -O2 -c, with and without -DFSDP.
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/optim.hpp"
#ifdef FSDP
#include "spmd/runtime/data_parallel/fully_shard.hpp"
#endif

using namespace spmd;
namespace rt = spmd::runtime;
using Mesh = mesh<2, 4>::named<"dp", "tp">;
using X = layout<Mesh, placements<shard<0>, replicate>, extents<16, 32>>;
#ifdef FSDP
using Col = placements<shard<0, 1>, shard<0, 0>>;
using Row = placements<shard<0>, shard<1>>;
using RowBias = placements<shard<0>, replicate>;
#else
using Col = placements<replicate, shard<0>>;
using Row = placements<replicate, shard<1>>;
using RowBias = placements<replicate, replicate>;
#endif

float run(const std::vector<float>& x0, const std::vector<float>& w1, const std::vector<float>& b1,
          const std::vector<float>& w2, const std::vector<float>& b2) {
  auto W1 = rt::requires_grad(sim::distribute_tensor<layout<Mesh, Col, extents<64, 32>>>(w1), "w1");
  auto B1 = rt::requires_grad(sim::distribute_tensor<layout<Mesh, Col, extents<64>>>(b1), "b1");
  auto W2 = rt::requires_grad(sim::distribute_tensor<layout<Mesh, Row, extents<32, 64>>>(w2), "w2");
  auto B2 = rt::requires_grad(sim::distribute_tensor<layout<Mesh, RowBias, extents<32>>>(b2), "b2");
  rt::adamw opt({.lr = 1e-3}, W1, B1, W2, B2);
  const auto x = rt::as_variable(sim::distribute_tensor<X>(x0));
  using PX = placements<shard<0>, replicate>;
#ifdef FSDP
  auto up = rt::fully_shard<0>(W1, B1);
  auto down = rt::fully_shard<0>(W2, B2);
  auto h = up.forward([&](const auto& w, const auto& b) { return rt::relu(rt::linear(x, w, b)); });
  auto y = down.forward([&](const auto& w, const auto& b) { return rt::add<PX>(rt::matmul_t(h, w), b); });
#else
  auto y = rt::add<PX>(rt::matmul_t(rt::relu(rt::linear(x, W1, B1)), W2), B2);
#endif
  rt::mean<>(y).backward();
  opt.step();
  return W1.full_tensor()[0];
}
