// spmd/host/gemm_lanes.hpp — the small matrix product, written once over host/vector_lanes.hpp's
// vector of W float lanes and compiled once per path with it (vector_lanes.hpp includes this
// file inside its namespace; no include guard, on purpose).
//
// A product of a few hundred thousand multiply-adds (spmd-train's gpt: 128 x 96 x 32, the
// attention's 16 x 16 x 8 blocks) spends as long in a BLAS's set-up (its checks, packing both
// operands into its panels, clearing C) as in its kernel: bench/RESULTS.md, issue 54. This
// kernel packs nothing but op(B) when it must (read transposed, or rows not a whole number of
// tiles), broadcasts op(A)'s elements where they lie, and keeps a tile of C in registers:
// R rows x V vectors: V loads and R broadcasts per R V fused multiply-adds.
//
// The bits: every element of C is Σ_p op(A)[i, p] · op(B)[p, j] summed in order p = 0, 1, ...
// by fused multiply-adds, from 0 (then times alpha, rounded once, when alpha is not 1), on every
// path and whatever the tile: so the simulation, MPI and every CPU agree exactly, and a
// product cut into blocks of rows or columns gives the same bits as whole.
#if !defined(SPMD_VL_NS)
#include "spmd/host/vector_math.hpp"
#else

#if !defined(SPMD_GEMM_OPTIMIZED)
#if defined(__GNUC__) && !defined(__clang__) && !defined(__OPTIMIZE__)
#define SPMD_GEMM_OPTIMIZED [[gnu::optimize("O2")]]
#else
#define SPMD_GEMM_OPTIMIZED
#endif
#endif

/// *p in every lane: one broadcast from memory. (splat's 0.0f + v, which makes -0 +0, is an
/// add and a shuffle more; the integer 0 + bits folds away. The sums here start from +0, so a
/// zero factor's sign is moot either way.)
SPMD_VL_FN vf broadcast(const float* p) { return from_bits(splat_u(__builtin_bit_cast(std::uint32_t, *p))); }

/// C's rows i0 .. i0 + R over the columns [j0, j0 + V W) of a packed op(B) (k rows of ldb
/// floats, at least j0 + V W of them readable), written to c's columns below n.
/// A(i, p) = a[i sai + p sap].
template <int R, int V>
SPMD_VL_FN void gemm_tile(float* c, std::int64_t ldc, const float* a, std::int64_t sai, std::int64_t sap,
                          const float* b, std::int64_t ldb, std::int64_t j0, std::int64_t n, std::int64_t k,
                          float alpha) {
  vf acc[R][V] = {};
  const float* bj = b + j0;
  for (std::int64_t p = 0; p < k; ++p) {
    vf bv[V];
    SPMD_VL_UNROLL for (int v = 0; v < V; ++v) bv[v] = load(bj + p * ldb + v * W);
    const float* ap = a + p * sap;
    SPMD_VL_UNROLL for (int r = 0; r < R; ++r) {
      const vf ar = broadcast(ap + r * sai);
      SPMD_VL_UNROLL for (int v = 0; v < V; ++v) acc[r][v] = fma(ar, bv[v], acc[r][v]);
    }
  }
  if (alpha != 1.0f) {
    const vf al = splat(alpha);
    SPMD_VL_UNROLL for (int r = 0; r < R; ++r) SPMD_VL_UNROLL for (int v = 0; v < V; ++v) acc[r][v] = mul(acc[r][v], al);
  }
  const std::int64_t left = n - j0;
  SPMD_VL_UNROLL for (int r = 0; r < R; ++r) {
    float* cr = c + r * ldc + j0;
    if (left >= V * W) {
      SPMD_VL_UNROLL for (int v = 0; v < V; ++v) store(cr + v * W, acc[r][v]);
    } else {
      float t[V * W];
      SPMD_VL_UNROLL for (int v = 0; v < V; ++v) store(t + v * W, acc[r][v]);
      for (std::int64_t j = 0; j < left; ++j) cr[j] = t[j];
    }
  }
}

/// R rows of C, every column tile. Optimised whatever the build's level (GCC): at -O0 the tile
/// would live in memory, 20 times slower than a BLAS call, in a debug build that used to get
/// BLAS's speed. (The same operations either way: the bits do not change.)
template <int R, int V>
SPMD_GEMM_OPTIMIZED SPMD_VL_LOOP void gemm_rows(float* c, std::int64_t ldc, const float* a, std::int64_t sai, std::int64_t sap,
                            const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k, float alpha) {
  for (std::int64_t j0 = 0; j0 < n; j0 += V * W) gemm_tile<R, V>(c, ldc, a, sai, sap, b, ldb, j0, n, k, alpha);
}

/// The last m % R rows (rem of them, below R), R counting down.
template <int V, int R>
SPMD_VL_FN void gemm_rest(std::int64_t rem, float* c, std::int64_t ldc, const float* a, std::int64_t sai,
                          std::int64_t sap, const float* b, std::int64_t ldb, std::int64_t n, std::int64_t k,
                          float alpha) {
  if constexpr (R > 0) {
    if (rem == R) return gemm_rows<R, V>(c, ldc, a, sai, sap, b, ldb, n, k, alpha);
    gemm_rest<V, R - 1>(rem, c, ldc, a, sai, sap, b, ldb, n, k, alpha);
  }
}

/// Every row of C in tiles of R rows x V vectors.
template <int V, int R>
SPMD_VL_FN void gemm_all_rows(float* c, std::int64_t ldc, const float* a, std::int64_t sai, std::int64_t sap,
                              const float* b, std::int64_t ldb, std::int64_t m, std::int64_t n, std::int64_t k,
                              float alpha) {
  std::int64_t i = 0;
  for (; i + R <= m; i += R) gemm_rows<R, V>(c + i * ldc, ldc, a + i * sai, sai, sap, b, ldb, n, k, alpha);
  gemm_rest<V, R - 1>(m - i, c + i * ldc, ldc, a + i * sai, sai, sap, b, ldb, n, k, alpha);
}

/// c (m x n, row stride ldc) = alpha · op(A) op(B), op(B) packed (see gemm_tile), op(A)(i, p) =
/// a[i sai + p sap]. Tiles of 6 rows x 2 vectors (12 accumulators: two FMA units of 5-6
/// cycles' latency kept busy), or 8 rows x 1 vector where op(B) is one vector wide (the
/// attention's heads of 8 under AVX2).
SPMD_VL_LOOP void gemm_packed(float* c, std::int64_t ldc, const float* a, std::int64_t sai, std::int64_t sap,
                              const float* b, std::int64_t ldb, std::int64_t m, std::int64_t n, std::int64_t k,
                              float alpha) {
  if (n <= W)
    gemm_all_rows<1, 8>(c, ldc, a, sai, sap, b, ldb, m, n, k, alpha);
  else
    gemm_all_rows<2, 6>(c, ldc, a, sai, sap, b, ldb, m, n, k, alpha);
}

/// The columns of the tile gemm_packed uses for an op(B) n wide: op(B) must be readable (and
/// finite) up to n rounded up to it.
constexpr std::int64_t gemm_tile_columns(std::int64_t n) { return n <= W ? W : 2 * W; }

#endif  // SPMD_VL_NS
