// spmd/backends/nccl/async.hpp — a redistribute that overlaps local compute (DTensor's
// async_op=True).
//
//   auto pending = spmd::nccl::redistribute_async<L2>(x);   // queued on the comm stream
//   auto z = spmd::nccl::relu(w);                           // compute stream, meanwhile
//   auto y = pending.wait();                                // compute stream waits for it
//
// The redistribute runs on a communication stream of this device (made once, non-blocking)
// after the work queued so far on the current stream (an event it waits for); wait() makes
// the current stream wait for the redistribute's event. The host never blocks. x must live
// until wait() returns (its memory is read on the communication stream).
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>
#include <utility>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/nccl/api.hpp"
#include "spmd/backends/nccl/streams.hpp"

namespace spmd::nccl {


/// A redistribute in flight: wait() hands its result to the current stream.
template <class D>
class pending {
 public:
  pending(D&& y, cudaEvent_t done) : y_(std::move(y)), done_(done) {}
  pending(pending&& o) noexcept : y_(std::move(o.y_)), done_(std::exchange(o.done_, nullptr)) {}
  pending(const pending&) = delete;
  pending& operator=(const pending&) = delete;
  ~pending() {
    if (done_ != nullptr) {
      // Never waited for: the current stream still orders after it before y's memory goes.
      (void)cudaStreamWaitEvent(cuda::current_stream(), done_, 0);
      (void)cudaEventDestroy(done_);
    }
  }

  /// The current stream waits (on the device) for the redistribute; its result.
  D wait() {
    cuda::check(cudaStreamWaitEvent(cuda::current_stream(), done_, 0), "cudaStreamWaitEvent");
    cuda::check(cudaEventDestroy(std::exchange(done_, nullptr)), "cudaEventDestroy");
    return std::move(y_);
  }
  /// True when the redistribute has finished on the device (does not block).
  bool ready() const { return cudaEventQuery(done_) == cudaSuccess; }

 private:
  D y_;
  cudaEvent_t done_;
};

/// x redistributed to layout To on this device's communication stream, after the work
/// queued so far on the current stream.
template <class To, class D>
auto redistribute_async(const D& x) {
  const cudaStream_t compute = cuda::current_stream();
  const cudaStream_t comm = detail::comm_stream();
  const cudaEvent_t ready = detail::record_on(compute);
  cuda::check(cudaStreamWaitEvent(comm, ready, 0), "cudaStreamWaitEvent");
  cuda::check(cudaEventDestroy(ready), "cudaEventDestroy");
  cuda::stream_scope on_comm(comm);
  auto y = redistribute<To>(x);
  return pending<decltype(y)>(std::move(y), detail::record_on(comm));
}

}  // namespace spmd::nccl
