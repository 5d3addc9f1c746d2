// tests/host/paths.hpp — the vector paths (host/vector_isa.hpp) a host-kernel test runs: every
// one this CPU has, each chosen in turn with limit_kernel_isa.
#pragma once

#include <cstdio>
#include <vector>

#include "spmd/host/vector_isa.hpp"

namespace spmd_test {

/// While alive, the kernels take at most `isa`; then every path again.
struct isa_limit {
  explicit isa_limit(spmd::host::vector_isa isa) { spmd::host::limit_kernel_isa(isa); }
  ~isa_limit() { spmd::host::limit_kernel_isa(spmd::host::vector_isa::avx512); }
  isa_limit(const isa_limit&) = delete;
  isa_limit& operator=(const isa_limit&) = delete;
};

/// The paths this CPU has, scalar first; says (once per call, naming the test) when AVX-512's
/// is not among them.
inline std::vector<spmd::host::vector_isa> paths(const char* test) {
  using spmd::host::vector_isa;
  std::vector<vector_isa> have{vector_isa::scalar};
  if (spmd::host::best_kernel_isa() >= vector_isa::avx2) have.push_back(vector_isa::avx2);
  if (spmd::host::best_kernel_isa() >= vector_isa::avx512) have.push_back(vector_isa::avx512);
  else std::printf("%s: this CPU has no AVX-512: its path is not run here\n", test);
  return have;
}

}  // namespace spmd_test
