// spmd/host/vector_lanes.hpp — the host kernels' arithmetic, written once over a vector of W
// float lanes and compiled once per path (host/vector_math.hpp includes it three times, as
// Highway's foreach_target does): W = 16 under AVX-512, 8 under AVX2 with FMA, 1 in plain
// scalar code. No include guard, on purpose.
//
// The includer defines:
//   SPMD_VL_NS    the namespace (avx512, avx2, scalar), inside spmd::host::vector_math
//   SPMD_VL_W     the lanes of a register
//   SPMD_VL_FN    the attributes of an inlined helper (the target, always_inline)
//   SPMD_VL_LOOP  the attributes of a loop the dispatcher calls (the target)
//   SPMD_VL_FMA   a fused multiply-add on vf
//   SPMD_VL_SQRT  the square root of vf (correctly rounded on every path)
//   SPMD_VL_MIN   x86's minps: a < b ? a : b per lane (b when either is NaN)
//   SPMD_VL_MAX   x86's maxps: a > b ? a : b per lane (b when either is NaN)
// (and vector_math.hpp, SPMD_VL_UNROLL: the loops over a block's K registers unrolled at
// -O2 too, where GCC would keep a block in memory and loop over it)
// and it undefines them at its end, ready for the next path.
//
// Why every path gives the same bits:
//  - each lane does the same IEEE operations in the same order, each rounded once: products
//    that are not meant to fuse go through mul() (an empty asm GCC cannot fuse across; it fuses
//    `a * b + c` whenever the target has FMA), and every fused one is an explicit fma();
//  - the rows' sums and maxima are taken in 16 lanes whatever W is (a block of 16 floats is one
//    register under AVX-512, two under AVX2, sixteen scalars), then folded 16 -> 8 -> 4 -> 2 -> 1
//    the same way, so the association order of a reduction does not depend on the path;
//  - a row's tail (n % 16 elements) is padded to a block with neutral values.
// tests/host/vector_math.cpp checks the paths bit for bit and the functions' errors in ULPs
// against double precision (the bounds are in docs/numerics.md).
//
// Included on its own (a tool, a header check), it brings host/vector_math.hpp instead.
#if !defined(SPMD_VL_NS)
#include "spmd/host/vector_math.hpp"
#else

