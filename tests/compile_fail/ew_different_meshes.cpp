// expect: the two dtensors of an elementwise op are on different meshes
#include <spmd/runtime/ops/elementwise.hpp>
#include <spmd/backends/sim/sim.hpp>

// Elementwise ops run on one mesh: x on 4 ranks plus y on 2 ranks has no rank-by-rank meaning.
int main() {
  using namespace spmd;
  const std::vector<float> v(8, 1.f);
  const auto x = sim::distribute_tensor<layout<mesh<4>, placements<shard<0>>, extents<8>>>(v);
  const auto y = sim::distribute_tensor<layout<mesh<2>, placements<shard<0>>, extents<8>>>(v);
  (void)(x + y);
}
