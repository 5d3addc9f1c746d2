// expect: the ring passes K/V around one mesh dim; these placements split the positions over two
// Context parallelism's ring with the positions split over both dims of a 2x2 mesh: which
// ranks would be neighbours is not one ring (the all-gather method takes this layout).
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/autograd.hpp>

using L = spmd::layout<spmd::mesh<2, 2>, spmd::placements<spmd::shard<1>, spmd::shard<1>>, spmd::extents<2, 8, 8>>;
int main() {
  auto q = spmd::sim::requires_grad(spmd::sim::distribute_tensor<L>(std::vector<float>(128, 1.f)), "q");
  auto y = spmd::runtime::causal_attention<2, spmd::runtime::context_method::ring>(q, q, q);
  (void)y;
}
