// expect: the grad_placements do not fit the tensor
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/autograd.hpp>

// Gradient placements that shard a dim the tensor does not have.
int main() {
  using namespace spmd;
  const std::vector<float> v(8, 1.f);
  auto x = sim::distribute_tensor<layout<mesh<4>, placements<shard<0>>, extents<8>>>(v);
  (void)sim::requires_grad<placements<shard<1>>>(x, "x");
}