namespace SPMD_VL_NS {

inline constexpr int W = SPMD_VL_W;
inline constexpr int B = 16;      // floats per block: the reductions' lanes
inline constexpr int K = B / W;   // registers per block

#if SPMD_VL_W == 1
using vf = float;
using vi = std::int32_t;
using vu = std::uint32_t;
#else
using vf = float __attribute__((vector_size(4 * SPMD_VL_W)));
using vi = std::int32_t __attribute__((vector_size(4 * SPMD_VL_W)));
using vu = std::uint32_t __attribute__((vector_size(4 * SPMD_VL_W)));
#endif

SPMD_VL_FN vf splat(float v) { return vf{} + v; }
SPMD_VL_FN vu splat_u(std::uint32_t v) { return vu{} + v; }
SPMD_VL_FN vu bits(vf v) { return __builtin_bit_cast(vu, v); }
SPMD_VL_FN vf from_bits(vu v) { return __builtin_bit_cast(vf, v); }
SPMD_VL_FN vf load(const float* p) {
  vf v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
SPMD_VL_FN void store(float* p, vf v) { __builtin_memcpy(p, &v, sizeof v); }
/// m ? a : b per lane (m: a comparison's result).
template <class M>
SPMD_VL_FN vf select(M m, vf a, vf b) {
  return m ? a : b;
}
/// a * b, rounded, never fused into a following add (see above).
SPMD_VL_FN vf mul(vf a, vf b) {
  vf p = a * b;
#if SPMD_HOST_VECTOR_X86
  asm("" : "+v"(p));
#endif
  return p;
}
SPMD_VL_FN vf sqrt(vf a) { return SPMD_VL_SQRT(a); }
/// a * b + c, rounded once.
SPMD_VL_FN vf fma(vf a, vf b, vf c) { return SPMD_VL_FMA(a, b, c); }
/// a < b ? a : b and a > b ? a : b, per lane: one instruction each (b when either is NaN, so a
/// constant bound passed as a lets a NaN through).
SPMD_VL_FN vf min_ps(vf a, vf b) { return SPMD_VL_MIN(a, b); }
SPMD_VL_FN vf max_ps(vf a, vf b) { return SPMD_VL_MAX(a, b); }
SPMD_VL_FN vf to_float(vi v) {
#if SPMD_VL_W == 1
  return static_cast<float>(v);
#else
  return __builtin_convertvector(v, vf);
#endif
}
SPMD_VL_FN vf abs(vf v) { return from_bits(bits(v) & splat_u(0x7fffffffu)); }
// ------------------------------------------------------------------------------------------
// Functions of one lane. Coefficients: Cephes' single-precision minimax polynomials (expf,
// logf, tanhf), evaluated by Horner's rule with FMAs.
// ------------------------------------------------------------------------------------------

/// The reduction both exps share: x = n ln 2 + r, n = round(x log2 e) by adding `magic` (1.5 ·
/// 2^23, plus any bias wanted in t's low bits), r = x − n ln 2 in two parts, and e^r − 1 by
/// Cephes' polynomial. t is x log2 e + magic, which carries n in its low bits.
struct exp_parts {
  vf t, expm1_r;
};
SPMD_VL_FN exp_parts exp_reduce(vf x, vf magic) {
  const vf t = fma(x, splat(1.44269504088896341f), magic);
  const vf n = t - magic;
  vf r = fma(n, splat(-0.693359375f), x);
  r = fma(n, splat(2.12194440e-4f), r);
  vf p = splat(1.9875691500e-4f);
  p = fma(p, r, splat(1.3981999507e-3f));
  p = fma(p, r, splat(8.3334519073e-3f));
  p = fma(p, r, splat(4.1665795894e-2f));
  p = fma(p, r, splat(1.6666665459e-1f));
  p = fma(p, r, splat(5.0000001201e-1f));
  return {t, fma(p, mul(r, r), r)};
}

/// e^x: n = round(x log2 e), r = x - n ln 2 (in two parts), e^r by its polynomial, times 2^n
/// as two powers of two (each normal, so a subnormal result is rounded once). Overflow to inf
/// and underflow to 0 come out of the arithmetic (x is clamped to [-104, 89] first); NaN
/// propagates.
SPMD_VL_FN vf exp(vf x) {
  const vf magic = splat(12582912.0f);  // 1.5 * 2^23: adding it rounds to an integer
  const exp_parts e = exp_reduce(max_ps(splat(-104.0f), min_ps(splat(89.0f), x)), magic);  // (NaN passes)
  const vf p = e.expm1_r + splat(1.0f);
  const vi ni = (vi)(bits(e.t) - bits(magic));  // n in [-150, 128] (garbage for NaN: unused)
  const vi n1 = ni >> 1, n2 = ni - n1;            // each in [-75, 64]
  const vf s1 = from_bits((vu)(n1 + 127) << 23), s2 = from_bits((vu)(n2 + 127) << 23);
  return mul(mul(p, s1), s2);
}

/// e^x where 2^n is normal (n = round(x log2 e) in [-126, 127]: -87.33 <= x <= 88.02; NaN
/// propagates): exp's reduction and polynomial, but 2^n read off the rounding constant (its
/// low bits carry n + 127) and the result s + s·(e^r - 1) in one FMA. Half exp's instructions
/// (no clamps, no split scale), within 1 ULP (docs/numerics.md). tanh's e^{2|x|} and softmax's
/// exp(x - max) stay in this range.
SPMD_VL_FN vf exp_normal(vf x) {
  const exp_parts e = exp_reduce(x, splat(12583039.0f));  // 1.5 * 2^23 + 127
  const vf s = from_bits(bits(e.t) << 23);                  // 2^n
  return fma(s, e.expm1_r, s);
}

/// e^x for x <= 0, softmax's exp(x - max): exp_normal, and 0 below ln 2^-126, where 2^n would
/// not be normal (as oneDNN's and XNNPACK's softmax exps: a probability lost is under 1.2e-38).
SPMD_VL_FN vf exp_nonpositive(vf x) {
  const vf cutoff = splat(-87.3365402f);  // ln 2^-126, rounded toward 0
  return select(x < cutoff, splat(0.0f), exp_normal(max_ps(cutoff, x)));  // (NaN passes through)
}

/// log x: x = m 2^e with m in [√½, √2), log m by its polynomial in m - 1, plus e ln 2 in two
/// parts. Subnormals are scaled by 2^23 first; log 0 = -inf, log of a negative = NaN,
/// log inf = inf, NaN propagates.
SPMD_VL_FN vf log(vf x) {
  const auto sub = x < splat(1.17549435e-38f);  // subnormal, zero or negative
  const vf xs = select(sub, mul(x, splat(8388608.0f)), x);
  const vu b = bits(xs);
  vf e = to_float((vi)(b >> 23) - 126);
  e = select(sub, e - splat(23.0f), e);
  vf m = from_bits((b & splat_u(0x807fffffu)) | splat_u(0x3f000000u));  // [0.5, 1)
  const auto low = m < splat(0.707106781186547524f);
  e = select(low, e - splat(1.0f), e);
  m = select(low, m + m, m) - splat(1.0f);
  const vf z = mul(m, m);
  vf y = splat(7.0376836292e-2f);
  y = fma(y, m, splat(-1.1514610310e-1f));
  y = fma(y, m, splat(1.1676998740e-1f));
  y = fma(y, m, splat(-1.2420140846e-1f));
  y = fma(y, m, splat(1.4249322787e-1f));
  y = fma(y, m, splat(-1.6668057665e-1f));
  y = fma(y, m, splat(2.0000714765e-1f));
  y = fma(y, m, splat(-2.4999993993e-1f));
  y = fma(y, m, splat(3.3333331174e-1f));
  y = mul(mul(y, m), z);
  y = fma(e, splat(-2.12194440e-4f), y);
  y = fma(z, splat(-0.5f), y);
  vf r = fma(e, splat(0.693359375f), m + y);
  const float inf = __builtin_inff();
  r = select(x == splat(inf), x, r);
  r = select(x == splat(0.0f), splat(-inf), r);
  r = select(x < splat(0.0f), splat(__builtin_nanf("")), r);
  return select(x != x, x, r);
}

/// tanh x: |x| < 0.625 by its odd polynomial (no cancellation near 0; keeps -0), else
/// ±(1 - 2 / (e^{2|x|} + 1)) with |x| clamped to 9 (tanh 9 rounds to 1). NaN propagates.
SPMD_VL_FN vf tanh(vf x) {
  const vf z = abs(x);
  const vf zc = select(z > splat(9.0f), splat(9.0f), z);
  const vf e = exp_normal(zc + zc);
  const vf big = splat(1.0f) - splat(2.0f) / (e + splat(1.0f));
  const vf big_signed = from_bits(bits(big) | (bits(x) & splat_u(0x80000000u)));
  const vf s = mul(x, x);
  vf p = splat(-5.70498872745e-3f);
  p = fma(p, s, splat(2.06390887954e-2f));
  p = fma(p, s, splat(-5.37397155531e-2f));
  p = fma(p, s, splat(1.33314422036e-1f));
  p = fma(p, s, splat(-3.33332819422e-1f));
  const vf small = fma(mul(p, s), x, x);
  return select(z >= splat(0.625f), big_signed, small);
}

/// 1 / (1 + e^-x) for x >= 0, e^x / (1 + e^x) below (where e^-x would overflow first).
SPMD_VL_FN vf sigmoid(vf x) {
  const vf e = exp(-abs(x));
  const vf d = splat(1.0f) + e;
  return select(x >= splat(0.0f), splat(1.0f) / d, e / d);
}

/// torch's gelu(approximate='tanh'), in core/element_math.hpp's order of operations.
SPMD_VL_FN vf gelu_tanh(vf x) {
  const vf inner = mul(splat(0.79788456080286535588f), x + mul(mul(mul(splat(0.044715f), x), x), x));
  return mul(mul(splat(0.5f), x), splat(1.0f) + tanh(inner));
}

/// g · gelu_tanh'(x), torch's GeluBackward (approximate='tanh') in element_math's order.
SPMD_VL_FN vf gelu_tanh_backward(vf g, vf x) {
  const vf beta = splat(0.79788456080286535588f), kappa = splat(0.044715f);
  const vf x_sq = mul(x, x), x_cube = mul(x_sq, x);
  const vf t = tanh(mul(beta, x + mul(kappa, x_cube)));
  const vf left = mul(splat(0.5f), x), right = splat(1.0f) + t;
  const vf left_d = mul(splat(0.5f), right), right_d = splat(1.0f) - mul(t, t);
  const vf inner_d = mul(beta, splat(1.0f) + mul(mul(splat(3.0f), kappa), x_sq));
  return mul(g, left_d + mul(mul(left, right_d), inner_d));
}

template <unary_fn F>
SPMD_VL_FN vf unary(vf x) {
  if constexpr (F == unary_fn::exp) return exp(x);
  else if constexpr (F == unary_fn::log) return log(x);
  else if constexpr (F == unary_fn::tanh) return tanh(x);
  else if constexpr (F == unary_fn::sigmoid) return sigmoid(x);
  else {
    static_assert(F == unary_fn::gelu_tanh, "spmd::host::vector_math: no vector form of this function");
    return gelu_tanh(x);
  }
}

// ------------------------------------------------------------------------------------------
// Loops the dispatcher calls (vector_math.hpp).
// ------------------------------------------------------------------------------------------

/// y[i] = F(x[i]), i < n (y may be x). The tail runs through a padded register.
template <unary_fn F>
SPMD_VL_LOOP void map_unary(const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {  // two registers a turn: the polynomials' latency overlaps
    const vf a = unary<F>(load(x + i)), b = unary<F>(load(x + i + W));
    store(y + i, a);
    store(y + i + W, b);
  }
  for (; i < n; i += W) {
    if (i + W <= n) {
      store(y + i, unary<F>(load(x + i)));
      continue;
    }
    float buf[W] = {};
    __builtin_memcpy(buf, x + i, static_cast<std::size_t>(n - i) * sizeof(float));
    store(buf, unary<F>(load(buf)));
    __builtin_memcpy(y + i, buf, static_cast<std::size_t>(n - i) * sizeof(float));
  }
}

/// y[i] = exp_nonpositive(x[i]), i < n (for tests and benchmarks: softmax's exp).
SPMD_VL_LOOP void map_exp_nonpositive(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; i += W) {
    float buf[W] = {};
    const bool whole = i + W <= n;
    if (!whole) __builtin_memcpy(buf, x + i, static_cast<std::size_t>(n - i) * sizeof(float));
    const vf e = exp_nonpositive(load(whole ? x + i : buf));
    if (whole) store(y + i, e);
    else {
      store(buf, e);
      __builtin_memcpy(y + i, buf, static_cast<std::size_t>(n - i) * sizeof(float));
    }
  }
}

/// y[i] = g[i] · gelu_tanh'(x[i]), i < n.
SPMD_VL_LOOP void map_gelu_tanh_backward(const float* g, const float* x, float* y, std::int64_t n) {
  std::int64_t i = 0;
  for (; i + W <= n; i += W) store(y + i, gelu_tanh_backward(load(g + i), load(x + i)));
  if (i < n) {
    float bg[W] = {}, bx[W] = {};
    const auto rest = static_cast<std::size_t>(n - i) * sizeof(float);
    __builtin_memcpy(bg, g + i, rest);
    __builtin_memcpy(bx, x + i, rest);
    store(bg, gelu_tanh_backward(load(bg), load(bx)));
    __builtin_memcpy(y + i, bg, rest);
  }
}

// ------------------------------------------------------------------------------------------
// Rows: blocks of 16 lanes (see the top), for the reductions' fixed order.
// ------------------------------------------------------------------------------------------

struct block {
  vf v[K];
};
SPMD_VL_FN block load_block(const float* p) {
  block b;
  SPMD_VL_UNROLL for (int k = 0; k < K; ++k) b.v[k] = load(p + k * W);
  return b;
}
/// The first `count` (< 16) floats at p, the rest `fill`.
SPMD_VL_FN block load_part(const float* p, std::int64_t count, float fill) {
  float buf[B];
  for (int j = 0; j < B; ++j) buf[j] = j < count ? p[j] : fill;
  return load_block(buf);
}
SPMD_VL_FN void store_block(float* p, const block& b) {
  SPMD_VL_UNROLL for (int k = 0; k < K; ++k) store(p + k * W, b.v[k]);
}
SPMD_VL_FN void store_part(float* p, const block& b, std::int64_t count) {
  float buf[B];
  store_block(buf, b);
  for (std::int64_t j = 0; j < count; ++j) p[j] = buf[j];
}
/// A whole block to p (64-byte aligned) past the caches: a store that does not read the line
/// first (vector_math.hpp's streams_output says when). The scalar path stores as usual.
SPMD_VL_FN void stream_block(float* p, const block& b) {
#if SPMD_VL_W == 1 || !SPMD_HOST_VECTOR_X86
  store_block(p, b);
#elif defined(__clang__)
  SPMD_VL_UNROLL for (int k = 0; k < K; ++k) __builtin_nontemporal_store(b.v[k], reinterpret_cast<vf*>(p + k * W));
#elif SPMD_VL_W == 16
  __builtin_ia32_movntps512(p, b.v[0]);
#else
  __builtin_ia32_movntps256(p, b.v[0]);
  __builtin_ia32_movntps256(p + W, b.v[1]);
#endif
}
/// Orders the streaming stores before whatever follows (another thread reading the output).
SPMD_VL_FN void stream_fence() {
#if SPMD_VL_W > 1 && SPMD_HOST_VECTOR_X86
  __builtin_ia32_sfence();
#endif
}

/// a + b, or max a b as maxps has it (a > b ? a : b), on floats or vectors of any width.
template <bool Max, class T>
SPMD_VL_FN T fold_op(T a, T b) {
  if constexpr (Max) return a > b ? a : b;
  else return a + b;
}
/// The 16 lanes folded pairwise (lane j with lane j + 8, then + 4, + 2, + 1): one order on
/// every path, in halving registers where there are. (A max here ignores a NaN lane and
/// either zero may win a tie: softmax, its one user, needs neither; no lambdas in this file:
/// a lambda does not inherit its function's target.)
template <bool Max>
SPMD_VL_FN float fold(const block& b) {
#if SPMD_VL_W == 1
  float l[8];
  for (int j = 0; j < 8; ++j) l[j] = fold_op<Max>(b.v[j], b.v[j + 8]);
  for (int h = 4; h >= 1; h /= 2)
    for (int j = 0; j < h; ++j) l[j] = fold_op<Max>(l[j], l[j + h]);
  return l[0];
#else
  using v8 = float __attribute__((vector_size(32)));
  using v4 = float __attribute__((vector_size(16)));
  using v2 = float __attribute__((vector_size(8)));
#if SPMD_VL_W == 16
  const v8 h = fold_op<Max>(v8(__builtin_shufflevector(b.v[0], b.v[0], 0, 1, 2, 3, 4, 5, 6, 7)),
                            v8(__builtin_shufflevector(b.v[0], b.v[0], 8, 9, 10, 11, 12, 13, 14, 15)));
#else
  const v8 h = fold_op<Max>(b.v[0], b.v[1]);
#endif
  const v4 q = fold_op<Max>(v4(__builtin_shufflevector(h, h, 0, 1, 2, 3)), v4(__builtin_shufflevector(h, h, 4, 5, 6, 7)));
  const v2 d = fold_op<Max>(v2(__builtin_shufflevector(q, q, 0, 1)), v2(__builtin_shufflevector(q, q, 2, 3)));
  return fold_op<Max>(d[0], d[1]);
#endif
}
SPMD_VL_FN float fold_sum(const block& b) { return fold<false>(b); }
SPMD_VL_FN float fold_max(const block& b) { return fold<true>(b); }
/// The block of a row at j: whole, or the tail padded with `fill`.
SPMD_VL_FN block row_block(const float* x, std::int64_t j, std::int64_t n, float fill) {
  return j + B <= n ? load_block(x + j) : load_part(x + j, n - j, fill);
}
SPMD_VL_FN void store_row_block(float* y, std::int64_t j, std::int64_t n, const block& b) {
  if (j + B <= n) store_block(y + j, b);
  else store_part(y + j, b, n - j);
}

/// softmax (Log: log_softmax) of rows of n floats: rows r < rows at x + r * sx, to y + r * sy
/// (y may be x). max (NaN propagates), exp(x - max) and its sum in 16 lanes, then times
/// 1 / sum (log: (x - max) - log sum). A row of -inf (every entry masked) gives NaN
/// (exp(-inf - -inf)), as torch's does.
/// log_softmax's outputs of a row: (x - max) - log sum (not x - (max + log sum): that rounds
/// at max's scale).
SPMD_VL_FN void log_softmax_out(const float* px, float* py, std::int64_t n, vf mx, vf log_sum, bool stream) {
  for (std::int64_t j = 0; j < n; j += B) {
    block o = row_block(px, j, n, 0.0f);
    SPMD_VL_UNROLL for (int k = 0; k < K; ++k) o.v[k] = (o.v[k] - mx) - log_sum;
    if (stream) stream_block(py + j, o);
    else store_row_block(py, j, n, o);
  }
}

/// stream: the outputs go past the caches (whole, aligned blocks; n <= max_streamed_row);
/// softmax's exps then wait in a row on the stack.
template <bool Log>
SPMD_VL_LOOP void softmax_rows(const float* x, std::int64_t sx, float* y, std::int64_t sy, std::int64_t rows,
                               std::int64_t n, bool stream) {
  const float ninf = -__builtin_inff();
  alignas(64) float row[Log ? 1 : max_streamed_row];
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* px = x + r * sx;
    float* py = y + r * sy;
    // The max by maxps, which passes over a NaN: a NaN's exp(x - max) is NaN, so the sum is,
    // and every output with it (torch's max would be NaN: the same outputs). Which zero wins a
    // tie of +0 and -0 does not matter: x - max is the same.
    block m;
    SPMD_VL_UNROLL for (int k = 0; k < K; ++k) m.v[k] = splat(ninf);
    for (std::int64_t j = 0; j < n; j += B) {
      const block b = row_block(px, j, n, ninf);
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) m.v[k] = max_ps(b.v[k], m.v[k]);
    }
    const vf mx = splat(fold_max(m));
    block s{};
    // The next row is fetched while this one's exps are computed (they, not the memory, bound
    // this loop; the max pass over the next row then finds it in cache).
    const float* next = r + 1 < rows ? px + sx : px;
    for (std::int64_t j = 0; j < n; j += B) {
      __builtin_prefetch(next + j);
      const block b = row_block(px, j, n, ninf);  // the padding's exp(-inf - max) is 0
      block e;
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) {
        e.v[k] = exp_nonpositive(b.v[k] - mx);
        s.v[k] = s.v[k] + e.v[k];
      }
      if constexpr (!Log) store_row_block(stream ? row : py, j, n, e);
    }
    const float sum = fold_sum(s);
    if constexpr (Log) {
      // (Deferring this pass past the next row's, so that log's long chain overlaps it, was
      // faster in L2 and slower from memory, 0.70 against 0.82 of the copy: bench/RESULTS.md.)
      log_softmax_out(px, py, n, mx, log(splat(sum)), stream);
    } else {
      const vf inv = splat(1.0f / sum);
      for (std::int64_t j = 0; j < n; j += B) {
        block o = row_block(stream ? row : py, j, n, 0.0f);
        SPMD_VL_UNROLL for (int k = 0; k < K; ++k) o.v[k] = mul(o.v[k], inv);
        if (stream) stream_block(py + j, o);
        else store_row_block(py, j, n, o);
      }
    }
  }
  if (stream) stream_fence();
}

