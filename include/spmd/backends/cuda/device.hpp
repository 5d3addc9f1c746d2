// spmd/backends/cuda/device.hpp — the GPU and the stream the backend works on.
//
// Every rank's local lives in the memory of the current device (cudaGetDevice). All work —
// kernels, copies, allocations (stream-ordered: cudaMallocAsync) — goes on the calling
// thread's current stream: cudaStreamPerThread unless a stream_scope names another. A
// redistribute or an operator does not synchronise the host; reading a local back
// (to_local, full_tensor) waits for the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <string>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/error.hpp"

namespace spmd::cuda {

/// The number of CUDA devices; 0 where there is none or no usable driver.
inline int device_count() noexcept {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

/// True when a GPU can be used.
inline bool available() noexcept { return device_count() > 0; }

/// Throws spmd::cuda::no_device naming `who` where no GPU can be used.
inline void require_device(const char* who) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e == cudaSuccess && n > 0) return;
  (void)cudaGetLastError();
  throw no_device(std::string(who) + ": no CUDA device (" +
                      (e == cudaSuccess ? std::string("cudaGetDeviceCount found none")
                                        : std::string("cudaGetDeviceCount: ") +
                                              cudaGetErrorString(e)) +
                      ")",
                  e == cudaSuccess ? cudaErrorNoDevice : e);
}

namespace detail {
/// What a step_graph's capture (graph.hpp) keeps on the thread that captures: the device
/// allocations made during it that are still alive, and the buffers made before it that the
/// step let go (freed after the capture: a free inside it would be a node of the graph, run by
/// every launch, of memory the graph does not own). Null outside a capture.
struct capture_count {
  unsigned long long id = 0;  // this capture's number (from 1): a buffer names the capture it was made in
  long live = 0;
  std::vector<std::pair<void*, cudaStream_t>> deferred;
};
inline capture_count*& capture_slot() noexcept {
  thread_local capture_count* c = nullptr;
  return c;
}
inline cudaStream_t& stream_slot() {
  thread_local cudaStream_t s = cudaStreamPerThread;
  return s;
}
}  // namespace detail

/// The stream this thread's spmd::cuda work goes on.
inline cudaStream_t current_stream() noexcept { return detail::stream_slot(); }

/// Makes `s` this thread's stream until the scope ends (they nest). The caller keeps `s`
/// alive, and orders it after other streams that used the same tensors.
class stream_scope {
 public:
  explicit stream_scope(cudaStream_t s) : saved_(detail::stream_slot()) { detail::stream_slot() = s; }
  ~stream_scope() { detail::stream_slot() = saved_; }
  stream_scope(const stream_scope&) = delete;
  stream_scope& operator=(const stream_scope&) = delete;

 private:
  cudaStream_t saved_;
};

/// Waits for everything on this thread's stream; throws spmd::cuda::error on a kernel error.
inline void synchronize() { check(cudaStreamSynchronize(current_stream()), "cudaStreamSynchronize"); }

}  // namespace spmd::cuda
