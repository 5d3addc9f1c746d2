// expect: the weight and the bias must have the extents of x's last NormDims dims
// layer_norm<1> of (B, S, H) = (4, 6, 8) needs a weight of (8): (6) is refused at compile time.
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/ops/nn.hpp>

using M = spmd::mesh<2>;
using LX = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<4, 6, 8>>;
using LW = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<6>>;
using LB = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<8>>;

void f(const spmd::sim::dtensor<float, LX>& x, const spmd::sim::dtensor<float, LW>& w,
       const spmd::sim::dtensor<float, LB>& b) {
  (void)spmd::sim::layer_norm<1>(x, w, b);
}