/// log Σ exp(x) of rows of n floats (row r at x + r * sx) to out[r]: log(Σ exp(x − max)) + max,
/// softmax's maximum and sum (cross entropy's forward, the composition's order).
SPMD_VL_LOOP void logsumexp_rows(const float* x, std::int64_t sx, float* out, std::int64_t rows, std::int64_t n) {
  const float ninf = -__builtin_inff();
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* px = x + r * sx;
    block m;
    SPMD_VL_UNROLL for (int k = 0; k < K; ++k) m.v[k] = splat(ninf);
    for (std::int64_t j = 0; j < n; j += B) {
      const block b = row_block(px, j, n, ninf);
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) m.v[k] = max_ps(b.v[k], m.v[k]);
    }
    const float mx = fold_max(m);
    block s{};
    for (std::int64_t j = 0; j < n; j += B) {
      const block b = row_block(px, j, n, ninf);
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) s.v[k] = s.v[k] + exp_nonpositive(b.v[k] - splat(mx));
    }
    const vf l = log(splat(fold_sum(s)));
    float l0;
    __builtin_memcpy(&l0, &l, sizeof l0);
    out[r] = l0 + mx;
  }
}

/// A row's mean and 1 / sqrt(variance + eps) (the biased variance, as torch.nn.LayerNorm), in
/// two passes over the row (which stays in L1 between them): the squared deviations from
/// the mean, no cancellation for a large mean.
struct row_stats {
  float mean, rstd;
};
SPMD_VL_FN row_stats stats_of(const float* x, std::int64_t n, float eps) {
  block s{};
  for (std::int64_t j = 0; j < n; j += B) {
    const block b = row_block(x, j, n, 0.0f);
    SPMD_VL_UNROLL for (int k = 0; k < K; ++k) s.v[k] = s.v[k] + b.v[k];
  }
  const float mean = fold_sum(s) / static_cast<float>(n);
  block q{};
  for (std::int64_t j = 0; j < n; j += B) {
    const block b = row_block(x, j, n, mean);  // (the padding deviates by 0)
    SPMD_VL_UNROLL for (int k = 0; k < K; ++k) {
      const vf d = b.v[k] - splat(mean);
      q.v[k] = fma(d, d, q.v[k]);
    }
  }
  const float var = fold_sum(q) / static_cast<float>(n);
  return {mean, 1.0f / __builtin_sqrtf(var + eps)};
}

