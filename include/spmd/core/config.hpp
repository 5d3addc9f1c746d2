// spmd/core/config.hpp — portability macros and the library's scalar types.
#pragma once

#include <cstdint>

// Every function of the layout core is usable on the host, at compile time and
// in CUDA device code. SPMD_HD marks them for nvcc; for other compilers it is empty.
#if defined(__CUDACC__)
#define SPMD_HD __host__ __device__
#else
#define SPMD_HD
#endif

// A loop of constant trip count unrolled in device code (its loads then issue together:
// memory-level parallelism is what a GPU thread's throughput rests on). Nothing on the host.
#if defined(__CUDA_ARCH__)
#define SPMD_UNROLL _Pragma("unroll")
#else
#define SPMD_UNROLL
#endif

// A pointer that no other pointer in scope aliases (an output block freshly allocated, its
// inputs read-only): lets the compiler vectorise kernel loops at -O2, where GCC will not
// version a loop for possible aliasing. g++, clang, nvcc and MSVC all spell it __restrict.
#define SPMD_RESTRICT __restrict

// Inlining forced where bench/op_overhead measured g++'s own choice costing instructions at
// -O2 and -O3 (an operator's per-rank body, views, the region kernels' run loops). Without
// optimisation a forced inline only copies the callee's body into every caller: in
// tests/autograd/grad_shape.cpp at -O0 the operators' per-rank bodies were a quarter of the
// object's code. So the attribute applies to optimised builds only (__OPTIMIZE__: -O1 and up).
#if defined(__GNUC__) && defined(__OPTIMIZE__)
#define SPMD_FORCE_INLINE [[gnu::always_inline]]
#define SPMD_FORCE_INLINE_LAMBDA __attribute__((always_inline))
#else
#define SPMD_FORCE_INLINE
#define SPMD_FORCE_INLINE_LAMBDA
#endif

namespace spmd {

/// Signed 64-bit index: extents, offsets, ranks. Signed so that differences and
/// sentinels (`dyn`, "no rank") are ordinary values, as in mdspan's index_type.
using index_t = std::int64_t;

/// Capacities of the value-level encodings (placement lists, shapes). Types at the
/// surface may be any size up to these; the algorithms run over fixed-capacity
/// vectors so one instantiation serves every rank, at compile time and at run time.
inline constexpr int max_mesh_dims = 8;
inline constexpr int max_tensor_dims = 8;

}  // namespace spmd
