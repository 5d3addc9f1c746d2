// LocalTensor tutorial, example 6: 2-d (dp, tp) and 3-d (pp, dp, tp) meshes.
// docs/tutorial.md quotes the marked regions.
#include <cstdio>
#include <type_traits>

#include <spmd/runtime/ops/matmul.hpp>
#include <spmd/backends/sim/sim.hpp>

#include "tutorial_support.hpp"

using spmd::extents;
using spmd::layout;
using spmd::placements;
using spmd::replicate;
using spmd::shard;
using tutorial::expect;
namespace sim = spmd::sim;

void create_2d_mesh() {
  // [docs:mesh_2d]
  using Mesh = spmd::mesh<4, 2>::named<"dp", "tp">;  // 8 ranks: 4-way data x 2-way tensor
  static_assert(Mesh::shape() == spmd::dims<2>{4, 2});
  static_assert(Mesh::name(0) == "dp" && Mesh::name(1) == "tp");
  static_assert(Mesh::size == 8);
  static_assert(Mesh::dim<"tp">() == 1);
  // [/docs:mesh_2d]
  std::printf("  static  mesh (4, 2) named dp, tp: shape, names and size checked by the compiler\n");
}

void hybrid_parallelism() {
  // [docs:hybrid]
  using Mesh = spmd::mesh<4, 2>::named<"dp", "tp">;
  using X = layout<Mesh, placements<shard<0>, replicate>, extents<16, 8>>;   // batch on dp
  using W = layout<Mesh, placements<replicate, shard<1>>, extents<8, 12>>;   // columns on tp

  const auto x = tutorial::randn({16, 8}, 6), w = tutorial::randn({8, 12}, 7);
  auto dx = sim::distribute_tensor<X>(x.data);
  auto dw = sim::distribute_tensor<W>(w.data);
  // Rank (i, j) multiplies batch block i by column block j: (4 x 8) @ (8 x 6), no communication.
  auto dy = sim::matmul(dx, dw);
  static_assert(std::is_same_v<decltype(dy)::placements_type, placements<shard<0>, shard<1>>>);

  const auto expected = tutorial::matmul(x.view(), w.view());
  // [/docs:hybrid]
  const float diff = tutorial::max_abs_diff(dy.full_tensor(), expected.data);
  expect(diff <= 1e-5f, "x @ w matches one device (max |diff| " + std::to_string(diff) + ")");
}

void create_3d_mesh() {
  // [docs:mesh_3d]
  using Mesh = spmd::mesh<2, 3, 4>::named<"pp", "dp", "tp">;  // 24 ranks
  using L = layout<Mesh, placements<replicate, shard<0>, shard<2>>, extents<8, 16, 32>>;
  static_assert(L{}.local_shape(0) == spmd::dims<3>{3, 16, 8});   // dp: 8 = 3 + 3 + 2
  static_assert(L{}.local_shape(23) == spmd::dims<3>{2, 16, 8});

  const auto tensor = tutorial::randn({8, 16, 32}, 8);
  auto dt = sim::distribute_tensor<L>(tensor.data);
  auto actual = sim::to_local_tensor(dt.redistribute<placements<replicate, replicate, replicate>>())
                    .reconcile();
  // [/docs:mesh_3d]
  expect(actual == tensor, "(8, 16, 32) over [R, S(0), S(2)] gathers back exactly");
  expect(dt.full_tensor() == tensor.data, "full_tensor() equals the input");
}

int main() {
  std::printf("create_2d_mesh\n");
  create_2d_mesh();
  std::printf("hybrid_parallelism\n");
  hybrid_parallelism();
  std::printf("create_3d_mesh\n");
  create_3d_mesh();
  return tutorial::exit_code();
}
