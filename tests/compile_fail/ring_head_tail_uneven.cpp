// expect: a sequence that cannot be split as asked: head-tail balancing cuts it into 2·cp equal chunks
// Context parallelism's ring over 12 positions in head-tail order on 4 ranks: 8 equal chunks
// of 12 positions do not exist.
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/autograd.hpp>

using L = spmd::layout<spmd::mesh<4>, spmd::placements<spmd::shard<1>>, spmd::extents<2, 12, 8>>;
int main() {
  auto q = spmd::sim::requires_grad(spmd::sim::distribute_tensor<L>(std::vector<float>(192, 1.f)), "q");
  auto y = spmd::runtime::causal_attention<2, spmd::runtime::context_method::ring_head_tail>(q, q, q);
  (void)y;
}
