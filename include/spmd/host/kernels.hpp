// spmd/host/kernels.hpp — the loops that move and reduce elements, run by run.
//
// A `run_geom` says where the runs are; these walk them. Contiguous runs are one memcpy
// each (short ones two fixed-size copies, inlined); reductions read every input of a small
// block at once and keep the block in registers, so each input streams through once.
// Element loops work on blocks of constant length, which compilers vectorise even at -O2.
// The region functions are out of line, one instance per element type; the compile-time
// path inlines only single runs and loops of runs with constant sizes (execute.hpp).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#if defined(__SSE2__)
#include <emmintrin.h>  // SSE2 is all these loops use; <immintrin.h> cost 0.6 s per unit
#endif

#include "spmd/core/config.hpp"
#include "spmd/host/element.hpp"
#include "spmd/plan/lower.hpp"

#if defined(__clang__)
#define SPMD_SIM_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define SPMD_SIM_UNROLL _Pragma("GCC unroll 64")
#else
#define SPMD_SIM_UNROLL
#endif
#if defined(__GNUC__)
#define SPMD_SIM_INLINE SPMD_FORCE_INLINE inline
#define SPMD_SIM_NOINLINE [[gnu::noinline]]
#define SPMD_SIM_INLINE_LAMBDA SPMD_FORCE_INLINE_LAMBDA
#else
#define SPMD_SIM_INLINE inline
#define SPMD_SIM_NOINLINE
#define SPMD_SIM_INLINE_LAMBDA
#endif

namespace spmd::host {

/// A set of reduce ops, one bit each (reduce_bit): the reductions a caller may run. The
/// kernels of the others are not instantiated. A compile-time plan reduces with one op at
/// most, and each (op, type) pair is two vectorised kernels: the four a plan never runs
/// were 0.25 s of g++ -O2's time in examples/mlp_demo.cpp. Callers that take the op at run
/// time pass every_reduce_op (the default).
using reduce_set = unsigned;
constexpr reduce_set reduce_bit(reduce_op op) { return reduce_set{1} << static_cast<unsigned>(op); }
inline constexpr reduce_set every_reduce_op = reduce_bit(reduce_op::sum) | reduce_bit(reduce_op::avg) |
                                              reduce_bit(reduce_op::max) | reduce_bit(reduce_op::min) |
                                              reduce_bit(reduce_op::product);

}  // namespace spmd::host

namespace spmd::host::detail {

/// Bytes per chunk of a reduction: the operands of one chunk stay in L1/L2.
inline constexpr index_t reduce_chunk_bytes = 16384;

/// Elements per block of the element-wise loops: a block has a constant trip count, so
/// compilers vectorise it even at -O2 (g++ 12's "very cheap" cost model refuses loops that
/// need a scalar epilogue).
template <class T>
inline constexpr index_t block_elems = 32 / sizeof(T) >= 8 ? 32 / sizeof(T) : 8;

/// f(i) for i in [0, n), in blocks of constant length (vectorised) and a tail.
template <class T, class F>
SPMD_SIM_INLINE void blocked(index_t n, F&& f) {
  constexpr index_t B = block_elems<T>;
  index_t i = 0;
  for (; i + B <= n; i += B)
    for (index_t k = 0; k < B; ++k) f(i + k);
  for (; i < n; ++i) f(i);
}

/// Calls f(source offset, destination offset) for every run, in row-major order.
template <class F>
SPMD_SIM_INLINE void for_each_run(const run_geom& g, F&& f) {
  if (g.run == 0) return;
  if (g.nd == 0) {
    f(g.soff, g.doff);
    return;
  }
  index_t idx[max_tensor_dims]{};
  index_t so = g.soff, dof = g.doff;
  for (;;) {
    f(so, dof);
    int d = g.nd - 1;
    for (; d >= 0; --d) {
      so += g.sstr[d];
      dof += g.dstr[d];
      if (++idx[d] < g.ext[d]) break;
      so -= g.sstr[d] * g.ext[d];
      dof -= g.dstr[d] * g.ext[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// --- streaming stores ------------------------------------------------------
// Large destinations are written with non-temporal stores (x86): they leave the cache
// before anyone reads them again, and streaming saves the read for ownership that ordinary
// stores pay. Every copy of 1 MiB or more goes through them (on the machines measured
// they beat memcpy by half: bench.cpp), as do the reductions' stores.

inline constexpr std::size_t stream_bytes_min = std::size_t{1} << 20;

/// Copy with non-temporal stores where the target has them (x86 SSE2), else memcpy. With
/// `next`, the same number of bytes there is prefetched along the way (the next run of a
/// strided source, which the hardware prefetcher does not see coming).
inline void stream_copy(void* dst, const void* src, std::size_t bytes,
                        const void* next = nullptr) {
#if defined(__SSE2__)
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  const char* pf = static_cast<const char*>(next);
  std::size_t head = (16 - (reinterpret_cast<std::uintptr_t>(d) & 15)) & 15;
  if (head > bytes) head = bytes;
  std::memcpy(d, s, head);
  d += head;
  s += head;
  bytes -= head;
  const std::size_t lines = bytes / 64;
  for (std::size_t i = 0; i < lines; ++i) {
    if (pf) __builtin_prefetch(pf + i * 64, 0, 0);
    for (std::size_t k = 0; k < 4; ++k)
      _mm_stream_si128(reinterpret_cast<__m128i*>(d + i * 64) + k,
                       _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i * 64) + k));
  }
  std::size_t done = lines * 64;
  for (; done + 16 <= bytes; done += 16)
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + done),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + done)));
  std::memcpy(d + done, s + done, bytes - done);
