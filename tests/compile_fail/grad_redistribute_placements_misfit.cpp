// expect: the grad_placements do not fit the tensor
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/autograd.hpp>

// redistribute's grad_placements must be a layout of the output: one placement per mesh dim.
int main() {
  using namespace spmd;
  const std::vector<float> v(8, 1.f);
  auto x = sim::requires_grad(sim::distribute_tensor<layout<mesh<2, 2>, placements<shard<0>, replicate>, extents<8>>>(v), "x");
  (void)sim::redistribute<placements<replicate, replicate>>(x, sim::grad_placements<placements<replicate>>);
}
