// spmd/backends/mpi/api.hpp — DTensor's API on MPI: spmd::mpi::dtensor<T, L>,
// distribute_tensor, from_local (this process's local), empty, full, zeros, ones, arange;
// redistribute, the operators, the TP blocks and local_map are spmd::runtime's.
//
//   spmd::mpi::environment env(argc, argv);
//   auto x = spmd::mpi::distribute_tensor<L>(global);   // every process passes the same
//   auto y = spmd::mpi::redistribute<P>(x);              // MPI collectives on exact boxes
//   y.local();                                           // this process's local
#pragma once

#include "spmd/backends/mpi/backend.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/random.hpp"

namespace spmd::mpi {

SPMD_RUNTIME_BACKEND_API(backend);

/// A dtensor from this process's local (DTensor.from_local): checked against the block the
/// layout gives this process's rank (std::invalid_argument naming the rank and the dim). A
/// process outside the mesh passes anything; it holds an empty local.
template <class Layout, element T>
dtensor<T, Layout> from_local(const host_tensor<T>& mine, const Layout& layout = Layout{}) {
  return factories<backend>::from_local<T>(
      layout, [&](index_t, index_t) -> const host_tensor<T>& { return mine; },
      "spmd::mpi::from_local");
}

}  // namespace spmd::mpi
