// spmd/backends/cuda/device_set.hpp — every rank's local in one GPU's memory.
//
// The device counterpart of host::local_set: indexed by mesh index, a device buffer and a
// host-side shape per held rank. Shapes stay on the host, so the runtime's shape arithmetic
// never reads device memory; view(i) is a device_view, which host code cannot dereference by
// mistake (it is not a strided_view). Copies are device-to-device on the current stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/elements.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd::cuda {

using host::held_range;
using host::index_range;
using host::shape_elems;

/// A row-major contiguous block of device memory and its shape (what dtensor::local gives
/// on this backend). Pass data() to a kernel; do not read it on the host.
template <class T>
class device_view {
 public:
  device_view() = default;
  device_view(T* data, const shape_vec& shape) : data_(data), shape_(shape) {}
  /// A view of const elements.
  operator device_view<const T>() const { return {data_, shape_}; }

  T* data() const { return data_; }
  const shape_vec& extents() const { return shape_; }
  int rank() const { return shape_.size(); }
  index_t extent(int d) const { return shape_[d]; }
  index_t size() const { return shape_elems(shape_); }

 private:
  T* data_ = nullptr;
  shape_vec shape_{};
};

template <class T>
class device_set {
  static_assert(device_element<std::remove_const_t<T>>,
                "spmd::cuda: this element type has no device kernels; the CUDA backend takes "
                "float, double, spmd::bfloat16, spmd::float16, std::int32_t and std::int64_t.");

 public:
  device_set() = default;
  explicit device_set(index_t n_ranks) : locals_(static_cast<std::size_t>(n_ranks)), held_{0, n_ranks} {}
  device_set(index_t n_ranks, held_range held)
      : locals_(static_cast<std::size_t>(n_ranks)), held_(held) {}
  device_set(device_set&&) noexcept = default;
  device_set& operator=(device_set&&) noexcept = default;
  /// A deep copy (device to device, on the current stream).
  device_set(const device_set& o) : locals_(o.locals_.size()), held_(o.held_) {
    for (const index_t r : held())
      if (const index_t n = o.size(r); assign(r, o.shape(r)), n > 0)
        check(cudaMemcpyAsync(data(r), o.data(r), static_cast<std::size_t>(n) * sizeof(T),
                              cudaMemcpyDeviceToDevice, current_stream()),
              "cudaMemcpyAsync (device to device)");
  }
  device_set& operator=(const device_set& o) {
    if (this != &o) *this = device_set(o);
    return *this;
  }

  index_t ranks() const { return static_cast<index_t>(locals_.size()); }
  held_range held_ranks() const { return held_; }
  index_range held() const { return held_.indices(); }
  bool holds(index_t i) const { return held_.contains(i); }
  bool holds_all() const { return held_.lo == 0 && held_.hi == ranks(); }

  const shape_vec& shape(index_t i) const { return at(i).shape; }
  index_t size(index_t i) const { return shape_elems(at(i).shape); }
  T* data(index_t i) { return at(i).buf.data(); }
  const T* data(index_t i) const { return at(i).buf.data(); }
  device_view<T> view(index_t i) { return {data(i), shape(i)}; }
  device_view<const T> view(index_t i) const { return {data(i), shape(i)}; }

  /// Bytes of device memory the held locals take (device locals are never shared).
  std::size_t bytes_held() const {
    std::size_t b = 0;
    for (const index_t r : held()) b += static_cast<std::size_t>(at(r).buf.capacity()) * sizeof(T);
    return b;
  }

  /// Give mesh index i an uninitialised local of `shape` (its old buffer when large enough).
  void assign(index_t i, const shape_vec& shape) {
    entry& e = at(i);
    const index_t n = shape_elems(shape);
    if (e.buf.capacity() < n || (n == 0 && e.buf)) e.buf = device_buffer<T>(n);
    e.shape = shape;
  }
  /// Install a buffer (at least shape's size) as mesh index i's local.
  void adopt(index_t i, device_buffer<T> buf, const shape_vec& shape) {
    at(i).buf = std::move(buf);
    at(i).shape = shape;
  }
  /// Take mesh index i's buffer (its local is left empty).
  device_buffer<T> release(index_t i) { return std::move(at(i).buf); }

 private:
  struct entry {
    device_buffer<T> buf;
    shape_vec shape{};
  };
  entry& at(index_t i) { return locals_[static_cast<std::size_t>(i)]; }
  const entry& at(index_t i) const { return locals_[static_cast<std::size_t>(i)]; }
  std::vector<entry> locals_;
  held_range held_{};
};

/// Host locals copied to the device (on the current stream). `h` may be freed on return:
/// cudaMemcpyAsync from pageable memory returns once the source has been staged.
template <class T>
device_set<T> upload(const host::local_set<T>& h) {
  device_set<T> d(h.ranks(), h.held_ranks());
  for (const index_t r : h.held()) {
    d.assign(r, h.shape(r));
    if (const index_t n = h.size(r); n > 0)
      check(cudaMemcpyAsync(d.data(r), h.data(r), static_cast<std::size_t>(n) * sizeof(T),
                            cudaMemcpyHostToDevice, current_stream()),
            "cudaMemcpyAsync (host to device)");
  }
  return d;
}

/// Device locals copied to the host (waits for the current stream).
template <class T>
host::local_set<T> download(const device_set<T>& d) {
  host::local_set<T> h(d.ranks(), d.held_ranks());
  for (const index_t r : d.held()) {
    h.assign(r, d.shape(r));
    if (const index_t n = d.size(r); n > 0)
      check(cudaMemcpyAsync(h.data(r), d.data(r), static_cast<std::size_t>(n) * sizeof(T),
                            cudaMemcpyDeviceToHost, current_stream()),
            "cudaMemcpyAsync (device to host)");
  }
  synchronize();
  return h;
}

}  // namespace spmd::cuda
