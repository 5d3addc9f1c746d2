// spmd/backends/nccl/nccl.hpp — the NCCL backend: one process per GPU, on one node or many.
// DTensor's API and every operator run on it as on the CUDA backend, with the MPI backend's
// per-rank execution of plans; results equal the simulation's bit for bit where
// docs/backends.md says so.
//
//   environment.hpp    MPI launch, device by local rank, the NCCL communicator, failures
//   communicator.hpp   the communicator in use (yours: communicator_scope), group splits
//   transport.hpp      how the per-rank executor moves data with NCCL (pack, NCCL, unpack)
//   backend.hpp        spmd::nccl::backend: what the runtime needs
//   api.hpp            spmd::nccl::dtensor, distribute_tensor, from_local, factories
//   async.hpp          redistribute_async: overlap with compute (a comm stream and an event)
#pragma once

#include "spmd/backends/cuda/cuda.hpp"
#include "spmd/backends/nccl/api.hpp"
#include "spmd/backends/nccl/async.hpp"
#include "spmd/backends/nccl/backend.hpp"
#include "spmd/backends/nccl/communicator.hpp"
#include "spmd/backends/nccl/transport.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/dtensor.hpp"
