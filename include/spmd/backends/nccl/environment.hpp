// spmd/backends/nccl/environment.hpp — an NCCL job launched like an MPI one: MPI starts the
// processes and carries NCCL's unique id; NCCL moves the data.
//
//   int main(int argc, char** argv) {
//     spmd::nccl::environment env(argc, argv);    // MPI_Init, cudaSetDevice, ncclCommInitRank
//     auto x = spmd::nccl::distribute_tensor<L>(global);
//   }
//
// The device is the process's rank among the processes of its node (MPI_COMM_TYPE_SHARED)
// modulo the node's GPUs, unless the constructor is given one. Rank 0 makes the unique id and
// MPI_Bcast gives it to every rank; the communicator spans MPI_COMM_WORLD, rank for rank.
//
// Failure on one rank never leaves the others waiting: the terminate handler aborts every
// NCCL communicator spmd knows of (ncclCommAbort) and then the MPI job (MPI_Abort, with the
// message "spmd::mpi: rank R of N failed: <what>" and exit code 2 for bad input, else 1).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <exception>
#include <mutex>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/mpi/environment.hpp"
#include "spmd/backends/nccl/communicator.hpp"
#include "spmd/backends/nccl/error.hpp"

namespace spmd::nccl {

namespace detail {

inline void on_terminate() {
  abort_all();
  mpi::detail::on_terminate();
}

}  // namespace detail

class environment {
 public:
  /// device < 0: the node-local rank modulo the node's GPUs.
  environment(int& argc, char**& argv, int device = -1) : mpi_(argc, argv) {
    std::set_terminate(detail::on_terminate);
    const int rank = mpi::environment::rank(), size = mpi::environment::size();
    if (device < 0) {
      MPI_Comm node = MPI_COMM_NULL;
      mpi::detail::check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node),
                         "MPI_Comm_split_type");
      int local = 0;
      MPI_Comm_rank(node, &local);
      MPI_Comm_free(&node);
      cuda::require_device("spmd::nccl::environment");
      device = local % cuda::device_count();
    }
    cuda::check(cudaSetDevice(device), "cudaSetDevice");
    ncclUniqueId id{};
    if (rank == 0) detail::check(ncclGetUniqueId(&id), "ncclGetUniqueId", nullptr);
    mpi::detail::check(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD), "MPI_Bcast (the NCCL unique id)");
    detail::check(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank", nullptr);
    auto& r = detail::comms();
    std::lock_guard<std::recursive_mutex> lock(r.mu);
    r.world = comm_;
    r.known.push_back(comm_);
    device_ = device;
  }
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
  ~environment() {
    auto& r = detail::comms();
    std::lock_guard<std::recursive_mutex> lock(r.mu);
    for (auto& [key, c] : r.splits) (void)ncclCommDestroy(c);
    r.splits.clear();
    if (r.world == comm_) {
      (void)ncclCommDestroy(comm_);
      r.world = nullptr;
    }
    r.known.clear();
  }

  /// The communicator (MPI_COMM_WORLD's ranks) and this process's GPU.
  ncclComm_t comm() const { return comm_; }
  int device() const { return device_; }

 private:
  mpi::environment mpi_;
  ncclComm_t comm_ = nullptr;
  int device_ = 0;
};

}  // namespace spmd::nccl
