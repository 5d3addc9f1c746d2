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

  // Collectives on local tensors: spmd::cuda's on the shards copied to the GPU, rank i's
  // result copied back.
  template <class M, class T>
  static spmd::host::host_tensor<T> back(const spmd::cuda::device_set<T>& y, spmd::index_t i) {
    return spmd::cuda::backend::to_host(y, i);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> all_reduce(const spmd::sim::local_tensor<T, M>& x, spmd::index_t i,
                                               spmd::reduce_op op, spmd::dim_mask g) {
    return back<M>(spmd::cuda::all_reduce<M>(spmd::cuda::upload(x.shards()), op, g), i);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> reduce_scatter(const spmd::sim::local_tensor<T, M>& x, spmd::index_t i,
                                                   spmd::reduce_op op, int dim, spmd::dim_mask g) {
    return back<M>(spmd::cuda::reduce_scatter<M>(spmd::cuda::upload(x.shards()), op, dim, g), i);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> broadcast(const spmd::sim::local_tensor<T, M>& x, spmd::index_t i,
                                              spmd::index_t src, spmd::dim_mask g) {
    return back<M>(spmd::cuda::broadcast<M>(spmd::cuda::upload(x.shards()), src, g), i);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> all_gather(const spmd::sim::local_tensor<T, M>& x, spmd::index_t i, int dim,
                                               spmd::dim_mask g) {
    return back<M>(spmd::cuda::all_gather<M>(spmd::cuda::upload(x.shards()), dim, g), i);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> all_to_all(const spmd::sim::local_tensor<T, M>& x, spmd::index_t i, int sd,
                                               int cd, spmd::dim_mask g) {
    return back<M>(spmd::cuda::all_to_all<M>(spmd::cuda::upload(x.shards()), sd, cd, g), i);
  }
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
  suite::grad_cases<spmd::cuda::backend, spmd::mesh<2, 2>>(rep);
  suite::training_cases<spmd::cuda::backend, spmd::mesh<2, 2>>(rep);
  suite::typed_op_cases<spmd::cuda::backend, spmd::mesh<2, 4>>(rep);
  suite::grad_cases<spmd::cuda::backend, spmd::mesh<2, 4>>(rep);
  suite::training_cases<spmd::cuda::backend, spmd::mesh<2, 4>>(rep);
  suite::collective_cases<cuda_runner, spmd::mesh<2, 2>>(rep);
  suite::collective_cases<cuda_runner, spmd::mesh<2, 4>>(rep);
  spmd::cuda::synchronize();
  std::printf("backend cuda: %ld checks, %ld failed\n", rep.checks, rep.failures);
  return rep.failures == 0 && rep.checks > 0 ? 0 : 1;
}
