// expect: exp of an integer dtensor has no integer result
#include <spmd/runtime/ops/elementwise.hpp>
#include <spmd/backends/sim/sim.hpp>

// exp (like log, sqrt, gelu, tanh, sigmoid) is refused for integer elements rather than
// truncated.
int main() {
  using namespace spmd;
  const std::vector<int> v(8, 1);
  const auto x = sim::distribute_tensor<layout<mesh<4>, placements<shard<0>>, extents<8>>>(v);
  (void)sim::exp(x);
}
