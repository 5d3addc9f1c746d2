// spmd/backends/cuda/device_buffer.hpp — n elements of device memory, owned.
//
// Allocated with cudaMallocAsync on the current stream and freed with cudaFreeAsync on the
// stream that allocated it: the free is ordered after the work queued there, so a buffer a
// kernel still reads is never reused early, and both can be captured in a CUDA graph. The
// pool behind cudaMallocAsync keeps freed memory for the next allocation, so a redistribute's
// fresh buffers cost no cudaMalloc after the first call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/core/config.hpp"

namespace spmd::cuda {

namespace detail {
/// Keeps freed memory in the current device's stream-ordered pool (its default release
/// threshold, 0, hands memory back to the driver at every synchronisation, and the next
/// cudaMallocAsync then pays for a fresh mapping). Once per device.
inline void keep_pool_memory() {
  thread_local bool done[64] = {};
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= 64 || done[dev]) return;
  done[dev] = true;
  cudaMemPool_t pool{};
  if (cudaDeviceGetDefaultMemPool(&pool, dev) != cudaSuccess) return;
  std::uint64_t keep = ~std::uint64_t{0};
  (void)cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
}
}  // namespace detail

template <class T>
class device_buffer {
 public:
  device_buffer() = default;
  /// n uninitialised elements (none for n == 0).
  explicit device_buffer(index_t n) : n_(n), stream_(current_stream()) {
    if (n > 0) {
      detail::keep_pool_memory();
      void* p = nullptr;
      check(cudaMallocAsync(&p, static_cast<std::size_t>(n) * sizeof(T), stream_), "cudaMallocAsync");
      p_ = static_cast<T*>(p);
    }
  }
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), stream_(o.stream_) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      stream_ = o.stream_;
    }
    return *this;
  }
  device_buffer(const device_buffer&) = delete;
  device_buffer& operator=(const device_buffer&) = delete;
  ~device_buffer() { release(); }

  T* data() const noexcept { return p_; }
  index_t capacity() const noexcept { return n_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  void reset() noexcept { release(); }

 private:
  void release() noexcept {
    // A destructor cannot throw: an error here is sticky or reported by the next call.
    if (p_ != nullptr) {
      // Freed on the stream it came from, after the work queued so far on the current stream
      // too (a buffer made on a communication stream and used on the compute stream: async.hpp).
      const cudaStream_t now = current_stream();
      if (now != stream_) {
        cudaEvent_t e = nullptr;
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) {
          (void)cudaEventRecord(e, now);
          (void)cudaStreamWaitEvent(stream_, e, 0);
          (void)cudaEventDestroy(e);
        }
      }
      (void)cudaFreeAsync(p_, stream_);
    }
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  index_t n_ = 0;
  cudaStream_t stream_ = cudaStreamPerThread;
};

}  // namespace spmd::cuda
