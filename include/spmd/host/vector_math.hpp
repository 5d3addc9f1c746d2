// spmd/host/vector_math.hpp — the host's vectorised float kernels: exp, log, tanh, sigmoid and
// the tanh GELU (forward and backward) over arrays; softmax, log_softmax, layer_norm and its
// input gradient over rows, on
// the best path this CPU has (host/vector_isa.hpp), the same bits on every path.
//
//   spmd::host::vector_math::map<spmd::unary_fn::tanh>(x, y, n);      // y[i] = tanh(x[i])
//   spmd::host::vector_math::gelu_tanh_backward(g, x, y, n);          // y = g · gelu'(x)
//   spmd::host::vector_math::softmax_rows<false>(x, sx, y, sy, rows, n);
//
// The arithmetic is host/vector_lanes.hpp's, compiled here once per path. The functions'
// maximum errors in ULPs, measured against double precision, are in docs/numerics.md and
// checked by tests/host/vector_math.cpp. On the device, CUDA's own functions run
// (core/element_math.hpp), within the tolerance docs/backends.md states.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__unix__)
#include <unistd.h>
#endif

#include "spmd/core/element_math.hpp"
#include "spmd/core/optim_math.hpp"
#include "spmd/host/vector_isa.hpp"

namespace spmd::host::vector_math {

/// The longest row whose softmax streams its output (its exps wait on the stack, 8 KiB).
inline constexpr std::int64_t max_streamed_row = 2048;

#if defined(__clang__)
#define SPMD_VL_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define SPMD_VL_UNROLL _Pragma("GCC unroll 16")
#else
#define SPMD_VL_UNROLL
#endif

#if SPMD_HOST_VECTOR_X86
#define SPMD_VL_NS avx512
#define SPMD_VL_W 16
#define SPMD_VL_FN [[gnu::target(SPMD_AVX512_TARGET ",fma"), gnu::always_inline]] inline
#define SPMD_VL_LOOP [[gnu::target(SPMD_AVX512_TARGET ",fma")]] inline
// (GCC and clang name the builtin alike; 4: the current rounding mode, nearest)
#define SPMD_VL_FMA(a, b, c) __builtin_ia32_vfmaddps512_mask(a, b, c, static_cast<unsigned short>(-1), 4)
#if defined(__clang__)
#define SPMD_VL_SQRT(a) __builtin_ia32_sqrtps512(a, 4)
#else
#define SPMD_VL_SQRT(a) __builtin_ia32_sqrtps512_mask(a, vf{}, static_cast<unsigned short>(-1), 4)
#endif
#if defined(__clang__)
#define SPMD_VL_MIN(a, b) __builtin_ia32_minps512(a, b, 4)
#define SPMD_VL_MAX(a, b) __builtin_ia32_maxps512(a, b, 4)
#else
#define SPMD_VL_MIN(a, b) __builtin_ia32_minps512_mask(a, b, vf{}, static_cast<unsigned short>(-1), 4)
#define SPMD_VL_MAX(a, b) __builtin_ia32_maxps512_mask(a, b, vf{}, static_cast<unsigned short>(-1), 4)
#endif
#include "spmd/host/vector_lanes.hpp"

#define SPMD_VL_NS avx2
#define SPMD_VL_W 8
#define SPMD_VL_FN [[gnu::target("avx2,fma"), gnu::always_inline]] inline
#define SPMD_VL_LOOP [[gnu::target("avx2,fma")]] inline
#define SPMD_VL_FMA(a, b, c) __builtin_ia32_vfmaddps256(a, b, c)
#define SPMD_VL_SQRT(a) __builtin_ia32_sqrtps256(a)
#define SPMD_VL_MIN(a, b) __builtin_ia32_minps256(a, b)
#define SPMD_VL_MAX(a, b) __builtin_ia32_maxps256(a, b)
#include "spmd/host/vector_lanes.hpp"
#endif

// The scalar path: any CPU; fmaf is the instruction where the target has FMA, else glibc's
// exact software fma (slow, but only CPUs without AVX2 and FMA take this path).
#define SPMD_VL_NS scalar
#define SPMD_VL_W 1
#define SPMD_VL_FN [[gnu::always_inline]] inline
#define SPMD_VL_LOOP inline
#define SPMD_VL_FMA(a, b, c) __builtin_fmaf(a, b, c)
#define SPMD_VL_SQRT(a) __builtin_sqrtf(a)
#define SPMD_VL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SPMD_VL_MAX(a, b) ((a) > (b) ? (a) : (b))
#include "spmd/host/vector_lanes.hpp"

/// The bytes of this CPU's last-level cache (sysconf's; 32 MiB where it does not say).
inline std::int64_t last_level_cache_bytes() {
  static const std::int64_t bytes = [] {
    long b = 0;
#if defined(_SC_LEVEL3_CACHE_SIZE)
    b = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (b <= 0) b = sysconf(_SC_LEVEL2_CACHE_SIZE);
#endif
    return b > 0 ? static_cast<std::int64_t>(b) : std::int64_t{32} << 20;
  }();
  return bytes;
}

/// Whether a row kernel writes its output (rows of n floats at y, stride sy) past the caches:
/// when what it reads and writes (`bytes`) is larger than the last-level cache, the output
/// cannot stay there for its next reader, and a streaming store saves reading each line
/// before writing it (a third of a softmax's traffic; glibc's memcpy does the same past its
/// threshold). Rows of whole, aligned 64-byte lines only. A step's kernels (attention's
/// 64 KiB blocks, a batch's logits) are far below it and keep their outputs in cache.
inline bool streams_output(const float* y, std::int64_t sy, std::int64_t n, std::int64_t bytes) {
  return bytes > last_level_cache_bytes() && reinterpret_cast<std::uintptr_t>(y) % 64 == 0 && sy % 16 == 0 &&
         n % 16 == 0 && n <= max_streamed_row;
}

/// Whether unary_fn F has a vector form here.
template <unary_fn F>
inline constexpr bool has_vector_form = F == unary_fn::exp || F == unary_fn::log || F == unary_fn::tanh ||
                                         F == unary_fn::sigmoid || F == unary_fn::gelu_tanh;

#if SPMD_HOST_VECTOR_X86
#define SPMD_VM_DISPATCH(call)                         \
  switch (kernel_isa()) {                              \
    case vector_isa::avx512: return avx512::call;      \
    case vector_isa::avx2: return avx2::call;          \
    default: return scalar::call;                      \
  }
#else
#define SPMD_VM_DISPATCH(call) return scalar::call;
#endif

/// y[i] = F(x[i]) for i < n (y may be x).
template <unary_fn F>
void map(const float* x, float* y, std::int64_t n) {
  static_assert(has_vector_form<F>, "spmd::host::vector_math::map: no vector form of this function");
  SPMD_VM_DISPATCH(template map_unary<F>(x, y, n))
}

/// y[i] = e^x[i] for x[i] <= 0 as softmax computes it (0 below ln 2^-126; docs/numerics.md):
/// for tests and benchmarks.
inline void exp_nonpositive(const float* x, float* y, std::int64_t n) {
  SPMD_VM_DISPATCH(map_exp_nonpositive(x, y, n))
}

/// y[i] = g[i] · gelu_tanh'(x[i]) for i < n.
inline void gelu_tanh_backward(const float* g, const float* x, float* y, std::int64_t n) {
  SPMD_VM_DISPATCH(map_gelu_tanh_backward(g, x, y, n))
}

/// softmax (Log: log_softmax) of `rows` rows of n contiguous floats, row r at x + r * sx, to
/// y + r * sy.
template <bool Log>
void softmax_rows(const float* x, std::int64_t sx, float* y, std::int64_t sy, std::int64_t rows, std::int64_t n) {
  const bool stream = streams_output(y, sy, n, 8 * rows * n);
  SPMD_VM_DISPATCH(template softmax_rows<Log>(x, sx, y, sy, rows, n, stream))
}

/// log Σ exp(x) of `rows` rows of n contiguous floats (row r at x + r * sx) to out[r].
inline void logsumexp_rows(const float* x, std::int64_t sx, float* out, std::int64_t rows, std::int64_t n) {
  SPMD_VM_DISPATCH(logsumexp_rows(x, sx, out, rows, n))
}

/// layer_norm over rows of n contiguous floats (x + r * sx to y + r * sy), then * w + b
/// when w and b are given (n floats each; both or neither).
inline void layer_norm_rows(const float* x, std::int64_t sx, float* y, std::int64_t sy, std::int64_t rows,
                            std::int64_t n, const float* w, const float* b, float eps) {
  const bool stream = streams_output(y, sy, n, 8 * rows * n);
  SPMD_VM_DISPATCH(layer_norm_rows(x, sx, y, sy, rows, n, w, b, eps, stream))
}

/// layer_norm's input gradient over rows of n contiguous floats, from the output's gradient
/// g and the input x (w: the weight, or null).
inline void layer_norm_backward_rows(const float* g, std::int64_t sg, const float* x, std::int64_t sx,
                                     const float* w, float* y, std::int64_t sy, std::int64_t rows, std::int64_t n,
                                     float eps) {
  SPMD_VM_DISPATCH(layer_norm_backward_rows(g, sg, x, sx, w, y, sy, rows, n, eps))
}

/// torch.optim.AdamW's step over n floats (core/optim_math.hpp's arithmetic, the same bits):
/// p, m, v from p_in, m_in, v_in (each pair may be one array), gradient g.
inline void adamw(const float* p_in, const float* g, const float* m_in, const float* v_in, float* p, float* m,
                  float* v, std::int64_t n, const optim_math::adamw_coeffs<float>& c) {
  SPMD_VM_DISPATCH(adamw(p_in, g, m_in, v_in, p, m, v, n, c))
}

/// Attention's causal softmax of `rows` rows of n scores (row stride ld), in place: row r is
/// the query at position first + r, which sees the keys j <= first + r (a block of queries
/// whose sequence is split over ranks starts at its first position; first = 0, rows = n is
/// one device's square block).
inline void causal_softmax_rows(float* s, std::int64_t ld, std::int64_t rows, std::int64_t n, std::int64_t first) {
  SPMD_VM_DISPATCH(causal_softmax_rows(s, ld, rows, n, first))
}
/// The n x n block of one device.
inline void causal_softmax_rows(float* s, std::int64_t ld, std::int64_t n) { causal_softmax_rows(s, ld, n, n, 0); }

/// softmax over `rows` rows of n scores (row stride ld), in place: attention without a mask.
inline void softmax_rows_in_place(float* s, std::int64_t ld, std::int64_t rows, std::int64_t n) {
  softmax_rows<false>(s, ld, s, ld, rows, n);
}

/// softmax's backward, in place into dp: dp = scale · p (dp − Σ_row dp p), rows of n at stride ld.
inline void softmax_backward_rows(const float* p, float* dp, std::int64_t ld, std::int64_t rows, std::int64_t n,
                                  float scale) {
  SPMD_VM_DISPATCH(softmax_backward_rows(p, dp, ld, rows, n, scale))
}

/// c (m x n, row stride ldc) = alpha · op(a) op(b): a is (m x k), or (k x m) read transposed
/// when `at`, with row stride lda; b is (k x n), or (n x k) when `bt`, row stride ldb (BLAS's
/// conventions). The small-product kernel (host/gemm_lanes.hpp): each element summed over k in
/// order by fused multiply-adds, the same bits on every path and whatever the blocking. op(B)
/// is copied to a panel of whole tiles first unless it already is one.
inline void gemm_small(float* c, std::int64_t ldc, const float* a, std::int64_t lda, const float* b,
                       std::int64_t ldb, std::int64_t m, std::int64_t n, std::int64_t k, bool at, bool bt,
                       float alpha) {
  if (m <= 0 || n <= 0) return;
  std::int64_t cols = scalar::gemm_tile_columns(n);
#if SPMD_HOST_VECTOR_X86
  const vector_isa isa = kernel_isa();
  if (isa == vector_isa::avx512) cols = avx512::gemm_tile_columns(n);
  if (isa == vector_isa::avx2) cols = avx2::gemm_tile_columns(n);
#endif
  const float* panel = b;
  std::int64_t ldp = ldb;
  if (bt || n % cols != 0) {
    thread_local std::vector<float> packed;
    ldp = (n + cols - 1) / cols * cols;
    if (packed.size() < static_cast<std::size_t>(k * ldp)) packed.resize(static_cast<std::size_t>(k * ldp));
    float* out = packed.data();
    for (std::int64_t p = 0; p < k; ++p)
      for (std::int64_t j = n; j < ldp; ++j) out[p * ldp + j] = 0.0f;  // read, never kept
    if (bt) {  // 8 of op(B)'s columns at a time: 8 rows of b read along, 8 floats written along
      for (std::int64_t j0 = 0; j0 < n; j0 += 8) {
        const std::int64_t j1 = j0 + 8 < n ? j0 + 8 : n;
        for (std::int64_t p = 0; p < k; ++p)
          for (std::int64_t j = j0; j < j1; ++j) out[p * ldp + j] = b[j * ldb + p];
      }
    } else {
      for (std::int64_t p = 0; p < k; ++p)
        for (std::int64_t j = 0; j < n; ++j) out[p * ldp + j] = b[p * ldb + j];
    }
    panel = out;
  }
  const std::int64_t sai = at ? 1 : lda, sap = at ? lda : 1;
  SPMD_VM_DISPATCH(gemm_packed(c, ldc, a, sai, sap, panel, ldp, m, n, k, alpha))
}

#undef SPMD_VM_DISPATCH
#undef SPMD_VL_UNROLL

}  // namespace spmd::host::vector_math