#else
  (void)next;
  std::memcpy(dst, src, bytes);
#endif
}
inline void stream_fence() {
#if defined(__SSE2__)
  _mm_sfence();
#endif
}
/// memcpy, streamed from stream_bytes_min on (faster than glibc's memcpy there on the
/// machines measured; see bench.cpp).
inline void copy_bytes(void* dst, const void* src, std::size_t bytes) {
  if (bytes >= stream_bytes_min) {
    stream_copy(dst, src, bytes);
    stream_fence();
  } else {
    std::memcpy(dst, src, bytes);
  }
}
inline void store(void* dst, const void* src, std::size_t bytes, bool stream) {
  if (stream)
    stream_copy(dst, src, bytes);
  else
    std::memcpy(dst, src, bytes);
}

template <std::size_t K>
SPMD_SIM_INLINE void copy_two(char* d, const char* s, std::size_t bytes) {  // K <= bytes <= 2K
  std::memcpy(d, s, K);
  std::memcpy(d + bytes - K, s + bytes - K, K);
}

/// Copy n elements between distinct buffers. Short runs (<= 64 bytes) are two fixed-size
/// copies that may overlap each other, inlined: no call per run of a narrow box.
template <class T>
SPMD_SIM_INLINE void copy_run(T* dst, const T* src, index_t n) {
  const std::size_t bytes = static_cast<std::size_t>(n) * sizeof(T);
  char* d = reinterpret_cast<char*>(dst);
  const char* s = reinterpret_cast<const char*>(src);
  if (bytes > 64) std::memcpy(d, s, bytes);
  else if (bytes >= 32) copy_two<32>(d, s, bytes);
  else if (bytes >= 16) copy_two<16>(d, s, bytes);
  else if (bytes >= 8) copy_two<8>(d, s, bytes);
  else if (bytes >= 4) copy_two<4>(d, s, bytes);
  else
    for (std::size_t k = 0; k < bytes; ++k) d[k] = s[k];
}

template <class T>
SPMD_SIM_NOINLINE void copy_region(T* dst, const T* src, const run_geom& g) {
  const index_t run = g.run;
  const std::size_t run_bytes = static_cast<std::size_t>(run) * sizeof(T);
  if (g.contiguous() && run_bytes >= 256 &&
      static_cast<std::size_t>(g.count()) * sizeof(T) >= stream_bytes_min) {
    const index_t step = g.nd > 0 ? g.sstr[g.nd - 1] : 0;  // to the next run, mostly
    for_each_run(g, [&](index_t so, index_t dof) SPMD_SIM_INLINE_LAMBDA {
      stream_copy(dst + dof, src + so, run_bytes, step != 0 ? src + so + step : nullptr);
    });
    stream_fence();
  } else if (g.contiguous()) {
    for_each_run(g, [&](index_t so, index_t dof) SPMD_SIM_INLINE_LAMBDA {
      copy_run(dst + dof, src + so, run);
    });
  } else {
    const index_t si = g.s_inner, di = g.d_inner;
    for_each_run(g, [&](index_t so, index_t dof) SPMD_SIM_INLINE_LAMBDA {
      for (index_t k = 0; k < run; ++k) dst[dof + k * di] = src[so + k * si];
    });
  }
}

