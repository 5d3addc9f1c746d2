// spmd/backends/cuda/elements.hpp — the element types that have device kernels.
//
// The kernels are compiled once, by nvcc, into the spmd_cuda library (kernels/), for these
// types; host code includes only declarations (launch.hpp), so it builds with the host
// compiler. A dtensor of another element type on this backend fails to compile, saying so.
#pragma once

#include <cstdint>
#include <type_traits>

#include "spmd/core/bfloat16.hpp"
#include "spmd/core/float16.hpp"

namespace spmd::cuda {

template <class T>
inline constexpr bool device_element =
    std::is_same_v<T, float> || std::is_same_v<T, double> || std::is_same_v<T, spmd::bfloat16> ||
    std::is_same_v<T, spmd::float16> ||
    std::is_same_v<T, std::int32_t> || std::is_same_v<T, std::int64_t>;

/// Expands X(T) for every device element type (the explicit instantiations).
#define SPMD_CUDA_FOR_EACH_ELEMENT(X) \
  X(float) X(double) X(::spmd::bfloat16) X(::spmd::float16) X(::std::int32_t) X(::std::int64_t)

}  // namespace spmd::cuda
