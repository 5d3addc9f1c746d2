// spmd/backends/mpi/transport.hpp — how the per-rank executor (backends/process/execute.hpp)
// moves data with MPI: host memory, the host kernels, MPI_Isend/MPI_Irecv per piece.
//
//   messages      each send and receive is posted at once (MPI_Isend/MPI_Irecv on the
//                 group's communicator, element type = a contiguous type of sizeof(T) bytes)
//                 and wait() finishes them all (MPI_Waitall);
//   strided       a piece of 64 KiB or more that is not one run travels as an MPI derived
//                 datatype (the runs where they lie; made once per geometry: datatypes.hpp);
//                 smaller ones are packed by the executor;
//   all_reduce    max, min and integer sum/product give the same bits in any order: those run
//                 as one MPI_Allreduce with spmd's own MPI_Op (NaN-propagating max/min,
//                 wrapping integers, 16-bit floats through float); the others in group order
//                 (the executor's chunks) and MPI_Allgatherv.
#pragma once

#include "spmd/backends/mpi/mpi_c.hpp"

#include <cstddef>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/host/buffer.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/host/slot.hpp"
#include "spmd/backends/mpi/communicators.hpp"
#include "spmd/backends/mpi/datatypes.hpp"
#include "spmd/backends/mpi/environment.hpp"
#include "spmd/backends/mpi/names.hpp"
#include "spmd/backends/process/execute.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::mpi::detail {

// --- reductions MPI may run in any order --------------------------------------------------

template <class T>
constexpr bool order_free(reduce_op op) {
  return op == reduce_op::max || op == reduce_op::min ||
         (std::is_integral_v<T> && (op == reduce_op::sum || op == reduce_op::product));
}

template <class T, reduce_op Op>
void combine_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = combine<Op>(a[i], b[i]);  // commutative: any order
}

/// spmd's MPI_Op for (T, op), made once.
template <class T>
MPI_Op mpi_op(reduce_op op) {
  auto make = [](MPI_User_function* f) {
    MPI_Op o;
    check(MPI_Op_create(f, 1, &o), "MPI_Op_create");
    return o;
  };
  switch (op) {
    case reduce_op::max: {
      static const MPI_Op o = make(&combine_fn<T, reduce_op::max>);
      return o;
    }
    case reduce_op::min: {
      static const MPI_Op o = make(&combine_fn<T, reduce_op::min>);
      return o;
    }
    case reduce_op::product: {
      static const MPI_Op o = make(&combine_fn<T, reduce_op::product>);
      return o;
    }
    default: {
      static const MPI_Op o = make(&combine_fn<T, reduce_op::sum>);
      return o;
    }
  }
}

/// Pieces of at least this many bytes that are not one run travel as MPI derived datatypes
/// (the runs where they lie, no packing by spmd); smaller ones are packed, which costs less
/// than making a datatype (bench/RESULTS.md).
#ifndef SPMD_MPI_DATATYPE_MIN_BYTES
#define SPMD_MPI_DATATYPE_MIN_BYTES (64 * 1024)
#endif
inline constexpr index_t datatype_min_bytes = SPMD_MPI_DATATYPE_MIN_BYTES;

/// True when a piece should travel as derived datatypes.
template <class T>
bool as_datatype(const run_geom& g) {
  return g.contiguous() && g.nd > 0 &&
         static_cast<std::size_t>(g.count()) * sizeof(T) >= static_cast<std::size_t>(datatype_min_bytes);
}

/// The MPI transport of the per-rank executor, for one plan run on `parent`'s ranks.
struct transport {
  using comm_type = MPI_Comm;
  template <class T>
  using buffer = host::buffer<T>;

  MPI_Comm parent = MPI_COMM_NULL;

  MPI_Comm group(const std::vector<int>& ranks, const process::group_split&) {
    return group_comm(parent, ranks);
  }

