// expect: the forced output placements are not a valid layout of the output
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/ops/matmul.hpp>

using M = spmd::mesh<4>;
using A = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<8, 4>>;
using B = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<4, 6>>;
int main() {
  // The product is 2-d: there is no dim 2 to shard.
  auto y = spmd::sim::matmul<spmd::placements<spmd::shard<2>>>(spmd::sim::zeros<float, A>(),
                                                                 spmd::sim::zeros<float, B>());
}
