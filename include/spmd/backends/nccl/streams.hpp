// spmd/backends/nccl/streams.hpp — this device's communication stream and the events that order
// work across streams: what redistribute_async (async.hpp) and the backend's overlap
// (backend.hpp: FSDP's prefetch) are made of.
#pragma once

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/error.hpp"

namespace spmd::nccl {

namespace detail {

/// This device's communication stream (one per device, kept for the process's life).
inline cudaStream_t comm_stream() {
  static auto* streams = new std::map<int, cudaStream_t>();
  static auto* mu = new std::mutex();
  int dev = 0;
  cuda::check(cudaGetDevice(&dev), "cudaGetDevice");
  std::lock_guard<std::mutex> lock(*mu);
  auto it = streams->find(dev);
  if (it == streams->end()) {
    cudaStream_t s = nullptr;
    cuda::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    it = streams->emplace(dev, s).first;
  }
  return it->second;
}

/// An event recorded on `s` now (disabled timing: the cheapest kind).
inline cudaEvent_t record_on(cudaStream_t s) {
  cudaEvent_t e = nullptr;
  cuda::check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cuda::check(cudaEventRecord(e, s), "cudaEventRecord");
  return e;
}

}  // namespace detail

}  // namespace spmd::nccl
