// expect: the new shape has a different number of elements than the tensor
// A reshape (or view) must keep the element count: (4, 6) has 24, (5, 5) has 25.
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/view.hpp"

int main() {
  using L = spmd::layout<spmd::mesh<2>, spmd::placements<spmd::shard<0>>, spmd::extents<4, 6>>;
  const auto x = spmd::sim::distribute_tensor<L>(std::vector<float>(24, 1.f));
  auto y = spmd::sim::reshape<5, 5>(x);
  (void)y;
}
