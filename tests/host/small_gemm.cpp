// tests/host/small_gemm.cpp — the small-product kernel (host/vector_math.hpp's gemm_small,
// host/gemm_lanes.hpp) against its definition, bit for bit: every element of C is
// Σ_p op(A)[i, p] op(B)[p, j] summed in order by fused multiply-adds from +0, then times alpha
// when alpha is not 1. Over shapes that leave every remainder of the tiles (rows 1..13,
// columns 1..40, k 1..17), both operands read either way, row strides wider than the rows,
// on every path this CPU has; nothing outside C's m x n block written.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "spmd/host/vector_math.hpp"
#include "paths.hpp"

namespace {

namespace vm = spmd::host::vector_math;
using spmd::host::vector_isa;

using spmd_test::isa_limit;
std::vector<vector_isa> paths() { return spmd_test::paths("small_gemm"); }

/// The definition, one element at a time.
float reference(const std::vector<float>& a, std::int64_t lda, const std::vector<float>& b, std::int64_t ldb,
                std::int64_t i, std::int64_t j, std::int64_t k, bool at, bool bt, float alpha) {
  float s = 0.0f;
  for (std::int64_t p = 0; p < k; ++p)
    s = std::fma(at ? a[p * lda + i] : a[i * lda + p], bt ? b[j * ldb + p] : b[p * ldb + j], s);
  return alpha == 1.0f ? s : s * alpha;
}

bool same_bits(float x, float y) { return std::memcmp(&x, &y, sizeof x) == 0; }

/// Values of every size and sign (and some exact zeros), so that a sum in another order, or a
/// product not fused, changes bits.
float value(std::uint32_t s) {
  s = s * 2654435761u + 12345u;
  s ^= s >> 15;
  if (s % 11 == 0) return 0.0f;
  return std::ldexp(static_cast<float>(static_cast<std::int32_t>(s % 20001) - 10000) / 3333.0f,
                    static_cast<int>(s % 13) - 6);
}

/// One shape: every element of C against the reference, the guard around C untouched.
/// Returns the number of mismatches (0).
int check(std::int64_t m, std::int64_t n, std::int64_t k, bool at, bool bt, float alpha) {
  const std::int64_t lda = (at ? m : k) + 3, ldb = (bt ? k : n) + 5, ldc = n + 2;
  std::vector<float> a(static_cast<std::size_t>((at ? k : m) * lda)), b(static_cast<std::size_t>((bt ? n : k) * ldb));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = value(static_cast<std::uint32_t>(i));
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = value(static_cast<std::uint32_t>(i + 77777));
  const float guard = -12345.5f;
  std::vector<float> c(static_cast<std::size_t>(m * ldc + 8), guard);
  vm::gemm_small(c.data(), ldc, a.data(), lda, b.data(), ldb, m, n, k, at, bt, alpha);
  int bad = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < ldc; ++j) {
      const float got = c[static_cast<std::size_t>(i * ldc + j)];
      const float want = j < n ? reference(a, lda, b, ldb, i, j, k, at, bt, alpha) : guard;
      if (!same_bits(got, want) && bad++ < 3)
        std::printf("m %lld n %lld k %lld at %d bt %d: C[%lld, %lld] = %.9g, want %.9g\n",
                    static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k), at, bt,
                    static_cast<long long>(i), static_cast<long long>(j), got, want);
    }
  for (std::size_t t = static_cast<std::size_t>(m * ldc); t < c.size(); ++t) bad += c[t] != guard;
  return bad;
}

}  // namespace

TEST_CASE("gemm_small: every element is its in-order fused sum, on every path and shape") {
  for (const vector_isa isa : paths()) {
    const isa_limit lim(isa);
    INFO("path " << spmd::host::to_string(isa));
    int bad = 0;
    for (const bool at : {false, true})
      for (const bool bt : {false, true})
        for (std::int64_t m : {1, 2, 5, 6, 7, 8, 9, 13})
          for (std::int64_t n : {1, 3, 8, 15, 16, 17, 31, 32, 33, 40})
            for (std::int64_t k : {1, 2, 8, 17}) bad += check(m, n, k, at, bt, 1.0f);
    CHECK(bad == 0);
  }
}

TEST_CASE("gemm_small: alpha scales the sum, rounded once (the attention's scale)") {
  for (const vector_isa isa : paths()) {
    const isa_limit lim(isa);
    INFO("path " << spmd::host::to_string(isa));
    int bad = 0;
    for (std::int64_t n : {8, 16, 40}) bad += check(16, n, 8, false, true, 0.35355339f) + check(7, n, 16, true, false, -2.0f);
    CHECK(bad == 0);
  }
}

TEST_CASE("gemm_small: spmd-train's shapes, and NaN and infinity propagate as in the sum") {
  for (const vector_isa isa : paths()) {
    const isa_limit lim(isa);
    int bad = 0;
    bad += check(128, 96, 32, false, false, 1.0f) + check(32, 96, 128, true, false, 1.0f) +
           check(128, 32, 96, false, true, 1.0f);
    CHECK(bad == 0);
    // a NaN in A's row 2 spoils row 2 of C only; an infinity in B's column 1 makes column 1 inf
    // or NaN (inf - inf) exactly as the reference does
    const std::int64_t m = 9, n = 20, k = 5;
    std::vector<float> a(static_cast<std::size_t>(m * k), 1.0f), b(static_cast<std::size_t>(k * n), 0.5f),
        c(static_cast<std::size_t>(m * n));
    a[2 * k + 3] = std::numeric_limits<float>::quiet_NaN();
    b[1 * n + 1] = std::numeric_limits<float>::infinity();
    a[5 * k + 1] = -1.0f;
    vm::gemm_small(c.data(), n, a.data(), k, b.data(), n, m, n, k, false, false, 1.0f);
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) {
        const float want = reference(a, k, b, n, i, j, k, false, false, 1.0f);
        const float got = c[static_cast<std::size_t>(i * n + j)];
        CHECK((std::isnan(want) ? std::isnan(got) : same_bits(got, want)));
      }
    CHECK(std::isnan(c[2 * n + 0]));
    CHECK(std::isinf(c[0 * n + 1]));
    CHECK(std::isinf(c[5 * n + 1]));  // -inf: a[5][1] = -1 times inf
    CHECK(c[5 * n + 1] < 0);
  }
}
