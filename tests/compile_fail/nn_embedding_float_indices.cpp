// expect: the indices must be an int32 or int64 dtensor
// An embedding looks rows up by integer index: float indices are refused at compile time.
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/ops/nn.hpp>

using M = spmd::mesh<2>;
using LI = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<4>>;
using LW = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<10, 8>>;

void f(const spmd::sim::dtensor<float, LI>& idx, const spmd::sim::dtensor<float, LW>& w) {
  (void)spmd::sim::embedding(idx, w);
}
