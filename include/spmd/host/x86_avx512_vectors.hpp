// spmd/host/x86_avx512_vectors.hpp — 512-bit vectors as GCC's vector extensions, and the four
// AVX-512 instructions the extensions do not reach, without <immintrin.h>.
//
//   using namespace spmd::host::avx512::vec;
//   u32v x = splat(1u) + lanes;  f32v y = mul(to_float(x), splat(0.5f));
//
// Why not the intrinsics: the AVX-512 headers GCC 12 needs (avx512f, vl, bw) take 0.17 s to
// parse, on every translation unit that includes the simulation; the vector extensions
// (+ - * / ^ & | << >> and comparisons, __builtin_shufflevector, __builtin_convertvector) are
// part of the compiler, and GCC and clang turn them into the same instructions. What they lack
// is an unsigned 32x32->64-bit multiply (GCC 12 emits the 64-bit vpmullq, three times slower),
// a square root, the f16 conversion and streaming stores: each has a builtin, whose name GCC
// and clang spell differently, so each is one function here.
//
// Every function is for code compiled with SPMD_AVX512_TARGET (call it only where
// avx512::available()).
#pragma once

#include <cstdint>

#define SPMD_AVX512_TARGET "avx512f,avx512bw,avx512dq,avx512vl,f16c"
#define SPMD_AVX512_FN [[gnu::target(SPMD_AVX512_TARGET), gnu::always_inline]] inline

namespace spmd::host::avx512::vec {

using u32v = std::uint32_t __attribute__((vector_size(64)));  // 16 lanes
using i32v = std::int32_t __attribute__((vector_size(64)));
using u64v = std::uint64_t __attribute__((vector_size(64)));  // 8 lanes
using i64v = long long __attribute__((vector_size(64)));
using f32v = float __attribute__((vector_size(64)));
using u16v = std::uint16_t __attribute__((vector_size(64)));  // 32 lanes
using u16h = std::uint16_t __attribute__((vector_size(32)));  // 16 lanes (a half)
using i16h = short __attribute__((vector_size(32)));

/// The same 64 (or 32) bytes as another vector type.
template <class To, class From>
SPMD_AVX512_FN To as(From v) {
  static_assert(sizeof(To) == sizeof(From), "spmd::host::avx512::vec::as: vectors of one size.");
  return (To)v;  // a vector cast keeps the bits (no static_cast between vector types)
}

SPMD_AVX512_FN u32v splat(std::uint32_t v) { return u32v{} + v; }
SPMD_AVX512_FN f32v splat(float v) { return f32v{} + v; }
SPMD_AVX512_FN f32v to_float(u32v v) { return __builtin_convertvector(as<i32v>(v), f32v); }
SPMD_AVX512_FN u32v bits(f32v v) { return as<u32v>(v); }
SPMD_AVX512_FN f32v as_float(u32v v) { return as<f32v>(v); }
/// a ? yes : no, lane by lane (a: a comparison's all-ones or zero lanes).
SPMD_AVX512_FN f32v select(i32v a, f32v yes, f32v no) { return a ? yes : no; }

// IEEE arithmetic, each operation rounded once. A product goes through an empty asm, which
// the compiler cannot see through, so it is never fused with an add into an FMA: GCC fuses
// `a * b + c` in C++ whenever the target has FMA (and AVX-512 has), in any -std mode, and the
// scalar and device paths round twice. The asm emits no instruction.
SPMD_AVX512_FN f32v add(f32v a, f32v b) { return a + b; }
SPMD_AVX512_FN f32v sub(f32v a, f32v b) { return a - b; }
SPMD_AVX512_FN f32v mul(f32v a, f32v b) {
  f32v p = a * b;
  asm("" : "+v"(p));
  return p;
}
SPMD_AVX512_FN f32v div(f32v a, f32v b) { return a / b; }
SPMD_AVX512_FN f32v sqrt(f32v a) {
#if defined(__clang__)
  return __builtin_ia32_sqrtps512(a, 4);  // 4: the current rounding mode (nearest)
#else
  return __builtin_ia32_sqrtps512_mask(a, f32v{}, static_cast<std::uint16_t>(-1), 4);
#endif
}

/// The 64-bit products of the even 32-bit lanes of a and b (vpmuludq).
SPMD_AVX512_FN u64v mul_even(u32v a, u32v b) {
#if defined(__clang__)
  return as<u64v>(__builtin_ia32_pmuludq512(as<i32v>(a), as<i32v>(b)));
#else
  return as<u64v>(__builtin_ia32_pmuludq512_mask(as<i32v>(a), as<i32v>(b), i64v{},
                                                          static_cast<std::uint8_t>(-1)));
#endif
}

/// Sixteen floats to f16 patterns, rounded to nearest even (vcvtps2ph; NaNs quieted keeping
/// the sign and the payload's top, as float16::round_bits does).
SPMD_AVX512_FN u16h to_f16(f32v v) {
  return as<u16h>(__builtin_ia32_vcvtps2ph512_mask(v, 0x08, i16h{}, static_cast<std::uint16_t>(-1)));
}  // 0x08: round to nearest even, no exceptions

/// 64 bytes at dst, which must be 64-byte aligned, past the caches (no read for ownership).
SPMD_AVX512_FN void stream(void* dst, u32v v) {
#if defined(__clang__)
  __builtin_nontemporal_store(as<i64v>(v), static_cast<i64v*>(dst));
#else
  __builtin_ia32_movntdq512(static_cast<i64v*>(dst), as<i64v>(v));
#endif
}
/// Orders the streaming stores before what follows.
SPMD_AVX512_FN void fence() { __builtin_ia32_sfence(); }

}  // namespace spmd::host::avx512::vec
