// spmd/backends/cuda/names.hpp — the CUDA backend's namespace sees the runtime's names
// (spmd::cuda::relu, spmd::cuda::redistribute, ...), as spmd::sim and spmd::mpi do.
#pragma once

#include "spmd/runtime/backend.hpp"

namespace spmd::cuda {
using namespace spmd::runtime;
}  // namespace spmd::cuda
