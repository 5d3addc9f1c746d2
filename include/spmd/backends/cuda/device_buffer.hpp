// spmd/backends/cuda/device_buffer.hpp — n elements of device memory, owned.
//
// Allocated with cudaMallocAsync on the current stream and freed with cudaFreeAsync on the
// stream that allocated it: the free is ordered after the work queued there, so a buffer a
// kernel still reads is never reused early, and both can be captured in a CUDA graph. The
// pool behind cudaMallocAsync keeps freed memory for the next allocation, so a redistribute's
// fresh buffers cost no cudaMalloc after the first call. A buffer may also be a slice of a
// device_block that several share (one allocation for a step's outputs on every rank: each
// cudaMallocAsync/cudaFreeAsync pair is about a microsecond of host time).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
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
/// Frees p (from cudaMallocAsync on `stream`) on that stream, after the work queued so far on
/// the current stream too (a buffer made on a communication stream and used on the compute
/// stream: async.hpp). Never throws: an error here is sticky or reported by the next call.
inline void free_on(void* p, cudaStream_t stream) noexcept;
/// Counts an allocation made during a step_graph's capture (graph.hpp refuses a capture that
/// leaves one alive: the graph's next launch would allocate it again); returns the capture's
/// number (0 outside one) to give back to counted_free.
inline unsigned long long counted_allocation() noexcept {
  capture_count* c = capture_slot();
  if (!c) return 0;
  ++c->live;
  return c->id;
}
/// Frees p (made on `stream`, during capture `id` or none) as the capture in progress, if any,
/// needs: a buffer of this capture is freed in it (a node of the graph); one made before waits
/// for the capture's end (the step_graph frees it then).
inline void release(void* p, cudaStream_t stream, unsigned long long id) noexcept {
  capture_count* c = capture_slot();
  if (c && c->id != id) {
    try {
      c->deferred.emplace_back(p, stream);
      return;
    } catch (...) {  // no memory for the note: freed now, as before captures were counted
    }
  }
  if (c) --c->live;
  free_on(p, stream);
}
inline void free_on(void* p, cudaStream_t stream) noexcept {
  const cudaStream_t now = current_stream();
  if (now != stream) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess) {
      (void)cudaEventRecord(e, now);
      (void)cudaStreamWaitEvent(stream, e, 0);
      (void)cudaEventDestroy(e);
    }
  }
  // A failed free (the memory of a graph's allocation that never ran: a refused capture) is
  // not left as the thread's last error for the next launch's check to report.
  if (cudaFreeAsync(p, stream) != cudaSuccess) (void)cudaGetLastError();
}
}  // namespace detail

/// One stream-ordered allocation that several buffers share (device_buffer::slice): a step's
/// fresh outputs for every rank come from one cudaMallocAsync, freed when the last goes.
class device_block {
 public:
  /// bytes of device memory (none for 0), on the current stream.
  explicit device_block(std::size_t bytes) {
    if (bytes == 0) return;
    detail::keep_pool_memory();
    void* p = nullptr;
    const cudaStream_t s = current_stream();
    check(cudaMallocAsync(&p, bytes, s), "cudaMallocAsync");
    mem_ = std::shared_ptr<void>(p, [s, c = detail::counted_allocation()](void* q) { detail::release(q, s, c); });
  }
  void* data() const noexcept { return mem_.get(); }
  /// Where each slice starts: 256-byte aligned like the pool's own allocations (the widened
  /// step kernels need 16).
  static constexpr std::size_t round_up(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

 private:
  template <class T>
  friend class device_buffer;
  std::shared_ptr<void> mem_;
};

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
      count_ = detail::counted_allocation();
    }
  }
  /// n elements at byte `at` of `block` (at a multiple of 256, inside the block), sharing it.
  static device_buffer slice(const device_block& block, std::size_t at, index_t n) {
    device_buffer b;
    if (n == 0) return b;
    b.p_ = reinterpret_cast<T*>(static_cast<unsigned char*>(block.data()) + at);
    b.n_ = n;
    b.shared_ = block.mem_;
    return b;
  }
  device_buffer(device_buffer&& o) noexcept
      : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)), stream_(o.stream_),
        count_(std::exchange(o.count_, 0)), shared_(std::move(o.shared_)) {}
  device_buffer& operator=(device_buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
      stream_ = o.stream_;
      count_ = std::exchange(o.count_, 0);
      shared_ = std::move(o.shared_);
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
    if (shared_) shared_.reset();  // a slice: the block goes with its last slice
    else if (p_ != nullptr) detail::release(p_, stream_, count_);
    p_ = nullptr;
    count_ = 0;
    n_ = 0;
  }
  T* p_ = nullptr;
  index_t n_ = 0;
  cudaStream_t stream_ = cudaStreamPerThread;
  unsigned long long count_ = 0;  // the capture it was made in (counted_allocation), 0 for none
  std::shared_ptr<void> shared_;  // set for a slice of a device_block
};

}  // namespace spmd::cuda
