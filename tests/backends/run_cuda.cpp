// tests/backends/run_cuda.cpp — the typed suite with every rank on one GPU (spmd::cuda): each
// rank's local against the simulation's, bit for bit. Built with the host compiler and the
// spmd_cuda kernels; without a GPU it says so and exits 77 (meson: skipped).
#include <cstdio>

#include "spmd/backends/cuda/cuda.hpp"
#include "suite.hpp"

namespace {
struct cuda_runner {
  using backend = spmd::cuda::backend;
  static spmd::host::held_range held(spmd::index_t n) { return {0, n}; }
  template <class T>
  static spmd::host::local_set<T> execute(const spmd::plan& p, const spmd::shape_vec& global,
                                          const spmd::host::local_set<T>& in) {
    return spmd::cuda::download(spmd::cuda::execute(p, global, spmd::cuda::upload(in)));
  }
  static spmd::index_t world() { return 8; }
};
}  // namespace

int main() {
  if (!spmd::cuda::available()) {
    std::printf("SKIP backend cuda: no CUDA device on this machine (the typed suite needs a GPU)\n");
    return 77;
  }
  suite::report rep;
  suite::value_level<cuda_runner>(rep);
  suite::typed_cases<spmd::cuda::backend, spmd::mesh<2, 2>>(rep);
  suite::typed_cases<spmd::cuda::backend, spmd::mesh<2, 4>>(rep);
  suite::typed_op_cases<spmd::cuda::backend, spmd::mesh<2, 2>>(rep);
  suite::typed_op_cases<spmd::cuda::backend, spmd::mesh<2, 4>>(rep);
  spmd::cuda::synchronize();
  std::printf("backend cuda: %ld checks, %ld failed\n", rep.checks, rep.failures);
  return rep.failures == 0 && rep.checks > 0 ? 0 : 1;
}
