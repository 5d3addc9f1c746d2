// expect: only floating-point tensors have gradients
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/autograd.hpp>

// An integer dtensor cannot require a gradient (it is not differentiable).
int main() {
  using namespace spmd;
  const std::vector<int> v(8, 1);
  auto x = sim::distribute_tensor<layout<mesh<4>, placements<shard<0>>, extents<8>>>(v);
  (void)sim::requires_grad(x, "counts");
}
