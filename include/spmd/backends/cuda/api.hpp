// spmd/backends/cuda/api.hpp — DTensor's API with every rank on one GPU: spmd::cuda::dtensor,
// distribute_tensor (from host data, or from a global tensor already on the device),
// from_local, empty, full, zeros, ones, arange; redistribute, the operators, the TP blocks
// and local_map are spmd::runtime's.
//
//   auto x = spmd::cuda::distribute_tensor<L>(global);   // host vector -> every rank's block
//   auto y = spmd::cuda::redistribute<P>(x);              // one launch per plan step
//   y.local(3);                                           // rank 3's block, device memory
//   y.full_tensor();                                      // back on the host
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <span>
#include <vector>

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/random.hpp"

namespace spmd::cuda {

SPMD_RUNTIME_BACKEND_API(backend);

/// A dtensor from every rank's local, given on the host by rank id (checked against the
/// layout: std::invalid_argument naming the rank and the dim).
template <class Layout, element T>
dtensor<T, Layout> from_local(const std::map<index_t, host_tensor<T>>& by_rank,
                              const Layout& layout = Layout{}) {
  return factories<backend>::from_local<T>(
      layout,
      [&](index_t, index_t r) -> const host_tensor<T>& {
        const auto it = by_rank.find(r);
        if (it == by_rank.end())
          throw std::invalid_argument("spmd::cuda::from_local: no local for rank " + std::to_string(r));
        return it->second;
      },
      "spmd::cuda::from_local");
}

/// Shard a global row-major tensor that is already in device memory (`n` elements at
/// `device_data`, on the current device): sliced on the device by one step launch, then, on a
/// Partial layout, split by one more (device_factories.hpp); nothing goes through the host.
/// Meshes of more than max_launch_ranks ranks take the host path (read back once).
template <class Layout, element T>
dtensor<T, Layout> distribute_device_tensor(const T* device_data, index_t n, const Layout& layout = Layout{}) {
  constexpr const char* who = "spmd::cuda::distribute_device_tensor";
  require_device(who);
  using M = typename Layout::mesh_type;
  if constexpr (M::size <= max_launch_ranks) {
    return dtensor<T, Layout>(runtime::detail::internal_t{}, layout,
                              distribute_on_device<T>(device_data, n, Layout::spec(), layout.extents().to_vec(),
                                                      backend::held<M>(), who));
  } else {
    check_global_count(n, layout.extents().to_vec(), who);
    std::vector<T> host(static_cast<std::size_t>(n));
    if (n > 0)
      check(cudaMemcpyAsync(host.data(), device_data, host.size() * sizeof(T), cudaMemcpyDeviceToHost,
                            current_stream()),
            "cudaMemcpyAsync (device to host)");
    synchronize();
    return distribute_tensor<Layout>(host, layout);
  }
}

}  // namespace spmd::cuda
