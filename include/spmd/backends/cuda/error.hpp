// spmd/backends/cuda/error.hpp — CUDA errors as exceptions that name the call and the error.
//
// Every CUDA runtime and cuBLAS call of the backend goes through check(): a failure throws
// spmd::cuda::error, "spmd::cuda: cudaMallocAsync failed: out of memory
// (cudaErrorMemoryAllocation)". A machine without a GPU gets spmd::cuda::no_device from the
// first call that needs one (require_device), never a crash.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace spmd::cuda {

/// A CUDA call that failed: what() names the call and the error; code() is CUDA's.
class error : public std::runtime_error {
 public:
  error(const std::string& what, cudaError_t code) : std::runtime_error(what), code_(code) {}
  cudaError_t code() const noexcept { return code_; }

 private:
  cudaError_t code_;
};

/// No usable GPU: none is present, or the driver cannot be used.
class no_device : public error {
 public:
  using error::error;
};

/// Throws spmd::cuda::error naming `call` when `e` is not cudaSuccess.
inline void check(cudaError_t e, const char* call) {
  if (e == cudaSuccess) return;
  (void)cudaGetLastError();  // clear a non-sticky error so that later calls start clean
  throw error(std::string("spmd::cuda: ") + call + " failed: " + cudaGetErrorString(e) + " (" +
                  cudaGetErrorName(e) + ")",
              e);
}

}  // namespace spmd::cuda