/// True when a bundle of copies (schedule.hpp) is worth running row by row: large, with
/// runs long enough that each is a streaming copy.
template <class T>
constexpr bool bundle_pays(const sched_op& o) {
  const auto bytes = [](index_t n) { return static_cast<std::size_t>(n) * sizeof(T); };
  return o.bundle > 1 && bytes(o.geo.run) >= 256 &&
         bytes(o.geo.count()) * static_cast<std::size_t>(o.bundle) >= stream_bytes_min;
}

/// The `k` copies of a bundle, row by row: every op reads the same rows of one source (at
/// its own column offset), so the source is read in order, once, and each destination is
/// written in order with streaming stores.
template <class T>
SPMD_SIM_NOINLINE void copy_bundle(const sched_op* ops, index_t k, const T* const* in,
                                   T* const* out) {
  const run_geom& g = ops[0].geo;
  const T* src = in[ops[0].src];
  const std::size_t bytes = static_cast<std::size_t>(g.run) * sizeof(T);
  index_t idx[max_tensor_dims]{};
  index_t so = 0;  // offset of the current row in the source, common to the bundle
  for (;;) {
    for (index_t m = 0; m < k; ++m) {
      const run_geom& gm = ops[m].geo;
      index_t dof = gm.doff;
      for (int d = 0; d < g.nd; ++d) dof += idx[d] * gm.dstr[d];
      stream_copy(out[ops[m].dst] + dof, src + gm.soff + so, bytes);
    }
    int d = g.nd - 1;
    for (; d >= 0; --d) {
      so += g.sstr[d];
      if (++idx[d] < g.ext[d]) break;
      so -= g.sstr[d] * g.ext[d];
      idx[d] = 0;
    }
    if (d < 0) break;
  }
  stream_fence();
}

/// Like copy_region, for a destination that may be the source itself: the region moves
/// towards the front (a sub-box compacted in place), so runs go in row-major order.
template <class T>
SPMD_SIM_NOINLINE void move_region(T* dst, const T* src, const run_geom& g) {
  const index_t run = g.run;
  if (g.contiguous()) {
    for_each_run(g, [&](index_t so, index_t dof) SPMD_SIM_INLINE_LAMBDA {
      if (dst + dof != src + so)
        std::memmove(dst + dof, src + so, static_cast<std::size_t>(run) * sizeof(T));
    });
  } else {
    const index_t si = g.s_inner, di = g.d_inner;
    for_each_run(g, [&](index_t so, index_t dof) SPMD_SIM_INLINE_LAMBDA {
      for (index_t k = 0; k < run; ++k) dst[dof + k * di] = src[so + k * si];
    });
  }
}

template <class T>
SPMD_SIM_NOINLINE void fill_region(T* dst, const run_geom& g, T v) {
  const index_t run = g.run, di = g.d_inner;
  for_each_run(g, [&](index_t, index_t dof) SPMD_SIM_INLINE_LAMBDA {
    if (di == 1) {
      T* p = dst + dof;
      blocked<T>(run, [&](index_t k) SPMD_SIM_INLINE_LAMBDA { p[k] = v; });
    } else {
      for (index_t k = 0; k < run; ++k) dst[dof + k * di] = v;
    }
  });
}

template <class T>
SPMD_SIM_NOINLINE void scale_region(T* dst, const T* src, const run_geom& g, index_t n) {
  const index_t run = g.run, si = g.s_inner, di = g.d_inner;
  for_each_run(g, [&](index_t so, index_t dof) SPMD_SIM_INLINE_LAMBDA {
    if (si == 1 && di == 1) {
      T* d = dst + dof;
      const T* s = src + so;
      blocked<T>(run, [&](index_t k) SPMD_SIM_INLINE_LAMBDA { d[k] = times(s[k], n); });
    } else {
      for (index_t k = 0; k < run; ++k) dst[dof + k * di] = times(src[so + k * si], n);
    }
  });
}

