// spmd/backends/cuda/divisor.hpp — division by a number fixed before the launch, as a
// multiply-high and a shift (Granlund and Montgomery, "Division by invariant integers using
// multiplication", 1994; Hacker's Delight 10-8).
//
//   const divisor by(1000);            // on the host, once per geometry
//   index_t q, r; by.divmod(e, q, r);  // on the device, per item: q = e / 1000, r = e % 1000
//
// Why: a GPU has no integer divider. nvcc turns a 32-bit `/` into about twenty instructions,
// three of them on the quarter-rate conversion and reciprocal unit, and a 64-bit one into a
// longer call; the device factories and random draws did two per work item, and index
// arithmetic, not bytes, set their time (bench/RESULTS.md). The magic number makes it one
// IMAD.HI, an add and a shift.
//
// Exact for every dividend below 2^32 and every divisor >= 1; larger dividends take the plain
// 64-bit division (a block of more than 4 Gi elements). The CPU test checks it against `/`
// and `%` (tests/cuda/divisor.cpp).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "spmd/core/config.hpp"

namespace spmd::cuda {

struct divisor {
  index_t d = 1;
  std::uint32_t magic = 1;  // floor(2^(32 + shift) / d) - 2^32 + 1 (below 2^32); 0 for d >= 2^32
  std::uint32_t shift = 0;  // ceil(log2 d); 32 for d >= 2^32 (every 32-bit dividend gives 0)

  divisor() = default;
  /// Host: the magic number of d >= 1.
  explicit divisor(index_t v) : d(v) {
    if (v < 1) throw std::invalid_argument("spmd: divisor " + std::to_string(v) + " is not positive");
    if (v > index_t{0xffffffff}) {
      magic = 0;
      shift = 32;
      return;
    }
    while ((std::uint64_t{1} << shift) < static_cast<std::uint64_t>(d)) ++shift;
    // q = floor(2^(32 + shift) / d), below 2^33 as d > 2^(shift - 1). For shift 32 the
    // numerator 2^64 is one past 64 bits: floor((2^64 - 1) / d), plus one where d divides 2^64.
    const auto u = static_cast<std::uint64_t>(d);
    std::uint64_t q = 0;
    if (shift < 32) {
      q = (std::uint64_t{1} << (32 + shift)) / u;
    } else {
      const std::uint64_t all = ~std::uint64_t{0};
      q = all / u + (all % u == u - 1 ? 1 : 0);
    }
    magic = static_cast<std::uint32_t>(q - (std::uint64_t{1} << 32) + 1);
  }

  /// n / d for n < 2^32.
  SPMD_HD std::uint32_t quotient(std::uint32_t n) const {
#if defined(__CUDA_ARCH__)
    const std::uint32_t t = __umulhi(n, magic);
#else
    const auto t = static_cast<std::uint32_t>((std::uint64_t{n} * magic) >> 32);
#endif
    return static_cast<std::uint32_t>((std::uint64_t{t} + n) >> shift);
  }

  /// q = a / d, r = a % d for a >= 0: by the magic number below 2^32, by `/` above.
  SPMD_HD void divmod(index_t a, index_t& q, index_t& r) const {
    if ((a >> 32) == 0) {
      const auto n = static_cast<std::uint32_t>(a);
      const std::uint32_t x = quotient(n);
      q = x;
      r = n - x * static_cast<std::uint32_t>(d);  // x is 0 where d >= 2^32
    } else {
      q = a / d;
      r = a % d;
    }
  }

  SPMD_HD friend constexpr bool operator==(const divisor& a, const divisor& b) { return a.d == b.d; }
};

}  // namespace spmd::cuda