/// layer_norm of rows of n floats (x + r * sx to y + r * sy), then * w + b where given (each
/// n floats, or null).
SPMD_VL_LOOP void layer_norm_rows(const float* x, std::int64_t sx, float* y, std::int64_t sy, std::int64_t rows,
                                  std::int64_t n, const float* w, const float* b, float eps, bool stream) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* px = x + r * sx;
    float* py = y + r * sy;
    if (r + 1 < rows)  // the next row fetched while this one's statistics are computed
      for (std::int64_t j = 0; j < n; j += B) __builtin_prefetch(px + sx + j);
    const row_stats st = stats_of(px, n, eps);
    const vf mean = splat(st.mean), rstd = splat(st.rstd);
    for (std::int64_t j = 0; j < n; j += B) {
      block o = row_block(px, j, n, 0.0f);
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) o.v[k] = mul(o.v[k] - mean, rstd);
      if (w) {
        const block bw = row_block(w, j, n, 0.0f), bb = row_block(b, j, n, 0.0f);
        SPMD_VL_UNROLL for (int k = 0; k < K; ++k) o.v[k] = fma(o.v[k], bw.v[k], bb.v[k]);
      }
      if (stream) stream_block(py + j, o);
      else store_row_block(py, j, n, o);
    }
  }
  if (stream) stream_fence();
}

