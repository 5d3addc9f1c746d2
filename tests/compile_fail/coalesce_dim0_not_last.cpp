// expect: must split tensor dim 0 last
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/coalesce.hpp>

// dp splits dim 0 first and tp splits each dp block: gathering dp leaves pieces that are
// not contiguous in the (R, S(0)) local.
int main() {
  using namespace spmd;
  using M = mesh<2, 2>;
  const std::vector<float> v(8, 1.f);
  auto a = sim::distribute_tensor<layout<M, placements<shard<0>, shard<0>>, extents<8>>>(v);
  (void)runtime::redistribute_coalesced<runtime::to<placements<replicate, shard<0>>>>(a);
}
