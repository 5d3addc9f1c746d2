// expect: the ring computes in float or double (on the simulation, MPI, CUDA and NCCL)
// The ring's kernels are BLAS (host) or cuBLAS (device) products in float or double; bfloat16
// composes bmm and softmax with the all-gather method.
#include <spmd/backends/sim/sim.hpp>
#include <spmd/runtime/autograd.hpp>

using L = spmd::layout<spmd::mesh<2>, spmd::placements<spmd::shard<1>>, spmd::extents<2, 8, 8>>;
int main() {
  auto q = spmd::sim::requires_grad(
      spmd::sim::distribute_tensor<L>(std::vector<spmd::bfloat16>(128, spmd::bfloat16(1.f))), "q");
  auto y = spmd::runtime::attention<2, true, spmd::runtime::context_method::ring>(q, q, q);
  (void)y;
}
