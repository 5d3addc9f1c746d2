// spmd/random/philox.hpp — the Philox4x32 counter-based generator (Salmon et al., "Parallel
// random numbers: as easy as 1, 2, 3", SC'11), the algorithm cuRAND's and PyTorch's CUDA
// generators use.
//
//   spmd::random::philox_block out = spmd::random::philox4x32({c0, c1, c2, c3}, {k0, k1});
//
// A pure function of a 128-bit counter and a 64-bit key: any element of the stream can be
// computed without the ones before it, on any rank, host or device. That is what makes a
// random tensor's global value independent of how it is sharded (docs/random.md). Tested
// against Random123's published known-answer vectors (tests/random/philox.cpp).
#pragma once

#include <cstdint>

#include "spmd/core/config.hpp"

namespace spmd::random {

/// Four 32-bit words: a counter, or one output block.
struct philox_block {
  std::uint32_t w[4];
  SPMD_HD constexpr std::uint32_t operator[](int i) const { return w[i]; }
  friend constexpr bool operator==(const philox_block&, const philox_block&) = default;
};
/// The 64-bit key (spmd puts the seed here).
struct philox_key {
  std::uint32_t k[2];
};

namespace detail {
inline constexpr std::uint32_t philox_m0 = 0xD2511F53u;  // round multipliers
inline constexpr std::uint32_t philox_m1 = 0xCD9E8D57u;
inline constexpr std::uint32_t philox_w0 = 0x9E3779B9u;  // key schedule: golden ratio,
inline constexpr std::uint32_t philox_w1 = 0xBB67AE85u;  // sqrt(3) - 1

SPMD_HD constexpr philox_block philox_round(const philox_block& c, const philox_key& k) {
#if defined(__CUDA_ARCH__)
  // The halves as two multiplies: the 64-bit product made nvcc add a zero to each high half
  // (two more instructions a round in the random kernels' SASS).
  const std::uint32_t hi0 = __umulhi(philox_m0, c.w[0]), lo0 = philox_m0 * c.w[0];
  const std::uint32_t hi1 = __umulhi(philox_m1, c.w[2]), lo1 = philox_m1 * c.w[2];
#else
  const std::uint64_t p0 = std::uint64_t{philox_m0} * c.w[0];
  const std::uint64_t p1 = std::uint64_t{philox_m1} * c.w[2];
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
#endif
  return {{hi1 ^ c.w[1] ^ k.k[0], lo1, hi0 ^ c.w[3] ^ k.k[1], lo0}};
}
}  // namespace detail

/// Philox4x32 with `Rounds` rounds (10, the standard and cuRAND's; 7 only for the tests'
/// known answers).
template <int Rounds = 10>
SPMD_HD constexpr philox_block philox4x32(philox_block ctr, philox_key key) {
  static_assert(Rounds >= 1 && Rounds <= 16, "spmd::random::philox4x32: 1 to 16 rounds.");
  for (int r = 0; r < Rounds; ++r) {
    if (r != 0) {
      key.k[0] += detail::philox_w0;
      key.k[1] += detail::philox_w1;
    }
    ctr = detail::philox_round(ctr, key);
  }
  return ctr;
}

/// Block `n` of the stream of `seed`: counter (n low, n high, 0, 0), key (seed low, seed high).
SPMD_HD constexpr philox_block philox_stream_block(std::uint64_t seed, std::uint64_t n) {
  return philox4x32<10>({{static_cast<std::uint32_t>(n), static_cast<std::uint32_t>(n >> 32), 0u, 0u}},
                        {{static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32)}});
}

/// N consecutive blocks n0 .. n0 + N - 1 of the stream of `seed`, word-major (w[j][i] is
/// word j of block n0 + i): the same values as philox_stream_block, laid out so that the
/// rounds run across the N blocks in lock step, which compilers vectorise (the host's bulk
/// path; 32x32->64 multiplies are pmuludq / vpmuludq on x86).
template <int N>
inline void philox_stream_blocks(std::uint64_t seed, std::uint64_t n0, std::uint32_t (&w)[4][N]) {
  std::uint32_t c0[N], c1[N], c2[N], c3[N];
  for (int i = 0; i < N; ++i) {
    const std::uint64_t n = n0 + static_cast<std::uint64_t>(i);
    c0[i] = static_cast<std::uint32_t>(n);
    c1[i] = static_cast<std::uint32_t>(n >> 32);
    c2[i] = 0;
    c3[i] = 0;
  }
  std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    if (r != 0) {
      k0 += detail::philox_w0;
      k1 += detail::philox_w1;
    }
    for (int i = 0; i < N; ++i) {
      const std::uint64_t p0 = std::uint64_t{detail::philox_m0} * c0[i];
      const std::uint64_t p1 = std::uint64_t{detail::philox_m1} * c2[i];
      const std::uint32_t n0_ = static_cast<std::uint32_t>(p1 >> 32) ^ c1[i] ^ k0;
      const std::uint32_t n2_ = static_cast<std::uint32_t>(p0 >> 32) ^ c3[i] ^ k1;
      c1[i] = static_cast<std::uint32_t>(p1);
      c3[i] = static_cast<std::uint32_t>(p0);
      c0[i] = n0_;
      c2[i] = n2_;
    }
  }
  for (int i = 0; i < N; ++i) {
    w[0][i] = c0[i];
    w[1][i] = c1[i];
    w[2][i] = c2[i];
    w[3][i] = c3[i];
  }
}

}  // namespace spmd::random
