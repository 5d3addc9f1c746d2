// expect: the local tensor's mesh is not the layout's mesh
#include <spmd/backends/sim/sim.hpp>

using L = spmd::layout<spmd::mesh<4>, spmd::placements<spmd::shard<0>>, spmd::extents<8>>;
int main() {
  auto x = spmd::sim::local_mode<spmd::mesh<2, 2>>::zeros<float>({2});
  auto d = spmd::sim::from_local<L>(x);
}
