// spmd/backends/nccl/names.hpp — the NCCL backend's namespace sees the runtime's names
// (spmd::nccl::relu, spmd::nccl::redistribute, ...), as the other backends' do.
#pragma once

#include "spmd/runtime/backend.hpp"

namespace spmd::nccl {
using namespace spmd::runtime;
}  // namespace spmd::nccl
