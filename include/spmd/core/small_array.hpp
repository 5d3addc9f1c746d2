// spmd/core/small_array.hpp — constexpr, host-and-device array types.
//
// std::array is not annotated for nvcc's device code, so the core carries its own
// aggregates: `sarray<T, N>` (exactly N values, the type-level results) and
// `svec<T, Cap>` (up to Cap values, the value-level encodings the algorithms use).
#pragma once

#include <cstddef>

#include "spmd/core/config.hpp"

namespace spmd {

/// Fixed-size array; an aggregate, usable in constant expressions and device code.
template <class T, std::size_t N>
struct sarray {
  T elems[N == 0 ? 1 : N];  // one spare element keeps N == 0 well-formed

  SPMD_HD static constexpr std::size_t size() { return N; }
  SPMD_HD constexpr T& operator[](std::size_t i) { return elems[i]; }
  SPMD_HD constexpr const T& operator[](std::size_t i) const { return elems[i]; }
  SPMD_HD constexpr T* begin() { return elems; }
  SPMD_HD constexpr T* end() { return elems + N; }
  SPMD_HD constexpr const T* begin() const { return elems; }
  SPMD_HD constexpr const T* end() const { return elems + N; }
};

template <class T, class... U>
sarray(T, U...) -> sarray<T, 1 + sizeof...(U)>;

/// Element-wise equality, across element types (so `sarray{2, 5}` compares with a
/// `dims<2>` of index_t).
template <class T, class U, std::size_t N>
SPMD_HD constexpr bool operator==(const sarray<T, N>& a, const sarray<U, N>& b) {
  for (std::size_t i = 0; i < N; ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

/// The shape-like result of a layout query for a tensor of rank R.
template <std::size_t R>
using dims = sarray<index_t, R>;

/// Vector of at most Cap values; the size is part of the value.
template <class T, int Cap>
struct svec {
  T elems[static_cast<std::size_t>(Cap)]{};
  int n = 0;

  SPMD_HD constexpr int size() const { return n; }
  SPMD_HD constexpr bool empty() const { return n == 0; }
  SPMD_HD constexpr T& operator[](int i) { return elems[i]; }
  SPMD_HD constexpr const T& operator[](int i) const { return elems[i]; }
  SPMD_HD constexpr void push_back(const T& v) { elems[n++] = v; }
  SPMD_HD constexpr T* begin() { return elems; }
  SPMD_HD constexpr T* end() { return elems + n; }
  SPMD_HD constexpr const T* begin() const { return elems; }
  SPMD_HD constexpr const T* end() const { return elems + n; }

  SPMD_HD friend constexpr bool operator==(const svec& a, const svec& b) {
    if (a.n != b.n) return false;
    for (int i = 0; i < a.n; ++i)
      if (!(a.elems[i] == b.elems[i])) return false;
    return true;
  }
};

/// Up to max_tensor_dims extents or offsets.
using shape_vec = svec<index_t, max_tensor_dims>;

/// Copy the first N values of an svec into an sarray (the typed result).
template <std::size_t N, class T, int Cap>
SPMD_HD constexpr sarray<T, N> to_sarray(const svec<T, Cap>& v) {
  sarray<T, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = v[static_cast<int>(i)];
  return out;
}

template <class T, std::size_t N>
SPMD_HD constexpr svec<T, (N > 0 ? static_cast<int>(N) : 1)> to_svec(const sarray<T, N>& a) {
  svec<T, (N > 0 ? static_cast<int>(N) : 1)> out{};
  for (std::size_t i = 0; i < N; ++i) out.push_back(a[i]);
  return out;
}

}  // namespace spmd
