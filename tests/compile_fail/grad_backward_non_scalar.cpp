// expect: the tensor is not a scalar; call backward(grad_output)
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/autograd.hpp>

// backward() without an output gradient needs a 0-d loss.
int main() {
  using namespace spmd;
  const std::vector<float> v(8, 1.f);
  auto x = sim::requires_grad(sim::distribute_tensor<layout<mesh<4>, placements<shard<0>>, extents<8>>>(v), "x");
  auto y = sim::relu(x);
  y.backward();
}
