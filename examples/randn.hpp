// examples/randn.hpp — the MLP examples' seeded inputs: normal values from spmd's own Philox
// stream (random/draw.hpp, the one every backend's normal_ draws from), the same numbers on
// every machine and standard library (std::normal_distribution's are not specified).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "spmd/random/draw.hpp"

namespace spmd::examples {

/// n values of N(0, scale^2): elements 0 .. n - 1 of a normal draw of generator `seed`.
inline std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale) {
  random::draw d;
  d.dist = random::distribution::normal;
  d.seed = seed;
  d.b = scale;
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = random::draw_at<float>(d, i);
  return v;
}

}  // namespace spmd::examples
