// bench/cuda_timing.hpp — how the CUDA benchmarks time work on the current stream, and the
// device's copy rate their floors divide by.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <vector>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/error.hpp"

namespace bench {

namespace cu = spmd::cuda;

struct event_timer {
  cudaEvent_t a{}, b{};
  event_timer() {
    cu::check(cudaEventCreate(&a), "cudaEventCreate");
    cu::check(cudaEventCreate(&b), "cudaEventCreate");
  }
  ~event_timer() {
    cudaEventDestroy(a);
    cudaEventDestroy(b);
  }
  event_timer(const event_timer&) = delete;
  event_timer& operator=(const event_timer&) = delete;
  /// Median over 5 rounds of the mean microseconds of f, iterations doubled until a round
  /// takes 20 ms. `agree(grow)` turns this process's wish to grow into the decision (under
  /// MPI every rank must take the same one: an all-reduce).
  template <class F, class Agree>
  double us(F&& f, Agree&& agree) {
    f();
    f();
    cu::synchronize();
    int iters = 1;
    std::vector<double> rounds;
    for (int r = 0; r < 5; ++r) {
      for (;;) {
        cu::check(cudaEventRecord(a, cu::current_stream()), "cudaEventRecord");
        for (int i = 0; i < iters; ++i) f();
        cu::check(cudaEventRecord(b, cu::current_stream()), "cudaEventRecord");
        cu::check(cudaEventSynchronize(b), "cudaEventSynchronize");
        float ms = 0;
        cu::check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
        if (agree(ms < 20.f && iters < (1 << 20))) {
          iters *= 2;
          continue;
        }
        rounds.push_back(1000.0 * ms / iters);
        break;
      }
    }
    std::sort(rounds.begin(), rounds.end());
    return rounds[rounds.size() / 2];
  }
  template <class F>
  double us(F&& f) {
    return us(f, [](bool grow) { return grow; });
  }
};

/// Device-to-device copy bandwidth, read + write bytes per second (cudaMemcpyAsync of 1 GiB).
inline double copy_bandwidth() {
  const spmd::index_t n = spmd::index_t{1} << 30;
  cu::device_buffer<unsigned char> x(n), y(n);
  event_timer t;
  const double us = t.us([&] {
    cu::check(cudaMemcpyAsync(y.data(), x.data(), static_cast<std::size_t>(n), cudaMemcpyDeviceToDevice,
                              cu::current_stream()),
              "cudaMemcpyAsync");
  });
  return 2.0 * static_cast<double>(n) / (us * 1e-6);
}

}  // namespace bench
