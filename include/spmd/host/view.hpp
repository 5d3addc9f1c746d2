// spmd/host/view.hpp — a strided view of host memory, rank <= 8 (mdspan's job, host only).
//
//   spmd::sim::strided_view<float> v = dt.local(3);   // a rank's local tensor
//   v(1, 4) = 2.f;                                    // row-major, (i, j)
//   v.extent(0); v.stride(0); v.size(); v.span();     // span(): contiguous views only
//
// The simulation stores every local tensor row-major and contiguous; a view adds nothing
// but the index arithmetic. Views do not own memory.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

#include "spmd/core/config.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd::host {

template <class T>
class strided_view {
 public:
  using element_type = T;
  using value_type = std::remove_cv_t<T>;

  constexpr strided_view() = default;

  /// A row-major contiguous view of `shape` at `data`. Forced inline, as the operators make
  /// one per rank and input (bench/op_overhead: g++ -O2 kept it out of line in apply).
  SPMD_FORCE_INLINE constexpr strided_view(T* data, const shape_vec& shape) : data_(data), extents_(shape) {
    strides_.n = shape.size();
    index_t s = 1;
    for (int d = shape.size() - 1; d >= 0; --d) {
      strides_[d] = s;
      s *= shape[d];
    }
  }
  /// Any strides (in elements).
  constexpr strided_view(T* data, const shape_vec& shape, const shape_vec& strides)
      : data_(data), extents_(shape), strides_(strides) {}

  /// A view of const elements.
  constexpr operator strided_view<const T>() const
    requires(!std::is_const_v<T>)
  {
    return {data_, extents_, strides_};
  }

  constexpr T* data() const { return data_; }
  constexpr int rank() const { return extents_.size(); }
  constexpr index_t extent(int d) const { return extents_[d]; }
  constexpr index_t stride(int d) const { return strides_[d]; }
  constexpr const shape_vec& extents() const { return extents_; }
  constexpr const shape_vec& strides() const { return strides_; }

  /// Number of elements.
  constexpr index_t size() const {
    index_t n = 1;
    for (index_t e : extents_) n *= e;
    return n;
  }
  constexpr bool empty() const { return size() == 0; }

  /// True when the elements are row-major and dense.
  constexpr bool is_contiguous() const {
    index_t s = 1;
    for (int d = rank() - 1; d >= 0; --d) {
      if (extents_[d] != 1 && strides_[d] != s) return size() == 0;
      s *= extents_[d];
    }
    return true;
  }

  /// The elements as a span. @pre is_contiguous()
  constexpr std::span<T> span() const { return {data_, static_cast<std::size_t>(size())}; }

  /// Element at a multi-index (one index per dim).
  template <class... I>
  constexpr T& operator()(I... idx) const {
    static_assert(sizeof...(I) <= max_tensor_dims);
    const index_t i[]{static_cast<index_t>(idx)..., 0};
    index_t off = 0;
    for (std::size_t d = 0; d < sizeof...(I); ++d) off += i[d] * strides_[static_cast<int>(d)];
    return data_[off];
  }
  /// Element at a multi-index given as a shape_vec-like container.
  constexpr T& at(const shape_vec& idx) const {
    index_t off = 0;
    for (int d = 0; d < idx.size(); ++d) off += idx[d] * strides_[d];
    return data_[off];
  }

 private:
  T* data_ = nullptr;
  shape_vec extents_{};
  shape_vec strides_{};
};

}  // namespace spmd::host
