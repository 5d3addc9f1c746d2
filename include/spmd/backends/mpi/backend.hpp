// spmd/backends/mpi/backend.hpp — MPI as a backend: one process per rank, on CPUs.
//
// `spmd::mpi::backend` gives each process the local of the mesh rank whose id is its rank
// in the communicator in use (environment.hpp), runs plans with execute.hpp, and gathers
// every rank's local for full_tensor with one MPI_Allgatherv over the mesh.
#pragma once

#include <mpi.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/backends/host/local_set.hpp"
#include "spmd/backends/mpi/communicators.hpp"
#include "spmd/backends/mpi/environment.hpp"
#include "spmd/backends/mpi/execute.hpp"
#include "spmd/backends/mpi/names.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::mpi {

struct backend {
  static constexpr const char* name = "mpi";

  /// This process's mesh index (none when the mesh does not name its rank). Every process
  /// checks that the communicator has every rank the mesh names.
  template <class M>
  static held_range held() {
    int init = 0;
    MPI_Initialized(&init);
    if (!init)
      throw std::logic_error("spmd::mpi: MPI is not initialised; make a spmd::mpi::environment "
                             "first (or call MPI_Init)");
    int size = 0, rank = 0;
    MPI_Comm_size(communicator(), &size);
    MPI_Comm_rank(communicator(), &rank);
    index_t top = 0;
    for (index_t i = 0; i < M::size; ++i) top = M::rank_at(i) > top ? M::rank_at(i) : top;
    if (top >= size)
      throw std::invalid_argument(
          "spmd::mpi: the mesh has " + std::to_string(M::size) + " ranks (rank ids up to " +
          std::to_string(top) + ") but the communicator has " + std::to_string(size) +
          " processes; launch with mpirun -np " + std::to_string(top + 1) + " or more");
    const index_t i = M::index_of(rank);
    return i < 0 ? held_range{0, 0} : held_range{i, i + 1};
  }

  template <class T, class Holder, class M, class Ext, class In>
  static local_set<T> run_plan(const Ext& ext, In&& in) {
    const shape_vec global = ext.to_vec();
    return detail::run_schedules<T, M>(
        Holder::value, cached_schedules<Holder>(global, "spmd::mpi::redistribute"), global,
        std::forward<In>(in));
  }

  /// Every rank's local, in every process of the mesh (one MPI_Allgatherv).
  template <class T, class M>
  static local_set<T> gather_all(const local_set<T>& in, const layout_spec& spec,
                                 const shape_vec& global) {
    local_set<T> out(M::size);
    if (in.held_ranks().count() == 0) return out;  // outside the mesh: no part in it
    std::vector<int> counts, displs, ranks;
    index_t total = 0;
    for (index_t i = 0; i < M::size; ++i) {
      out.assign(i, box_at(spec, global, unravel(spec.mesh, i)).shape);
      displs.push_back(detail::count_of(total, "full_tensor"));
      counts.push_back(detail::count_of(out.size(i), "full_tensor"));
      total += out.size(i);
      ranks.push_back(static_cast<int>(M::rank_at(i)));
    }
    buffer<T> all(total);
    const index_t me = in.held_ranks().lo;
    const MPI_Datatype t = detail::element_type(sizeof(T));
    if (M::size == 1) {
      if (in.size(me) > 0) detail::copy_bytes(all.data(), in.data(me), in.size(me) * sizeof(T));
    } else {
      detail::check(MPI_Allgatherv(in.data(me), counts[static_cast<std::size_t>(me)], t,
                                   all.data(), counts.data(), displs.data(), t,
                                   detail::group_comm(communicator(), ranks)),
                    "MPI_Allgatherv");
    }
    for (index_t i = 0; i < M::size; ++i)
      if (out.size(i) > 0)
        detail::copy_bytes(out.data(i), all.data() + displs[static_cast<std::size_t>(i)],
                   static_cast<std::size_t>(out.size(i)) * sizeof(T));
    return out;
  }
};

}  // namespace spmd::mpi
