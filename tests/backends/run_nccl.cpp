// tests/backends/run_nccl.cpp — the typed suite on NCCL (one process per GPU): each process
// compares its rank's results with the simulation's (NaN matches NaN: suite.hpp).
//
//   run_nccl                 world 1 (no MPI): a one-rank communicator, every mesh of size 1
//   mpirun -np N run_nccl --mpi   N processes, one GPU each: the full suite
//
// NCCL refuses two ranks on one GPU, so a machine with one GPU runs world 1; the multi-rank
// logic is the MPI backend's executor (backends/process/), tested by suite-mpi-*. Without a
// GPU it says so and exits 77 (meson: skipped).
#include <nccl.h>

#include <cstdio>
#include <cstring>

#include "spmd/backends/nccl/environment.hpp"
#include "spmd/backends/nccl/nccl.hpp"
#include "suite.hpp"

namespace {
struct nccl_runner {
  using backend = spmd::nccl::backend;
  static spmd::host::held_range held(spmd::index_t n) {
    const int r = spmd::nccl::rank();
    return r < n ? spmd::host::held_range{r, r + 1} : spmd::host::held_range{0, 0};
  }
  template <class T>
  static spmd::host::local_set<T> execute(const spmd::plan& p, const spmd::shape_vec& global,
                                          const spmd::host::local_set<T>& in) {
    return spmd::cuda::download(spmd::nccl::execute(p, global, spmd::cuda::upload(in)));
  }
  static spmd::index_t world() { return spmd::nccl::size(); }
};

/// Every mesh of the world's size (1-d, and 2-d/3-d with ones) through the value level.
template <class Runner>
void world_meshes(suite::report& rep) {
  using suite::vec;
  const spmd::index_t n = Runner::world();
  const std::vector<spmd::shape_vec> shapes = {vec({8, 12}), vec({5, 7}), vec({3, 0}), vec({1, 3})};
  const std::vector<spmd::reduce_op> ops = {spmd::reduce_op::sum, spmd::reduce_op::max, spmd::reduce_op::avg};
  const auto m1 = vec<spmd::mesh_shape_vec>({n});
  suite::sweep<Runner, float>(rep, m1, suite::layouts(1, ops), shapes);
  suite::sweep<Runner, double>(rep, m1, suite::layouts(1, ops), shapes);
  suite::sweep<Runner, spmd::bfloat16>(rep, m1, suite::layouts(1, ops), shapes);
  suite::sweep<Runner, spmd::float16>(rep, m1, suite::layouts(1, ops), shapes);
  suite::sweep<Runner, std::int32_t>(rep, m1, suite::layouts(1, ops), shapes);
  suite::sweep<Runner, std::int64_t>(rep, m1, suite::layouts(1, ops), shapes);
  suite::sweep<Runner, float>(rep, vec<spmd::mesh_shape_vec>({1, n}), suite::layouts(2, ops), shapes);
  suite::sweep<Runner, float>(rep, vec<spmd::mesh_shape_vec>({n, 1, 1}), suite::layouts(3, {spmd::reduce_op::sum}),
                              {vec({8, 12}), vec({5, 7})}, 3);
}
}  // namespace

int main(int argc, char** argv) {
  const bool with_mpi = argc > 1 && std::strcmp(argv[1], "--mpi") == 0;
  if (!spmd::cuda::available()) {
    std::printf("SKIP backend nccl: no CUDA device on this machine (the NCCL suite needs a GPU)\n");
    return 77;
  }
  suite::report rep;
  auto run = [&] {
    world_meshes<nccl_runner>(rep);
    if (spmd::nccl::size() == 1) {
      suite::typed_cases<spmd::nccl::backend, spmd::mesh<1, 1>>(rep);
      suite::typed_op_cases<spmd::nccl::backend, spmd::mesh<1, 1>>(rep);
      suite::grad_cases<spmd::nccl::backend, spmd::mesh<1, 1>>(rep);
      suite::training_cases<spmd::nccl::backend, spmd::mesh<1, 1>>(rep);
    } else if (spmd::nccl::size() == 4) {
      suite::typed_cases<spmd::nccl::backend, spmd::mesh<2, 2>>(rep);
      suite::typed_op_cases<spmd::nccl::backend, spmd::mesh<2, 2>>(rep);
      suite::grad_cases<spmd::nccl::backend, spmd::mesh<2, 2>>(rep);
      suite::training_cases<spmd::nccl::backend, spmd::mesh<2, 2>>(rep);
    } else if (spmd::nccl::size() == 8) {
      suite::typed_cases<spmd::nccl::backend, spmd::mesh<2, 4>>(rep);
      suite::typed_op_cases<spmd::nccl::backend, spmd::mesh<2, 4>>(rep);
      suite::grad_cases<spmd::nccl::backend, spmd::mesh<2, 4>>(rep);
      suite::training_cases<spmd::nccl::backend, spmd::mesh<2, 4>>(rep);
    }
    spmd::cuda::synchronize();
  };
  if (with_mpi) {
    spmd::nccl::environment env(argc, argv);
    run();
    std::printf("[rank %d] backend nccl (world %d): %ld checks, %ld failed\n", spmd::nccl::rank(),
                spmd::nccl::size(), rep.checks, rep.failures);
  } else {
    ncclUniqueId id{};
    ncclComm_t comm = nullptr;
    spmd::nccl::detail::check(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
    spmd::nccl::detail::check(ncclCommInitRank(&comm, 1, id, 0), "ncclCommInitRank", nullptr);
    {
      spmd::nccl::communicator_scope scope(comm);
      run();
    }
    ncclCommDestroy(comm);
    std::printf("backend nccl (world 1): %ld checks, %ld failed\n", rep.checks, rep.failures);
  }
  return rep.failures == 0 && rep.checks > 0 ? 0 : 1;
}
