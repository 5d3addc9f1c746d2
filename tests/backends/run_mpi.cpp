// tests/backends/run_mpi.cpp — the typed suite on MPI: run under mpirun (4 or 8
// processes); each process compares its rank's results with the simulation's, bit for bit.
// Meshes smaller than the world leave the other processes outside the mesh, holding
// nothing (checked too). Every process reports; the exit code is the same on all.
#include "spmd/backends/mpi/mpi_c.hpp"

#include <cstdio>

#include "spmd/backends/mpi/mpi.hpp"
#include "suite.hpp"

namespace {
struct mpi_runner {
  using backend = spmd::mpi::backend;
  static spmd::host::held_range held(spmd::index_t n) { return spmd::mpi::held_of(n); }
  template <class T>
  static spmd::host::local_set<T> execute(const spmd::plan& p, const spmd::shape_vec& global,
                                          const spmd::host::local_set<T>& in) {
    return spmd::mpi::execute(p, global, in);
  }
  static spmd::index_t world() { return spmd::mpi::environment::size(); }

  // Collectives on local tensors: MPI's on this process's tensor (the local of mesh index i).
  template <class M, class T>
  static spmd::host::host_tensor<T> all_reduce(const spmd::sim::local_tensor<T, M>& x,
                                               spmd::index_t i, spmd::reduce_op op, spmd::dim_mask g) {
    return spmd::mpi::all_reduce<M>(x.to_local(M::rank_at(i)), op, g);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> reduce_scatter(const spmd::sim::local_tensor<T, M>& x,
                                                   spmd::index_t i, spmd::reduce_op op, int dim,
                                                   spmd::dim_mask g) {
    return spmd::mpi::reduce_scatter<M>(x.to_local(M::rank_at(i)), op, dim, g);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> broadcast(const spmd::sim::local_tensor<T, M>& x,
                                              spmd::index_t i, spmd::index_t src, spmd::dim_mask g) {
    return spmd::mpi::broadcast<M>(x.to_local(M::rank_at(i)), src, g);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> all_gather(const spmd::sim::local_tensor<T, M>& x,
                                               spmd::index_t i, int dim, spmd::dim_mask g) {
    return spmd::mpi::all_gather<M>(x.to_local(M::rank_at(i)), dim, g);
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> all_to_all(const spmd::sim::local_tensor<T, M>& x,
                                               spmd::index_t i, int sd, int cd, spmd::dim_mask g) {
    return spmd::mpi::all_to_all<M>(x.to_local(M::rank_at(i)), sd, cd, g);
  }
};

/// A process outside the mesh holds empty locals and takes no part.
void outside(suite::report& rep) {
  using namespace spmd;
  using L = layout<mesh<2, 2>, placements<shard<0>, shard<1>>, extents<6, 6>>;
  const auto x = mpi::distribute_tensor<L>(suite::global_values<float>(36));
  const auto y = mpi::redistribute<placements<replicate, replicate>>(x);
  if (mpi::environment::rank() >= 4) {
    rep.check(y.local().size() == 0 && y.locals().held_ranks().count() == 0,
              "a process outside the mesh holds nothing");
    rep.check(y.full_tensor().empty(), "full_tensor outside the mesh is empty");
  } else {
    rep.check(y.local().size() == 36, "a process in the mesh holds its local");
  }
}
}  // namespace

int main(int argc, char** argv) {
  spmd::mpi::environment env(argc, argv);
  suite::report rep;
  rep.rank = env.rank();
  suite::value_level<mpi_runner>(rep);
  suite::typed_cases<spmd::mpi::backend, spmd::mesh<2, 2>>(rep);
  if (env.size() >= 8) suite::typed_cases<spmd::mpi::backend, spmd::mesh<2, 4>>(rep);
  suite::collective_cases<mpi_runner, spmd::mesh<2, 2>>(rep);
  suite::collective_cases<mpi_runner, spmd::mesh<2, 4>>(rep);
  outside(rep);
  long totals[2] = {rep.checks, rep.failures}, sums[2] = {0, 0};
  MPI_Allreduce(totals, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (env.rank() == 0)
    std::printf("backend mpi, %d processes: %ld checks, %ld failed\n", env.size(), sums[0],
                sums[1]);
  return sums[1] == 0 && sums[0] > 0 ? 0 : 1;
}
