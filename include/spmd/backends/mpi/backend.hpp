// spmd/backends/mpi/backend.hpp — MPI as a backend: one process per rank, on CPUs.
//
// `spmd::mpi::backend` gives each process the local of the mesh rank whose id is its rank
// in the communicator in use (environment.hpp), runs plans with the per-rank executor
// (backends/process/execute.hpp) over the MPI transport (transport.hpp), and gathers
// every rank's local for full_tensor with one MPI_Allgatherv over the mesh.
#pragma once

#include "spmd/backends/mpi/mpi_c.hpp"

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/host/local_set.hpp"
#include "spmd/backends/mpi/communicators.hpp"
#include "spmd/backends/mpi/environment.hpp"
#include "spmd/backends/mpi/transport.hpp"
#include "spmd/backends/mpi/names.hpp"
#include "spmd/backends/process/p2p_part.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/lower.hpp"
#include "spmd/plan/p2p_schedule.hpp"
#include "spmd/runtime/comm_counter.hpp"

namespace spmd::mpi {

/// Every rank's local of a tensor laid out by `spec`, in every process of the mesh (one
/// MPI_Allgatherv over the mesh's communicator). ranks: the communicator rank of each mesh
/// index (empty: rank i for mesh index i). A process outside the mesh gets nothing.
template <class T>
local_set<T> gather_locals(const local_set<T>& in, const layout_spec& spec,
                           const shape_vec& global, std::vector<int> ranks = {}) {
  const index_t n = spec.mesh_size();
  local_set<T> out(n);
  if (in.held_ranks().count() == 0) return out;
  if (ranks.empty())
    for (index_t i = 0; i < n; ++i) ranks.push_back(static_cast<int>(i));
  std::vector<int> counts, displs;
  index_t total = 0;
  for (index_t i = 0; i < n; ++i) {
    out.assign(i, box_at(spec, global, unravel(spec.mesh, i)).shape);
    displs.push_back(detail::count_of(total, "full_tensor"));
    counts.push_back(detail::count_of(out.size(i), "full_tensor"));
    total += out.size(i);
  }
  buffer<T> all(total);
  const index_t me = in.held_ranks().lo;
  const MPI_Datatype t = detail::element_type(sizeof(T));
  if (n == 1) {
    if (in.size(me) > 0)
      detail::copy_bytes(all.data(), in.data(me), static_cast<std::size_t>(in.size(me)) * sizeof(T));
  } else {
    detail::check(MPI_Allgatherv(in.data(me), counts[static_cast<std::size_t>(me)], t, all.data(),
                                 counts.data(), displs.data(), t,
                                 detail::group_comm(communicator(), ranks)),
                  "MPI_Allgatherv");
  }
  for (index_t i = 0; i < n; ++i)
    if (out.size(i) > 0)
      detail::copy_bytes(out.data(i), all.data() + displs[static_cast<std::size_t>(i)],
                         static_cast<std::size_t>(out.size(i)) * sizeof(T));
  return out;
}

struct backend {
  static constexpr const char* name = "mpi";

  /// This process's rank in the backend's communicator, and a barrier over it: what a
  /// checkpoint save coordinates with (io/checkpoint.hpp).
  static int process_rank() {
    int rank = 0;
    MPI_Comm_rank(communicator(), &rank);
    return rank;
  }
  static void barrier() { MPI_Barrier(communicator()); }

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
    return detail::run_schedules<T>(
        Holder::value, cached_schedules<Holder>(global, "spmd::mpi::redistribute"), global,
        comm_ranks<M>(), std::forward<In>(in));
  }

  /// A plan known at run time only (a mesh with a dynamic size: plan/dynamic_plan.hpp).
  template <class T, class M, class Key, class Ext, class In>
  static local_set<T> run_plan_value(const plan& p, const Ext& ext, In&& in) {
    const shape_vec global = ext.to_vec();
    return detail::run_schedules<T>(
        p, cached_per_plan<Key>(p, global, [&] { return build_schedules(p, global, "spmd::mpi::redistribute"); }),
        global, comm_ranks<M>(), std::forward<In>(in));
  }

