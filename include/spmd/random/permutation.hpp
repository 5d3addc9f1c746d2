// spmd/random/permutation.hpp — a random permutation of 0 .. n-1 from a generator's Philox
// stream (torch.randperm's role; the order is spmd's, not PyTorch's, whose CPU randperm draws
// from a Mersenne Twister: docs/random.md).
//
//   spmd::generator g(seed);
//   std::vector<spmd::index_t> p = spmd::randperm(10, g);   // advances g by 2·(n-1) words
//
// Fisher–Yates from the last position: for i = n-1 down to 1, position i is swapped with
// j = u mod (i + 1), u the next 64-bit value of the stream (two 32-bit words, the low one
// first). The modulo's bias is below (i + 1) / 2^64: at most 2^-40 for a billion items, far
// under what any test of a shuffle can see; spmd takes it for a draw count that depends only
// on n (so the generator advances alike on every process).
#pragma once

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/random/generator.hpp"
#include "spmd/random/philox.hpp"

namespace spmd {

/// 0 .. n-1 shuffled by the stream of `state` (seed, offset in words); n >= 0.
inline std::vector<index_t> randperm_at(index_t n, generator_state state) {
  if (n < 0) throw std::invalid_argument("spmd::randperm: n = " + std::to_string(n) + " is negative");
  std::vector<index_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), index_t{0});
  // The words from the offset on, a Philox block (4 words, two 64-bit values) at a time.
  std::uint64_t block = state.offset / 4;
  random::philox_block b{};
  int used = 2;  // 64-bit values of b taken
  for (index_t i = n - 1; i >= 1; --i) {
    if (used == 2) b = random::philox_stream_block(state.seed, block++), used = 0;
    const std::uint64_t u = static_cast<std::uint64_t>(b[2 * used]) | static_cast<std::uint64_t>(b[2 * used + 1]) << 32;
    ++used;
    const index_t j = static_cast<index_t>(u % static_cast<std::uint64_t>(i + 1));
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(j)]);
  }
  return p;
}

/// 0 .. n-1 shuffled by g, which advances by the 2·(n-1) words taken (rounded up to whole blocks).
inline std::vector<index_t> randperm(index_t n, generator& g) {
  if (n < 0) throw std::invalid_argument("spmd::randperm: n = " + std::to_string(n) + " is negative");
  const std::uint64_t words = n > 1 ? 2 * static_cast<std::uint64_t>(n - 1) : 0;
  return randperm_at(n, g.take(words));
}

}  // namespace spmd
