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
/// A mesh naming ranks of a communicator the user passes: the world split in two halves, each
/// running its own mesh<2> (the other ranks of a half are outside it).
void scoped(suite::report& rep) {
  using namespace spmd;
  const int world = mpi::environment::size(), me = mpi::environment::rank();
  MPI_Comm half = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, me < world / 2 ? 0 : 1, me, &half);
  {
    mpi::communicator_scope scope(half);
    using L = layout<mesh<2>, placements<shard<1>>, extents<3, 5>>;
    const std::vector<double> g = suite::global_values<double>(15);
    const auto x = mpi::distribute_tensor<L>(g);
    const auto y = mpi::redistribute<placements<partial<reduce_op::max>>>(
        mpi::redistribute<placements<shard<0>>>(x));
    const auto ys = sim::redistribute<placements<partial<reduce_op::max>>>(
        sim::redistribute<placements<shard<0>>>(sim::distribute_tensor<L>(g)));
    const int mine = mpi::environment::rank();  // rank in the half
    if (mine < 2)
      rep.check(suite::same_bits<double>(y.local(), ys.local(mine)),
                "a mesh over a user's communicator (half " + std::to_string(me < world / 2) + ")");
    else
      rep.check(y.locals().held_ranks().count() == 0, "outside a mesh over a user's communicator");
  }
  MPI_Comm_free(&half);
}

/// A transposing redistribute's strided pieces travel as derived datatypes made once per
/// geometry: the same redistribute again makes none, and the results stay the simulation's.
void datatypes_kept(suite::report& rep) {
  using namespace spmd;
  using L = layout<mesh<4>, placements<shard<0>>, extents<512, 1024>>;  // pieces: 128 x 256, 128 KiB
  const std::vector<float> g = suite::global_values<float>(512 * 1024);
  const auto ys = sim::redistribute<placements<shard<1>>>(sim::distribute_tensor<L>(g));
  auto& types = mpi::detail::region_types::instance();
  const auto x = mpi::distribute_tensor<L>(g);
  const std::size_t before = types.made();
  const auto y1 = mpi::redistribute<placements<shard<1>>>(x);
  const std::size_t after_one = types.made();
  const auto y2 = mpi::redistribute<placements<shard<1>>>(x);
  const int me = mpi::environment::rank();
  if (me < 4) {
    // the send side is strided (128 runs of 256 of a 1024-wide row); each received piece is
    // one run (whole rows of the 256-wide local) and needs no type
    rep.check(after_one == before + 1, "a strided piece's datatype is made once (" + std::to_string(before) +
                                           " then " + std::to_string(after_one) + ")");
    rep.check(types.made() == after_one, "the same redistribute again makes no datatype (" +
                                             std::to_string(after_one) + " then " + std::to_string(types.made()) + ")");
    rep.check(suite::same_bits<float>(y1.local(), ys.local(me)) && suite::same_bits<float>(y2.local(), ys.local(me)),
              "S(0)->S(1) through kept datatypes, twice");
  }
}

}  // namespace

int main(int argc, char** argv) {
  spmd::mpi::environment env(argc, argv);
  suite::report rep;
  rep.rank = env.rank();
  suite::value_level<mpi_runner>(rep);
  suite::typed_cases<spmd::mpi::backend, spmd::mesh<2, 2>>(rep);
  suite::typed_op_cases<spmd::mpi::backend, spmd::mesh<2, 2>>(rep);
  suite::grad_cases<spmd::mpi::backend, spmd::mesh<2, 2>>(rep);
  suite::training_cases<spmd::mpi::backend, spmd::mesh<2, 2>>(rep);
  if (env.size() >= 8) {
    suite::typed_cases<spmd::mpi::backend, spmd::mesh<2, 4>>(rep);
    suite::typed_op_cases<spmd::mpi::backend, spmd::mesh<2, 4>>(rep);
    suite::grad_cases<spmd::mpi::backend, spmd::mesh<2, 4>>(rep);
    suite::training_cases<spmd::mpi::backend, spmd::mesh<2, 4>>(rep);
  }
  {  // a mesh whose sizes are given at run time: one instantiation, 2x2 then (8 processes) 2x4
    using D = spmd::mesh<spmd::dyn, spmd::dyn>;
    const auto dyn_cases = [&] {
      suite::typed_cases<spmd::mpi::backend, D>(rep);
      suite::typed_op_cases<spmd::mpi::backend, D>(rep);
      suite::grad_cases<spmd::mpi::backend, D>(rep);
      suite::training_cases<spmd::mpi::backend, D>(rep);
    };
    spmd::bind_mesh<D>(spmd::dims<2>{2, 2});
    dyn_cases();
    if (env.size() >= 8) {
      spmd::bind_mesh<D>(spmd::dims<2>{2, 4});
      dyn_cases();
    }
  }
  suite::collective_cases<mpi_runner, spmd::mesh<2, 2>>(rep);
  suite::collective_cases<mpi_runner, spmd::mesh<2, 4>>(rep);
  outside(rep);
  scoped(rep);
  scoped(rep);  // again: a new split may get the freed handle; it must not find the old groups
  datatypes_kept(rep);
  long totals[2] = {rep.checks, rep.failures}, sums[2] = {0, 0};
  MPI_Allreduce(totals, sums, 2, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
  if (env.rank() == 0)
    std::printf("backend mpi, %d processes: %ld checks, %ld failed\n", env.size(), sums[0],
                sums[1]);
  return sums[1] == 0 && sums[0] > 0 ? 0 : 1;
}
