// spmd/backends/nccl/backend.hpp — NCCL as a backend: one process per GPU, each holding one
// rank's local in its GPU's memory.
//
// Where the memory lives and the local kernels are the CUDA backend's (device_set, the
// operators' device kernels, cast, upload and download: this backend derives from it); which
// rank a process holds and how a plan's steps run are the MPI backend's (the per-rank
// executor, backends/process/execute.hpp), over the NCCL transport (transport.hpp). Only the
// communicator and the memory differ from MPI.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/host/slot.hpp"
#include "spmd/backends/nccl/communicator.hpp"
#include "spmd/backends/nccl/names.hpp"
#include "spmd/backends/nccl/streams.hpp"
#include "spmd/backends/nccl/transport.hpp"
#include "spmd/backends/process/p2p_part.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/plan/p2p_schedule.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::nccl {

using cuda::device_set;

namespace detail {

/// The parent rank of every mesh index of a mesh of n ranks named by `rank_at`, checked
/// against the communicator: the mesh names each of its ranks (ncclCommSplit runs over all).
template <class RankAt>
std::vector<int> comm_ranks(index_t n, RankAt&& rank_at, ncclComm_t comm, const char* who) {
  int size = 0;
  check(ncclCommCount(comm, &size), "ncclCommCount", comm);
  std::vector<int> r;
  std::vector<char> named(static_cast<std::size_t>(size), 0);
  for (index_t i = 0; i < n; ++i) {
    const index_t k = rank_at(i);
    if (k >= size)
      throw std::invalid_argument(std::string(who) + ": the mesh names rank " + std::to_string(k) +
                                  " but the NCCL communicator has " + std::to_string(size) +
                                  " ranks; launch with mpirun -np " + std::to_string(k + 1) + " or more");
    named[static_cast<std::size_t>(k)] = 1;
    r.push_back(static_cast<int>(k));
  }
  if (n != size)
    throw std::invalid_argument(std::string(who) + ": the mesh has " + std::to_string(n) +
                                " ranks and the NCCL communicator " + std::to_string(size) +
                                "; a mesh names every rank of its communicator (make one of the mesh's "
                                "processes with ncclCommSplit and a communicator_scope)");
  return r;
}

}  // namespace detail

/// Every rank's local of a tensor laid out by `spec`, on the host of every process: each rank
/// sends its local to every other (grouped ncclSend/ncclRecv, exact sizes), then one copy back.
template <class T>
host::local_set<T> gather_locals(const device_set<T>& in, const layout_spec& spec, const shape_vec& global,
                                 const std::vector<int>& ranks) {
  const index_t n = spec.mesh_size();
  host::local_set<T> out(n);
  if (in.held_ranks().count() == 0) return out;
  const index_t me = in.held_ranks().lo;
  std::vector<index_t> displ;
  index_t total = 0;
  for (index_t i = 0; i < n; ++i) {
    out.assign(i, box_at(spec, global, unravel(spec.mesh, i)).shape);
    displ.push_back(total);
    total += out.size(i);
  }
  cuda::device_buffer<T> all(total);
  detail::transport tr(communicator(), spec.mesh, ranks);
  if (in.size(me) > 0) tr.copy(all.data() + displ[static_cast<std::size_t>(me)], in.data(me), whole_geom(in.size(me)));
  for (index_t i = 0; i < n; ++i) {
    if (i == me) continue;
    tr.send(in.data(me), in.size(me), ranks[static_cast<std::size_t>(i)], communicator());
    tr.recv(all.data() + displ[static_cast<std::size_t>(i)], out.size(i), ranks[static_cast<std::size_t>(i)],
            communicator());
  }
  tr.wait();
  std::vector<T> host(static_cast<std::size_t>(total));
  if (total > 0)
    cuda::check(cudaMemcpyAsync(host.data(), all.data(), host.size() * sizeof(T), cudaMemcpyDeviceToHost,
                                cuda::current_stream()),
                "cudaMemcpyAsync (device to host)");
  cuda::synchronize();
  for (index_t i = 0; i < n; ++i)
    for (index_t k = 0; k < out.size(i); ++k) out.data(i)[k] = host[static_cast<std::size_t>(displ[static_cast<std::size_t>(i)] + k)];
  return out;
}

struct backend : cuda::backend {
  static constexpr const char* name = "nccl";

  /// Communication beside compute (fully_shard's prefetch): while an `overlap` lives, the work
  /// this thread issues runs on the device's communication stream, after what the current
  /// stream had queued; finish() ends that and returns the completion, whose wait() makes the
  /// current stream wait for it (the host never blocks).
  class overlap {
   public:
    class completion {
     public:
      explicit completion(cudaEvent_t e) : e_(e) {}
      completion(completion&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
      completion(const completion&) = delete;
      completion& operator=(const completion&) = delete;
      ~completion() {
        if (e_ != nullptr) {  // never waited for: order after it anyway, then drop it
          (void)cudaStreamWaitEvent(cuda::current_stream(), e_, 0);
          (void)cudaEventDestroy(e_);
        }
      }
      void wait() {
        cuda::check(cudaStreamWaitEvent(cuda::current_stream(), e_, 0), "cudaStreamWaitEvent");
        cuda::check(cudaEventDestroy(std::exchange(e_, nullptr)), "cudaEventDestroy");
      }

     private:
      cudaEvent_t e_;
    };

    overlap() : comm_(detail::comm_stream()) {
      const cudaEvent_t ready = detail::record_on(cuda::current_stream());
      cuda::check(cudaStreamWaitEvent(comm_, ready, 0), "cudaStreamWaitEvent");
      cuda::check(cudaEventDestroy(ready), "cudaEventDestroy");
      scope_ = std::make_unique<cuda::stream_scope>(comm_);
    }
    completion finish() {
      scope_.reset();
      return completion(detail::record_on(comm_));
    }