// --- reductions -------------------------------------------------------------
//
// A reduction runs chunk by chunk: the chunk's result is combined in a small scratch array
// (in cache), always left to right in group order, then written to every destination
// (streamed when the destination is 1 MiB or more).

template <class T>
inline constexpr index_t reduce_chunk_elems = reduce_chunk_bytes / static_cast<index_t>(sizeof(T));

#if defined(__SSE2__)
/// NaN-propagating max/min (core/numerics.hpp) on 4 floats or 2 doubles, the same bits as
/// spmd::maximum / spmd::minimum element by element: the compilers do not vectorise those
/// (their NaN and signed-zero branches), which left P(max) reductions 3x slower than sums.
/// maxps/minps give the ordered maximum/minimum of unequal operands; equal operands (a zero
/// of either sign) take a & b for max (+0 wins), a | b for min (-0 wins); an unordered
/// pair gives the canonical quiet NaN.
template <reduce_op Op>
SPMD_SIM_INLINE __m128 simd_extremum(__m128 a, __m128 b) {
  const __m128 r = Op == reduce_op::max ? _mm_max_ps(a, b) : _mm_min_ps(a, b);
  const __m128 same = Op == reduce_op::max ? _mm_and_ps(a, b) : _mm_or_ps(a, b);
  const __m128 eq = _mm_cmpeq_ps(a, b), un = _mm_cmpunord_ps(a, b);
  const __m128 ordered = _mm_or_ps(_mm_and_ps(eq, same), _mm_andnot_ps(eq, r));
  const __m128 nan = _mm_castsi128_ps(_mm_set1_epi32(0x7fc00000));
  return _mm_or_ps(_mm_and_ps(un, nan), _mm_andnot_ps(un, ordered));
}
template <reduce_op Op>
SPMD_SIM_INLINE __m128d simd_extremum(__m128d a, __m128d b) {
  const __m128d r = Op == reduce_op::max ? _mm_max_pd(a, b) : _mm_min_pd(a, b);
  const __m128d same = Op == reduce_op::max ? _mm_and_pd(a, b) : _mm_or_pd(a, b);
  const __m128d eq = _mm_cmpeq_pd(a, b), un = _mm_cmpunord_pd(a, b);
  const __m128d ordered = _mm_or_pd(_mm_and_pd(eq, same), _mm_andnot_pd(eq, r));
  const __m128d nan = _mm_castsi128_pd(_mm_set1_epi64x(0x7ff8000000000000LL));
  return _mm_or_pd(_mm_and_pd(un, nan), _mm_andnot_pd(un, ordered));
}
#endif

/// x[0, B) = op over k = 0..n-1 of in[k][at, at + B), left to right in k, then / n for
/// avg: one block, fully unrolled, so that x lives in registers.
template <reduce_op Op, index_t B, class T>
SPMD_SIM_INLINE void reduce_block(T* x, const T* const* in, index_t n, index_t at) {
#if defined(__SSE2__)
  constexpr bool extremum = Op == reduce_op::max || Op == reduce_op::min;
  if constexpr (extremum && (std::is_same_v<T, float> || std::is_same_v<T, double>) &&
                B * sizeof(T) % 16 == 0) {
    constexpr index_t L = static_cast<index_t>(16 / sizeof(T)), Q = B / L;
    auto load = [](const T* p) SPMD_SIM_INLINE_LAMBDA {
      if constexpr (std::is_same_v<T, float>) return _mm_loadu_ps(p);
      else return _mm_loadu_pd(p);
    };
    using V = decltype(load(in[0]));
    V v[Q];
    SPMD_SIM_UNROLL
    for (index_t q = 0; q < Q; ++q) v[q] = load(in[0] + at + q * L);
    for (index_t j = 1; j < n; ++j) {
      const T* p = in[j] + at;
      SPMD_SIM_UNROLL
      for (index_t q = 0; q < Q; ++q) v[q] = simd_extremum<Op>(v[q], load(p + q * L));
    }
    SPMD_SIM_UNROLL
    for (index_t q = 0; q < Q; ++q) {
      if constexpr (std::is_same_v<T, float>) _mm_storeu_ps(x + q * L, v[q]);
      else _mm_storeu_pd(x + q * L, v[q]);
    }
    return;
  }
#endif
  const T* p0 = in[0] + at;
  SPMD_SIM_UNROLL
  for (index_t k = 0; k < B; ++k) x[k] = p0[k];
  for (index_t j = 1; j < n; ++j) {
    const T* p = in[j] + at;
    SPMD_SIM_UNROLL
    for (index_t k = 0; k < B; ++k) x[k] = combine<Op>(x[k], p[k]);
  }
  if constexpr (Op == reduce_op::avg)
    for (index_t k = 0; k < B; ++k) x[k] = divide(x[k], n);
}
/// The same for one element.
template <reduce_op Op, class T>
SPMD_SIM_INLINE T reduce_one(const T* const* in, index_t n, index_t at) {
  T x;
  reduce_block<Op, 1>(&x, in, n, at);
  return x;
}