/// layer_norm's input gradient over rows of n floats: ĝ = g * w (w null: g), x̂ = (x - mean)
/// * rstd, gx = rstd (ĝ - mean ĝ - x̂ mean(ĝ x̂)); g at g + r * sg, x at x + r * sx, gx to
/// y + r * sy.
SPMD_VL_LOOP void layer_norm_backward_rows(const float* g, std::int64_t sg, const float* x, std::int64_t sx,
                                           const float* w, float* y, std::int64_t sy, std::int64_t rows,
                                           std::int64_t n, float eps) {
  const vf inv_n = splat(1.0f / static_cast<float>(n));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* pg = g + r * sg;
    const float* px = x + r * sx;
    float* py = y + r * sy;
    const row_stats st = stats_of(px, n, eps);
    const vf mean = splat(st.mean), rstd = splat(st.rstd);
    block sum_g{}, sum_gx{};
    for (std::int64_t j = 0; j < n; j += B) {
      block gh = row_block(pg, j, n, 0.0f);
      const block bx = row_block(px, j, n, st.mean);  // (the padding's x̂ is 0)
      if (w) {
        const block bw = row_block(w, j, n, 0.0f);
        SPMD_VL_UNROLL for (int k = 0; k < K; ++k) gh.v[k] = mul(gh.v[k], bw.v[k]);
      }
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) {
        sum_g.v[k] = sum_g.v[k] + gh.v[k];
        sum_gx.v[k] = fma(gh.v[k], mul(bx.v[k] - mean, rstd), sum_gx.v[k]);
      }
    }
    const vf mean_g = mul(splat(fold_sum(sum_g)), inv_n), mean_gx = mul(splat(fold_sum(sum_gx)), inv_n);
    for (std::int64_t j = 0; j < n; j += B) {
      block gh = row_block(pg, j, n, 0.0f);
      const block bx = row_block(px, j, n, 0.0f);
      if (w) {
        const block bw = row_block(w, j, n, 0.0f);
        SPMD_VL_UNROLL for (int k = 0; k < K; ++k) gh.v[k] = mul(gh.v[k], bw.v[k]);
      }
      block o;
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) {
        const vf xh = mul(bx.v[k] - mean, rstd);
        o.v[k] = mul(rstd, (gh.v[k] - mean_g) - mul(xh, mean_gx));
      }
      store_row_block(py, j, n, o);
    }
  }
}

