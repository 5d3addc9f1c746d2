// spmd/backends/nccl/api.hpp — DTensor's API with one process per GPU: spmd::nccl::dtensor,
// distribute_tensor, from_local (this process's local), the factories; redistribute, the
// operators, the TP blocks and local_map are spmd::runtime's, running on this process's GPU.
#pragma once

#include "spmd/backends/nccl/backend.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/random.hpp"

namespace spmd::nccl {

SPMD_RUNTIME_BACKEND_API(backend);

/// A dtensor from this process's local (DTensor.from_local), given on the host: checked
/// against the block the layout gives this process's rank (std::invalid_argument naming the
/// rank and the dim), then copied to the GPU.
template <class Layout, element T>
dtensor<T, Layout> from_local(const host_tensor<T>& mine, const Layout& layout = Layout{}) {
  return factories<backend>::from_local<T>(
      layout, [&](index_t, index_t) -> const host_tensor<T>& { return mine; }, "spmd::nccl::from_local");
}

}  // namespace spmd::nccl
