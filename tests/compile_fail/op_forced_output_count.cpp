// expect: the forced output placements need one placement per mesh dim
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/ops/matmul.hpp>

using M = spmd::mesh<2, 2>;
using A = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::replicate>, spmd::extents<8, 4>>;
using B = spmd::layout<M, spmd::placements<spmd::replicate, spmd::replicate>, spmd::extents<4, 6>>;
int main() {
  auto y = spmd::sim::matmul<spmd::placements<spmd::replicate>>(spmd::sim::zeros<float, A>(),
                                                                  spmd::sim::zeros<float, B>());
}
