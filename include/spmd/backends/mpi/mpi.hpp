// spmd/backends/mpi/mpi.hpp — the MPI backend: one process per rank (CPUs, one machine or
// many). DTensor's API and every operator run on it as on the simulation, with the same
// results bit for bit (backends/process/execute.hpp says how).
//
//   environment.hpp    MPI's lifetime, the communicator meshes name, failure handling
//   api.hpp            spmd::mpi::dtensor, distribute_tensor, from_local, factories
//   backend.hpp        spmd::mpi::backend: what the runtime needs from MPI
//   transport.hpp      how the per-rank executor (backends/process/) moves data with MPI
//   communicators.hpp  a communicator per group of mesh ranks, made once
#pragma once

#include "spmd/host/host_tensor.hpp"
#include "spmd/backends/mpi/api.hpp"
#include "spmd/backends/mpi/backend.hpp"
#include "spmd/backends/mpi/collectives.hpp"
#include "spmd/backends/mpi/environment.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/dtensor.hpp"
