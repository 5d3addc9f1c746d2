// bench/timing.hpp — the clock the host benchmarks share: seconds since a point, and the
// median of a few timed runs after a warm one.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace bench {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// Median seconds of `runs` calls of f, after one warm call (allocations, page cache).
template <class F>
double median_s(F&& f, int runs = 5) {
  f();
  std::vector<double> s;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = clock_type::now();
    f();
    s.push_back(seconds_since(t0));
  }
  std::sort(s.begin(), s.end());
  return s[s.size() / 2];
}

}  // namespace bench
