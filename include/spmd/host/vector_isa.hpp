// spmd/host/vector_isa.hpp — which vector path the host kernels take (host/vector_math.hpp,
// host/row_kernels.hpp): AVX-512, else AVX2 with FMA, else scalar code that computes the same
// operations one lane at a time, chosen at run time so that one x86-64 build runs each
// machine's fastest path. Every path gives the same bits (tests/host/vector_math.cpp), so the
// choice changes only the speed: the simulation, MPI and any mix of machines agree exactly.
//
//   spmd::host::kernel_isa()                          the path kernels take now
//   spmd::host::limit_kernel_isa(spmd::host::vector_isa::scalar)   at most that, process-wide
//
// (The random draws choose their own path, host/random_isa.hpp: they need F16C, not FMA.)
#pragma once

#include <cstdint>

#include "spmd/core/atomic.hpp"  // (not <atomic>: core/atomic.hpp says why)
#include "spmd/host/random_avx512.hpp"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define SPMD_HOST_VECTOR_X86 1
#else
#define SPMD_HOST_VECTOR_X86 0
#endif

namespace spmd::host {

enum class vector_isa : std::uint8_t { scalar, avx2, avx512 };

inline const char* to_string(vector_isa isa) {
  return isa == vector_isa::avx512 ? "AVX-512" : isa == vector_isa::avx2 ? "AVX2" : "scalar";
}

/// The best path this CPU has (checked once): AVX2 needs FMA too (every AVX2 CPU has it:
/// Haswell, Zen); AVX-512 is random_avx512's F, BW, DQ and VL.
inline vector_isa best_kernel_isa() {
#if SPMD_HOST_VECTOR_X86
  static const vector_isa best = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    if (!avx2) return vector_isa::scalar;
    return avx512::available() ? vector_isa::avx512 : vector_isa::avx2;
  }();
  return best;
#else
  return vector_isa::scalar;
#endif
}

namespace detail {
inline atomic_word<std::uint8_t> kernel_isa_limit{static_cast<std::uint8_t>(vector_isa::avx512)};
}  // namespace detail

/// Lets the kernels use at most `isa` from now on (tests and benchmarks that compare paths).
inline void limit_kernel_isa(vector_isa isa) {
  detail::kernel_isa_limit.store(static_cast<std::uint8_t>(isa), order::relaxed);
}

/// The path the kernels take now: the best the CPU has, within limit_kernel_isa's.
inline vector_isa kernel_isa() {
  const auto limit = static_cast<vector_isa>(detail::kernel_isa_limit.load(order::relaxed));
  return best_kernel_isa() < limit ? best_kernel_isa() : limit;
}

}  // namespace spmd::host
