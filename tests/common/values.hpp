// tests/common/values.hpp — deterministic test values: n multiples of `scale` in
// [-1000·scale, 1000·scale], a different sequence for each seed (a linear congruential
// generator: the same on every platform, so a failure reproduces).
#pragma once

#include <cstddef>
#include <vector>

namespace test_values {

template <class T = float>
std::vector<T> values(std::size_t n, unsigned seed, double scale = 1e-3) {
  std::vector<T> v(n);
  unsigned s = seed * 2654435761u + 7;
  for (T& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<T>(static_cast<double>(static_cast<int>(s >> 9) % 2001 - 1000) * scale);
  }
  return v;
}

}  // namespace test_values