/// torch.optim.AdamW's step over n elements: p, m and v read from p_in, m_in, v_in and
/// written to p, m, v (each pair may be one array), g the gradient; core/optim_math.hpp's
/// operations in its order (no FMA: the same bits as its scalar and device code).
SPMD_VL_LOOP void adamw(const float* p_in, const float* g, const float* m_in, const float* v_in, float* p, float* m,
                        float* v, std::int64_t n, const optim_math::adamw_coeffs<float>& c) {
  const vf decay = splat(c.decay), omb1 = splat(c.one_minus_beta1), beta2 = splat(c.beta2),
           omb2 = splat(c.one_minus_beta2), bc2 = splat(c.bc2_sqrt), eps = splat(c.eps), step = splat(c.step_size);
  for (std::int64_t i = 0; i < n; i += W) {
    const bool whole = i + W <= n;
    float bp[W] = {}, bg[W] = {}, bm[W] = {}, bv[W] = {};
    const auto rest = static_cast<std::size_t>(whole ? W : n - i) * sizeof(float);
    if (!whole) {
      __builtin_memcpy(bp, p_in + i, rest);
      __builtin_memcpy(bg, g + i, rest);
      __builtin_memcpy(bm, m_in + i, rest);
      __builtin_memcpy(bv, v_in + i, rest);
    }
    vf P = load(whole ? p_in + i : bp), G = load(whole ? g + i : bg), M = load(whole ? m_in + i : bm),
       V = load(whole ? v_in + i : bv);
    if (c.decays) P = mul(P, decay);
    M = M + mul(G - M, omb1);
    V = mul(V, beta2) + mul(mul(G, omb2), G);
    const vf denom = sqrt(V) / bc2 + eps;
    P = P - mul(M / denom, step);
    if (whole) {
      store(p + i, P);
      store(m + i, M);
      store(v + i, V);
    } else {
      store(bp, P);
      store(bm, M);
      store(bv, V);
      __builtin_memcpy(p + i, bp, rest);
      __builtin_memcpy(m + i, bm, rest);
      __builtin_memcpy(v + i, bv, rest);
    }
  }
}

