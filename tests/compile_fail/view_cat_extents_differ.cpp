// expect: the tensors' extents differ on a dim other than the cat dim
// cat<0> joins rows: (4, 3) and (2, 5) differ in their columns, so they do not cat.
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/cat.hpp"

int main() {
  using M = spmd::mesh<2>;
  using P = spmd::placements<spmd::replicate>;
  const auto a = spmd::sim::distribute_tensor<spmd::layout<M, P, spmd::extents<4, 3>>>(std::vector<float>(12, 1.f));
  const auto b = spmd::sim::distribute_tensor<spmd::layout<M, P, spmd::extents<2, 5>>>(std::vector<float>(10, 1.f));
  auto c = spmd::sim::cat<0>(a, b);
  (void)c;
}
