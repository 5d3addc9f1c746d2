// spmd/host/x86_avx2_intrinsics.hpp — the AVX2 and F16C intrinsics, without <immintrin.h>.
//
// <immintrin.h> declares every x86 extension (AVX-512 and the rest): 0.68 s of g++ 12's time
// (0.40 s of clang 14's) on each translation unit that includes it, which was every unit that
// includes the simulation (host/random_avx2.hpp needs AVX2). The headers of the extensions
// used here take 0.13 s. They refuse to be included on their own unless immintrin.h's include
// guard is defined, so it is defined around them and removed again: a later
// `#include <immintrin.h>` then brings everything else and skips what is already here (each
// header has its own guard). GCC's guard is _IMMINTRIN_H_INCLUDED, clang's __IMMINTRIN_H.
#pragma once

#include <smmintrin.h>  // SSE2 .. SSE4.1 (no guard needed)

#if defined(__clang__)
#if !defined(__IMMINTRIN_H)
#define __IMMINTRIN_H
#define SPMD_DEFINED_IMMINTRIN_GUARD
#endif
#elif defined(__GNUC__)
#if !defined(_IMMINTRIN_H_INCLUDED)
#define _IMMINTRIN_H_INCLUDED
#define SPMD_DEFINED_IMMINTRIN_GUARD
#endif
#endif

#include <avxintrin.h>
#include <avx2intrin.h>
#include <f16cintrin.h>

#if defined(SPMD_DEFINED_IMMINTRIN_GUARD)
#if defined(__clang__)
#undef __IMMINTRIN_H
#else
#undef _IMMINTRIN_H_INCLUDED
#endif
#undef SPMD_DEFINED_IMMINTRIN_GUARD
#endif