/// acc[0, m) = op over k = 0..n-1 of in[k][off, off + m), left to right in k, then / n for
/// avg. Block by block: each block reads all n inputs (n streams at once, which the memory
/// system serves in parallel) and stays in registers. One instance per (op, type);
/// everything around it takes the op as a value.
template <reduce_op Op, class T>
SPMD_SIM_NOINLINE void reduce_chunk(T* acc, const T* const* in, index_t n, index_t off,
                                    index_t m) {
  constexpr index_t B = block_elems<T>;
  index_t i = 0;
  for (; i + B <= m; i += B) {
    T x[B];
    reduce_block<Op, B>(x, in, n, off + i);
    SPMD_SIM_UNROLL
    for (index_t k = 0; k < B; ++k) acc[i + k] = x[k];
  }
  for (; i < m; ++i) acc[i] = reduce_one<Op>(in, n, off + i);
}

/// Elements per block of reduce_stream: two cache lines of each input per step (measured
/// on the development machine: 128 bytes reach 0.98 of the floor, 32 bytes 0.93).
template <class T>
inline constexpr index_t stream_block_elems = static_cast<index_t>(128 / sizeof(T));

/// out[0, m) = op over k of in[k][off, off + m), stored with non-temporal stores straight
/// from registers, block by block (no scratch array): a large reduction into one output
/// reads its n inputs once and writes the output once. The same arithmetic, in the same
/// order, as reduce_chunk. out may be one of the inputs (in[k] + off == out): a block is
/// read from every input before it is stored. @pre out is 16-byte aligned.
template <reduce_op Op, class T>
SPMD_SIM_NOINLINE void reduce_stream(T* out, const T* const* in, index_t n, index_t off,
                                     index_t m) {
  constexpr index_t B = stream_block_elems<T>;
  index_t i = 0;
#if defined(__SSE2__)
  static_assert(B * sizeof(T) % 16 == 0);
  for (; i + B <= m; i += B) {
    alignas(16) T x[B];
    reduce_block<Op, B>(x, in, n, off + i);
    SPMD_SIM_UNROLL
    for (std::size_t q = 0; q < B * sizeof(T) / 16; ++q)
      _mm_stream_si128(reinterpret_cast<__m128i*>(out + i) + q,
                       _mm_load_si128(reinterpret_cast<const __m128i*>(x) + q));
  }
#endif
  for (; i < m; ++i) out[i] = reduce_one<Op>(in, n, off + i);
}

template <class T>
using chunk_kernel = void (*)(T*, const T* const*, index_t, index_t, index_t);

/// A reduce op outside the caller's reduce_set reached a kernel: a bug in spmd (the set is
/// computed from the same plan or layout the op comes from).
[[noreturn, gnu::cold, gnu::noinline]] inline void reduce_op_not_compiled(reduce_op op) {
  std::fprintf(stderr, "spmd: internal error: reduction %s reached a kernel set compiled without it\n",
               reduce_op_name(op));
  std::abort();
}