  // Region kernels: the simulation's.
  template <class T>
  void copy(T* out, const T* in, const run_geom& g) { copy_region(out, in, g); }
  template <class T>
  void move(T* out, const T* in, const run_geom& g) { move_region(out, in, g); }
  template <class T>
  void fill(T* out, const run_geom& g, T v) { fill_region(out, g, v); }
  template <class T>
  void scale(T* out, const T* in, const run_geom& g, index_t n) { scale_region(out, in, g, n); }
  template <class T>
  void reduce(reduce_op op, T* out, const T* const* in, index_t n, const run_geom& g) {
    reduce_region(op, out, in, n, g);
  }

  // Messages of one step.
  template <class T>
  void send(const T* p, index_t n, int peer, MPI_Comm c) {
    post_send(p, count_of(n, "a message"), element_type(sizeof(T)), peer, c);
  }
  template <class T>
  void recv(T* p, index_t n, int peer, MPI_Comm c) {
    post_recv(p, count_of(n, "a message"), element_type(sizeof(T)), peer, c);
  }
  template <class T>
  bool send_region(const T* base, const run_geom& g, int peer, MPI_Comm c) {
    if (!as_datatype<T>(g)) return false;
    post_send(base + g.soff, 1, region_type(g, true, element_type(sizeof(T)), sizeof(T)), peer, c);
    return true;
  }
  template <class T>
  bool recv_region(T* base, const run_geom& g, int peer, MPI_Comm c) {
    if (!as_datatype<T>(g)) return false;
    post_recv(base + g.doff, 1, region_type(g, false, element_type(sizeof(T)), sizeof(T)), peer, c);
    return true;
  }
  /// Lets MPI move the posted messages along (their fragments move only inside MPI calls).
  void progress() {
    int done = 0;
    if (!reqs.empty())
      check(MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE),
            "MPI_Testall");
  }
  void wait() {
    if (!reqs.empty())
      check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
    reqs.clear();
  }

  template <class T>
  bool all_reduce(reduce_op op, const T* in, T* out, index_t len, MPI_Comm c) {
    if (!order_free<T>(op)) return false;
    check(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, count_of(len, "an all_reduce"),
                        element_type(sizeof(T)), mpi_op<T>(op), c),
          "MPI_Allreduce");
    return true;
  }
  template <class T>
  void all_gatherv(T* out, const std::vector<index_t>& counts, const std::vector<index_t>& displs,
                   index_t, MPI_Comm c) {
    std::vector<int> cs, ds;
    for (std::size_t j = 0; j < counts.size(); ++j) {
      cs.push_back(count_of(counts[j], "an all_reduce"));
      ds.push_back(count_of(displs[j], "an all_reduce"));
    }
    const MPI_Datatype t = element_type(sizeof(T));
    check(MPI_Allgatherv(MPI_IN_PLACE, 0, t, out, cs.data(), ds.data(), t, c), "MPI_Allgatherv");
  }

  transport() = default;
  explicit transport(MPI_Comm p) : parent(p) {}
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

 private:
  void post_send(const void* p, int n, MPI_Datatype t, int peer, MPI_Comm c) {
    reqs.emplace_back();
    check(MPI_Isend(p, n, t, peer, 0, c, &reqs.back()), "MPI_Isend");
  }
  void post_recv(void* p, int n, MPI_Datatype t, int peer, MPI_Comm c) {
    reqs.emplace_back();
    check(MPI_Irecv(p, n, t, peer, 0, c, &reqs.back()), "MPI_Irecv");
  }
  std::vector<MPI_Request> reqs;
};

/// out = op over the group of every member's `in` (len elements each) in group order.
template <class T>
void all_reduce_chunks(reduce_op op, index_t n, index_t pos, MPI_Comm comm, const T* in, T* out,
                       index_t len) {
  transport tr(comm);
  process::all_reduce_chunks(tr, op, n, pos, comm, in, out, len);
}

/// Run checked schedules (build_schedules(p, global)) on this process's locals.
/// comm_rank: the communicator rank of every mesh index.
template <class T, class In>
local_set<T> run_schedules(const plan& p, const std::vector<step_schedule>& scheds,
                           const shape_vec& global, std::vector<int> comm_rank, In&& in) {
  transport tr(communicator());
  return process::run_schedules<T, local_set<T>>(tr, p, scheds, global, std::move(comm_rank),
                                                  std::forward<In>(in));
}

}  // namespace spmd::mpi::detail
