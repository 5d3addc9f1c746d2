// spmd/backends/nccl/pipeline.hpp — a pipeline over NCCL processes (one GPU each): the world
// cut into one group of processes per pipeline rank, and the link that runs a slot's
// transfers between them with NCCL (runtime/pipeline.hpp runs the table).
//
//   spmd::nccl::environment env(argc, argv);
//   spmd::nccl::pipeline_world world(4);                       // 4 pipeline ranks
//   spmd::nccl::communicator_scope in_group(world.group());    // meshes name the group's ranks
//   spmd::nccl::pipeline_link link{world};
//   runtime::pipeline::run(table, dims, stages, link, {world.pipeline_rank()});
//
// The groups are mpi::pipeline_world's (world rank w is mesh index w mod g of pipeline rank
// w / g, pp outermost), made twice: as NCCL communicators split from the environment's (the
// group's, which meshes name, and the one across the groups, one process of each, which the
// link sends on), and as MPI communicators (`host()`: the host's exchanges beside the
// pipeline, a file the groups write together). A slot's sends and receives are one
// ncclGroupStart ... ncclGroupEnd on the current stream, finished before the next slot as the
// MPI link's MPI_Waitall is, which is what makes a checked table free of deadlock
// (plan/pipeline_schedule.hpp).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/mpi/pipeline.hpp"
#include "spmd/backends/nccl/backend.hpp"
#include "spmd/backends/nccl/communicator.hpp"
#include "spmd/backends/nccl/error.hpp"
#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/pipeline.hpp"

namespace spmd::nccl {

/// The world split into `ranks` pipeline ranks, as NCCL and as MPI communicators.
class pipeline_world {
 public:
  explicit pipeline_world(int ranks) : host_(ranks) {
    ncclComm_t world = require_communicator("spmd::nccl::pipeline_world");
    const int mesh_index = host_.world_rank() % host_.group_size();
    // Both splits are collective over the whole environment communicator, in this order on
    // every process.
    detail::check(ncclCommSplit(world, host_.pipeline_rank(), mesh_index, &group_, nullptr), "ncclCommSplit", world);
    detail::check(ncclCommSplit(world, mesh_index, host_.pipeline_rank(), &across_, nullptr), "ncclCommSplit", world);
    std::lock_guard<std::recursive_mutex> lock(detail::comms().mu);
    detail::comms().known.push_back(across_);  // aborted with the others when a rank fails
  }
  pipeline_world(const pipeline_world&) = delete;
  pipeline_world& operator=(const pipeline_world&) = delete;
  ~pipeline_world() {
    {
      std::lock_guard<std::recursive_mutex> lock(detail::comms().mu);
      std::erase(detail::comms().known, across_);
    }
    if (across_ != nullptr) (void)ncclCommDestroy(across_);
    if (group_ != nullptr) (void)ncclCommDestroy(group_);
  }

  int pipeline_rank() const { return host_.pipeline_rank(); }
  int group_size() const { return host_.group_size(); }
  /// This process's pipeline rank's processes: install it with communicator_scope (after
  /// this object, so that the scope ends first).
  ncclComm_t group() const { return group_; }
  /// One process per pipeline rank (this one's mesh index in each group), ranked by pipeline rank.
  ncclComm_t across() const { return across_; }
  /// The same groups as MPI communicators, for the host's exchanges.
  const mpi::pipeline_world& host() const { return host_; }

 private:
  mpi::pipeline_world host_;
  ncclComm_t group_ = nullptr, across_ = nullptr;
};

/// runtime::pipeline's link over NCCL: a slot's send and receives of this process's blocks
/// (GPU memory) grouped on the current stream, then the stream synchronised.
struct pipeline_link {
  const pipeline_world& world;

  template <class Table, class Act>
  void exchange(const Table& t, int slot, std::span<const int> mine,
                std::vector<runtime::pipeline::store<Act>>& stores) const {
    using T = typename Act::value_type;
    const cudaStream_t stream = cuda::current_stream();
    for (const int r : mine) {
      const pp::cell& c = t(slot, r);
      if (c.send.peer < 0 && c.recv[0].peer < 0 && c.recv[1].peer < 0) continue;
      runtime::pipeline::slot_transfers<Act, backend> x(c, stores[static_cast<std::size_t>(r)], "spmd::nccl::pipeline_link");
      const ncclComm_t across = world.across();
      detail::check(ncclGroupStart(), "ncclGroupStart", across);
      if (x.sending)
        if (const auto [p, count] = x.block(*x.sending); count > 0)
          detail::check(ncclSend(p, static_cast<std::size_t>(count) * sizeof(T), ncclUint8, c.send.peer, across, stream),
                        "ncclSend", across);
      for (auto& a : x.receiving)
        if (const auto [p, count] = x.block(a.value); count > 0)
          detail::check(ncclRecv(p, static_cast<std::size_t>(count) * sizeof(T), ncclUint8, a.peer, across, stream),
                        "ncclRecv", across);
      detail::check(ncclGroupEnd(), "ncclGroupEnd (a pipeline slot's send and receives)", across);
      // the sent tensor is freed, and the received ones read, after the stream has moved them
      cuda::check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (a pipeline slot's transfers)");
      x.arrived();
    }
  }
};

}  // namespace spmd::nccl