/// Kernel of op, among those of Ops (Kind: chunk_kind or stream_kind).
template <class T, reduce_set Ops, template <reduce_op, class> class Kind>
chunk_kernel<T> kernel_of(reduce_op op) {
  chunk_kernel<T> k = nullptr;
  switch (op) {  // if constexpr: an op outside Ops is not named, so not instantiated
    case reduce_op::sum: if constexpr ((Ops & reduce_bit(reduce_op::sum)) != 0) k = Kind<reduce_op::sum, T>::run; break;
    case reduce_op::avg: if constexpr ((Ops & reduce_bit(reduce_op::avg)) != 0) k = Kind<reduce_op::avg, T>::run; break;
    case reduce_op::max: if constexpr ((Ops & reduce_bit(reduce_op::max)) != 0) k = Kind<reduce_op::max, T>::run; break;
    case reduce_op::min: if constexpr ((Ops & reduce_bit(reduce_op::min)) != 0) k = Kind<reduce_op::min, T>::run; break;
    case reduce_op::product:
      if constexpr ((Ops & reduce_bit(reduce_op::product)) != 0) k = Kind<reduce_op::product, T>::run;
      break;
  }
  if (!k) [[unlikely]] reduce_op_not_compiled(op);
  return k;
}
template <reduce_op Op, class T>
struct chunk_kind {
  static constexpr chunk_kernel<T> run = reduce_chunk<Op, T>;
};
template <reduce_op Op, class T>
struct stream_kind {
  static constexpr chunk_kernel<T> run = reduce_stream<Op, T>;
};

/// Every out[o][0, len) (o < n_out) = op over k of in[k][off, off + len). An output may be
/// its own rank's input (in place): each chunk is reduced into a scratch array, from every
/// input, before it is stored to any output.
template <class T, reduce_set Ops = every_reduce_op>
SPMD_SIM_NOINLINE void reduce_into(reduce_op op, T* const* out, index_t n_out,
                                   const T* const* in, index_t n, index_t off, index_t len,
                                   bool stream) {
  if (stream && n_out == 1) {  // one large output: straight from registers (reduce_stream)
    T* o = out[0];
    // elements up to the first 16-byte boundary of the output, as a scalar block
    index_t head = static_cast<index_t>(((16 - (reinterpret_cast<std::uintptr_t>(o) & 15)) & 15) / sizeof(T));
    if (reinterpret_cast<std::uintptr_t>(o) % sizeof(T) != 0 || head > len) head = len;
    const chunk_kernel<T> kernel = kernel_of<T, Ops, chunk_kind>(op);
    if (head > 0) kernel(o, in, n, off, head);
    if (len > head) kernel_of<T, Ops, stream_kind>(op)(o + head, in, n, off + head, len - head);
    return;
  }
  constexpr index_t chunk = reduce_chunk_elems<T>;
  const chunk_kernel<T> kernel = kernel_of<T, Ops, chunk_kind>(op);
  alignas(64) T acc[chunk];
  for (index_t c = 0; c < len; c += chunk) {
    const index_t m = len - c < chunk ? len - c : chunk;
    kernel(acc, in, n, off + c, m);
    for (index_t o = 0; o < n_out; ++o)
      store(out[o] + c, acc, static_cast<std::size_t>(m) * sizeof(T), stream);
  }
}

/// dst[g.d] = op over the n sources' [g.s] (all sources share one shape). Strided runs (a
/// region one element wide in the innermost dim) reduce one element at a time.
template <class T, reduce_set Ops = every_reduce_op>
SPMD_SIM_NOINLINE void reduce_region(reduce_op op, T* dst, const T* const* in, index_t n,
                                     const run_geom& g) {
  const index_t run = g.run;
  const bool stream = static_cast<std::size_t>(g.count()) * sizeof(T) >= stream_bytes_min;
  const chunk_kernel<T> kernel = kernel_of<T, Ops, chunk_kind>(op);
  for_each_run(g, [&](index_t so, index_t dof) SPMD_SIM_INLINE_LAMBDA {
    if (g.contiguous()) {
      T* out = dst + dof;
      reduce_into<T, Ops>(op, &out, 1, in, n, so, run, stream);
    } else {
      for (index_t k = 0; k < run; ++k) {
        T acc;
        kernel(&acc, in, n, so + k * g.s_inner, 1);
        dst[dof + k * g.d_inner] = acc;
      }
    }
  });
  if (stream) stream_fence();
}

/// All-reduce of n whole buffers of len elements: out[k] = op over in[.] for every k;
/// out[k] may be in[k].
template <class T, reduce_set Ops = every_reduce_op>
inline void all_reduce(reduce_op op, T* const* out, const T* const* in, index_t n, index_t len) {
  const bool stream = static_cast<std::size_t>(len) * sizeof(T) >= stream_bytes_min;
  reduce_into<T, Ops>(op, out, n, in, n, 0, len, stream);
  if (stream) stream_fence();
}

}  // namespace spmd::host::detail