   private:
    cudaStream_t comm_;
    std::unique_ptr<cuda::stream_scope> scope_;
  };
  static overlap begin_overlap() { return overlap(); }

  /// This process's rank in the communicator in use, and a barrier over it (one ncclAllReduce
  /// of an int, waited for): what a checkpoint save coordinates with (io/checkpoint.hpp).
  static int process_rank() { return nccl::rank(); }
  static void barrier() {
    ncclComm_t c = require_communicator("spmd::nccl::barrier");
    int* d = nullptr;
    cuda::check(cudaMalloc(&d, sizeof(int)), "cudaMalloc (barrier)");
    const ncclResult_t rc = ncclAllReduce(d, d, 1, ncclInt32, ncclSum, c, cuda::current_stream());
    const cudaError_t sync = cudaStreamSynchronize(cuda::current_stream());
    cudaFree(d);
    detail::check(rc, "ncclAllReduce (barrier)", c);
    cuda::check(sync, "cudaStreamSynchronize (barrier)");
  }

  /// This process's mesh index: its rank in the communicator in use.
  template <class M>
  static held_range held() {
    ncclComm_t c = require_communicator("spmd::nccl");
    (void)comm_ranks<M>();
    int rank = 0;
    detail::check(ncclCommUserRank(c, &rank), "ncclCommUserRank", c);
    const index_t i = M::index_of(rank);
    return i < 0 ? held_range{0, 0} : held_range{i, i + 1};
  }

  /// The communicator rank of every mesh index of M (checked: the mesh names every rank).
  template <class M>
  static std::vector<int> comm_ranks() {
    return detail::comm_ranks(M::size, [](index_t i) { return M::rank_at(i); },
                              require_communicator("spmd::nccl"), "spmd::nccl");
  }

  template <class T, class Holder, class M, class Ext, class In>
  static device_set<T> run_plan(const Ext& ext, In&& in) {
    const shape_vec global = ext.to_vec();
    const std::vector<int> ranks = comm_ranks<M>();
    detail::transport tr(communicator(), M::shape_vec(), ranks);
    return process::run_schedules<T, device_set<T>>(
        tr, Holder::value, cached_schedules<Holder>(global, "spmd::nccl::redistribute"), global, ranks,
        std::forward<In>(in));
  }

  /// Every rank's local, on this process's host (grouped send/recv, then one copy back).
  template <class T, class M>
  static host::local_set<T> gather_all(const device_set<T>& locals, const layout_spec& spec,
                                       const shape_vec& global) {
    return gather_locals(locals, spec, global, comm_ranks<M>());
  }

  /// One slot of a point-to-point schedule over mesh dim `dim` (plan/p2p_schedule.hpp):
  /// action(n, j) is what group position j of n does; this process sends its block to send_to
  /// and replaces it by the block of recv_from, an ncclSend and an ncclRecv in one group on
  /// the current stream (posted together: a table whose slots are paired cannot deadlock). The
  /// blocks of a group are of one shape: this process receives its own block's size.
  template <class T, class M, class Action>
  static void p2p_slot(device_set<T>& x, int dim, Action&& action) {
    if (x.held_ranks().count() == 0) return;
    const index_t me = x.held_ranks().lo;
    const process::p2p_part part =
        process::p2p_part_of<M>(me, x.size(me) * static_cast<std::int64_t>(sizeof(T)), dim, action);
    if (part.idle()) return;
    const std::vector<int> ranks = comm_ranks<M>();
    auto peer = [&](index_t i) { return ranks[static_cast<std::size_t>(i)]; };
    ncclComm_t comm = communicator();
    const std::size_t bytes = static_cast<std::size_t>(x.size(me)) * sizeof(T);
    cuda::device_buffer<T> in(part.recv_from >= 0 ? x.size(me) : 0);
    const cudaStream_t st = cuda::current_stream();
    if (bytes > 0) {
      detail::check(ncclGroupStart(), "ncclGroupStart", comm);
      if (part.send_to >= 0)
        detail::check(ncclSend(x.data(me), bytes, ncclUint8, peer(part.send_to), comm, st), "ncclSend", comm);
      if (part.recv_from >= 0)
        detail::check(ncclRecv(in.data(), bytes, ncclUint8, peer(part.recv_from), comm, st), "ncclRecv", comm);
      detail::check(ncclGroupEnd(), "ncclGroupEnd (a point-to-point slot)", comm);
    }
    if (part.recv_from >= 0) {
      const shape_vec s = x.shape(me);
      x.adopt(me, std::move(in), s);  // the sent buffer is freed after the send, in stream order
    }
  }
};

/// Run plan `p` on a tensor of global shape `global` (the value-level path): mesh index i is
/// rank i of the communicator in use; `in` holds this process's local in the plan's first
/// state.
template <class T>
device_set<T> execute(const plan& p, const shape_vec& global, const device_set<T>& in) {
  const std::vector<step_schedule> scheds =
      host::detail::checked_schedules<T>(p, global, in, "spmd::nccl::execute");
  if (p.steps.size() == 0) return device_set<T>(in);
  const layout_spec& from = p.steps[0].from;
  const std::vector<int> ranks = detail::comm_ranks(from.mesh_size(), [](index_t i) { return i; },
                                                    require_communicator("spmd::nccl::execute"),
                                                    "spmd::nccl::execute");
  detail::transport tr(communicator(), from.mesh, ranks);
  return process::run_schedules<T, device_set<T>>(tr, p, scheds, global, ranks, in);
}

}  // namespace spmd::nccl
