// expect: does not commute with dropout (only sum and avg are linear)
#include <spmd/backends/sim/sim.hpp>

// Dropout of a P(max) tensor is not the P(max) of the members' dropouts: refused.
int main() {
  using namespace spmd;
  using L = layout<mesh<2>, placements<partial<reduce_op::max>>, extents<8>>;
  const auto x = sim::ones<float, L>();
  (void)sim::dropout(x, 0.5);
}
