// expect: the tensors' collectives differ
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/coalesce.hpp>

// An all_gather and an all_reduce cannot share one collective.
int main() {
  using namespace spmd;
  using M = mesh<2>;
  const std::vector<float> v(4, 1.f);
  auto a = sim::distribute_tensor<layout<M, placements<shard<0>>, extents<4>>>(v);
  auto b = sim::distribute_tensor<layout<M, placements<partial<>>, extents<4>>>(v);
  (void)runtime::redistribute_coalesced<runtime::to<placements<replicate>, placements<replicate>>>(a, b);
}