/// softmax of row r of an n x n block at s (row stride ld) over its first r + 1 entries, the
/// rest 0: attention's causal mask, in place. The masked entries are set to -inf first, so
/// every row runs whole blocks (exp(-inf - max) is 0 exactly).
SPMD_VL_LOOP void causal_softmax_rows(float* s, std::int64_t ld, std::int64_t rows, std::int64_t n, std::int64_t first) {
  const float ninf = -__builtin_inff();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t j = first + r + 1; j < n; ++j) s[r * ld + j] = ninf;
  softmax_rows<false>(s, ld, s, ld, rows, n, false);
}

/// softmax's backward over rows of n at stride ld, in place into dp: dp = scale · p (dp − Σ dp p).
SPMD_VL_LOOP void softmax_backward_rows(const float* p, float* dp, std::int64_t ld, std::int64_t rows, std::int64_t n,
                                        float scale) {
  const vf sc = splat(scale);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* pr = p + r * ld;
    float* gr = dp + r * ld;
    block acc{};
    for (std::int64_t j = 0; j < n; j += B) {
      const block bp = row_block(pr, j, n, 0.0f), bg = row_block(gr, j, n, 0.0f);
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) acc.v[k] = fma(bp.v[k], bg.v[k], acc.v[k]);
    }
    const vf dot = splat(fold_sum(acc));
    for (std::int64_t j = 0; j < n; j += B) {
      const block bp = row_block(pr, j, n, 0.0f);
      block o = row_block(gr, j, n, 0.0f);
      SPMD_VL_UNROLL for (int k = 0; k < K; ++k) o.v[k] = mul(mul(bp.v[k], o.v[k] - dot), sc);
      store_row_block(gr, j, n, o);
    }
  }
}

#include "spmd/host/gemm_lanes.hpp"

}  // namespace SPMD_VL_NS

#undef SPMD_VL_NS
#undef SPMD_VL_W
#undef SPMD_VL_FN
#undef SPMD_VL_LOOP
#undef SPMD_VL_FMA
#undef SPMD_VL_SQRT
#undef SPMD_VL_MIN
#undef SPMD_VL_MAX
#endif  // SPMD_VL_NS
