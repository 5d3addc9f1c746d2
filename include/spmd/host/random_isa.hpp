// spmd/host/random_isa.hpp — which vector path the host's uniform and normal draws take: the
// best this CPU has (AVX-512, else AVX2 and F16C, else scalar code in lock step), chosen at
// run time, so that one x86-64 build runs each machine's fastest path. Every path gives the
// same bits (tests/random/vector_paths.cpp), so the choice changes only the speed.
//
//   spmd::host::draw_isa()                      the path draws take now
//   spmd::host::limit_draw_isa(random_isa::avx2)  at most AVX2 from now on (tests, benchmarks)
#pragma once

#include <cstdint>

#include "spmd/core/atomic.hpp"  // (not <atomic>: core/atomic.hpp says why)
#include "spmd/host/random_avx2.hpp"
#include "spmd/host/random_avx512.hpp"

namespace spmd::host {

enum class random_isa : std::uint8_t { scalar, avx2, avx512 };

inline const char* to_string(random_isa isa) {
  return isa == random_isa::avx512 ? "AVX-512" : isa == random_isa::avx2 ? "AVX2" : "scalar";
}

namespace detail {
inline atomic_word<std::uint8_t> random_isa_limit{static_cast<std::uint8_t>(random_isa::avx512)};
}  // namespace detail

/// The best path this CPU has (checked once).
inline random_isa best_draw_isa() {
  static const random_isa best = avx512::available() ? random_isa::avx512
                                 : avx2::available() ? random_isa::avx2
                                                     : random_isa::scalar;
  return best;
}

/// Lets draws use at most `isa` (the best the CPU has if that is less); process-wide. For
/// tests and benchmarks that compare the paths.
inline void limit_draw_isa(random_isa isa) {
  detail::random_isa_limit.store(static_cast<std::uint8_t>(isa), order::relaxed);
}

/// The path draws take now: the best the CPU has, within limit_draw_isa's.
inline random_isa draw_isa() {
  const auto limit = static_cast<random_isa>(detail::random_isa_limit.load(order::relaxed));
  return best_draw_isa() < limit ? best_draw_isa() : limit;
}

}  // namespace spmd::host