  /// One slot of a point-to-point schedule over mesh dim `dim` (plan/p2p_schedule.hpp):
  /// action(n, j) is what group position j of n does; this rank sends its block to send_to and
  /// replaces it by the block of recv_from, one MPI_Sendrecv (the send and the receive posted
  /// together: a table whose slots are paired cannot deadlock). The blocks of a group are of
  /// one shape: this rank receives its own block's size.
  template <class T, class M, class Action>
  static void p2p_slot(local_set<T>& x, int dim, Action&& action) {
    if (x.held_ranks().count() == 0) return;
    const index_t me = x.held_ranks().lo;
    const process::p2p_part part =
        process::p2p_part_of<M>(me, x.size(me) * static_cast<std::int64_t>(sizeof(T)), dim, action);
    if (part.idle()) return;
    const int peer_to = part.send_to >= 0 ? static_cast<int>(M::rank_at(part.send_to)) : MPI_PROC_NULL;
    const int peer_from = part.recv_from >= 0 ? static_cast<int>(M::rank_at(part.recv_from)) : MPI_PROC_NULL;
    const int count = detail::count_of(x.size(me), "a point-to-point block");
    const MPI_Datatype t = detail::element_type(sizeof(T));
    buffer<T> in(part.recv_from >= 0 ? x.size(me) : 0);
    detail::check(MPI_Sendrecv(x.cdata(me), part.send_to >= 0 ? count : 0, t, peer_to, p2p_tag, in.data(),
                               part.recv_from >= 0 ? count : 0, t, peer_from, p2p_tag, communicator(),
                               MPI_STATUS_IGNORE),
                  "MPI_Sendrecv");
    if (part.recv_from >= 0) {
      const shape_vec s = x.shape(me);
      x.adopt(me, std::move(in), s);
    }
  }
  /// The tag of point-to-point slots (the plan executor's messages are on group communicators).
  static constexpr int p2p_tag = 7;

  /// The communicator rank of every mesh index of M.
  template <class M>
  static std::vector<int> comm_ranks() {
    std::vector<int> r;
    for (index_t i = 0; i < M::size; ++i) r.push_back(static_cast<int>(M::rank_at(i)));
    return r;
  }

  /// Every rank's local, in every process of the mesh (one MPI_Allgatherv).
  template <class T, class M>
  static local_set<T> gather_all(const local_set<T>& in, const layout_spec& spec,
                                 const shape_vec& global) {
    return gather_locals(in, spec, global, comm_ranks<M>());
  }
};

/// Run plan `p` on a tensor of global shape `global` (the value-level path: the CLI, plans
/// made at run time). Mesh index i is rank i of the communicator in use; a process whose
/// rank is outside the plan's mesh holds nothing and takes no part. `in` holds this
/// process's local (local_set(mesh size, held(mesh size))) in the plan's first state.
template <class T>
local_set<T> execute(const plan& p, const shape_vec& global, const local_set<T>& in) {
  const std::vector<step_schedule> scheds =
      detail::checked_schedules<T>(p, global, in, "spmd::mpi::execute");
  std::vector<int> ranks;  // mesh index i is rank i
  for (index_t i = 0; i < in.ranks(); ++i) ranks.push_back(static_cast<int>(i));
  return observe::around([&] { return detail::run_schedules<T>(p, scheds, global, std::move(ranks), in); },
                         [&] {
                           return observe::on_redistribute<T>(p, p.steps[0].from, p.steps[p.steps.size() - 1].to,
                                                              global, in.held_ranks(), false);
                         });
}

/// The mesh index this process holds on a mesh of n ranks named 0..n-1 (none outside it);
/// throws std::invalid_argument on every process when the communicator is smaller.
inline held_range held_of(index_t n) {
  int size = 0, rank = 0;
  MPI_Comm_size(communicator(), &size);
  MPI_Comm_rank(communicator(), &rank);
  if (n > size)
    throw std::invalid_argument("spmd::mpi: the mesh has " + std::to_string(n) +
                                " ranks but the communicator has " + std::to_string(size) +
                                " processes; launch with mpirun -np " + std::to_string(n));
  return rank < n ? held_range{rank, rank + 1} : held_range{0, 0};
}

}  // namespace spmd::mpi
