// bench/timing.hpp — the clock the host benchmarks share: seconds since a point, the median
// of a few timed runs after a warm one, and the time per call of a fast function.
#pragma once

#include <algorithm>
#include <chrono>
#include <vector>

namespace bench {

using clock_type = std::chrono::steady_clock;

inline double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// The median of v (the upper one of an even count; 0 for none).
inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
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

/// Nanoseconds per call of f, over a count of calls (doubled until) that takes min_seconds.
template <class F>
double ns_per_call(F&& f, double min_seconds) {
  for (long calls = 1;; calls *= 2) {
    const auto t0 = clock_type::now();
    for (long i = 0; i < calls; ++i) f();
    const double s = seconds_since(t0);
    if (s >= min_seconds) return s * 1e9 / static_cast<double>(calls);
  }
}

}  // namespace bench
