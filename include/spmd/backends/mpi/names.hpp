// spmd/backends/mpi/names.hpp — the MPI backend's namespace sees the runtime's names
// (spmd::mpi::relu(x), spmd::mpi::redistribute<P>(x), spmd::mpi::host_tensor<float>).
#pragma once

#include "spmd/runtime/backend.hpp"

namespace spmd::mpi {
using namespace spmd::runtime;
namespace detail {
using namespace spmd::runtime::detail;
}
}  // namespace spmd::mpi
