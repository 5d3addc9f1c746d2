// expect: the inputs of an operator are on different meshes
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/ops/matmul.hpp>

using A = spmd::layout<spmd::mesh<4>, spmd::placements<spmd::shard<0>>, spmd::extents<8, 4>>;
using B = spmd::layout<spmd::mesh<2, 2>, spmd::placements<spmd::replicate, spmd::replicate>,
                       spmd::extents<4, 6>>;
int main() {
  auto y = spmd::sim::matmul(spmd::sim::zeros<float, A>(), spmd::sim::zeros<float, B>());
}
