// expect: the inner dims differ
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/ops/matmul.hpp>

using M = spmd::mesh<4>;
using A = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<8, 4>>;
using B = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<5, 6>>;
int main() {
  auto y = spmd::sim::matmul(spmd::sim::zeros<float, A>(), spmd::sim::zeros<float, B>());
}
