// spmd/host/host_tensor.hpp — one plain tensor by value: a shape and row-major data. It is what
// one rank holds (to_local, from_local, a local_tensor's shard) and what a single device
// would compute (the reference a simulation is checked against).
//
//   auto a = spmd::sim::host_tensor<float>::arange({4, 4});   // 0, 1, ..., 15
//   auto z = spmd::sim::host_tensor<float>::zeros({2, 3});
//   a.at({1, 2});                                             // 6
//   a.view();                                                 // a strided_view<const float>
//
// The factories check the shape (no negative extent, fewer than 2^62 elements) and throw
// std::invalid_argument naming the extent; at() throws std::out_of_range naming the index.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/element_count.hpp"
#include "spmd/host/view.hpp"

namespace spmd::host {

template <class T>
struct host_tensor {
  std::vector<index_t> shape;
  std::vector<T> data;

  /// Every element `value`.
  static host_tensor full(std::vector<index_t> shape, T value) {
    const index_t n = checked_numel(shape, "full");
    return {std::move(shape), std::vector<T>(static_cast<std::size_t>(n), value)};
  }
  static host_tensor zeros(std::vector<index_t> shape) { return full(std::move(shape), T(0)); }
  static host_tensor ones(std::vector<index_t> shape) { return full(std::move(shape), T(1)); }
  /// Element = its row-major index: 0, 1, 2, ...
  static host_tensor arange(std::vector<index_t> shape) {
    host_tensor t = zeros(std::move(shape));
    for (std::size_t k = 0; k < t.data.size(); ++k) t.data[k] = static_cast<T>(k);
    return t;
  }

  index_t numel() const { return static_cast<index_t>(data.size()); }
  /// The tensor as a view (the type a local_tensor's shards are seen through).
  strided_view<const T> view() const { return {data.data(), view_shape()}; }
  strided_view<T> view() { return {data.data(), view_shape()}; }
  /// The element at a multi-index (one entry per dim).
  const T& at(std::initializer_list<index_t> idx) const { return data[offset(idx)]; }
  T& at(std::initializer_list<index_t> idx) { return data[offset(idx)]; }

  friend bool operator==(const host_tensor&, const host_tensor&) = default;

 private:
  static index_t checked_numel(const std::vector<index_t>& shape, const char* who) {
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (shape[d] < 0)
        throw std::invalid_argument(std::string("spmd::sim::host_tensor::") + who + ": extent " +
                                    std::to_string(shape[d]) + " of dim " + std::to_string(d) +
                                    " is negative");
    const index_t n = elements_within(shape, max_elements);
    if (n < 0)
      throw std::invalid_argument(std::string("spmd::sim::host_tensor::") + who +
                                  ": the shape has more than 2^62 elements");
    return n;
  }
  shape_vec view_shape() const {
    if (shape.size() > static_cast<std::size_t>(max_tensor_dims))
      throw std::invalid_argument("spmd::sim::host_tensor::view: " +
                                  std::to_string(shape.size()) + " dims, at most " +
                                  std::to_string(max_tensor_dims) + " are supported");
    shape_vec s{};
    for (index_t e : shape) s.push_back(e);
    return s;
  }
  std::size_t offset(std::initializer_list<index_t> idx) const {
    if (idx.size() != shape.size())
      throw std::out_of_range("spmd::sim::host_tensor::at: " + std::to_string(idx.size()) +
                              " indices for a tensor of " + std::to_string(shape.size()) +
                              " dims");
    index_t off = 0;
    std::size_t d = 0;
    for (index_t i : idx) {
      if (i < 0 || i >= shape[d])
        throw std::out_of_range("spmd::sim::host_tensor::at: index " + std::to_string(i) +
                                " of dim " + std::to_string(d) + " is outside [0, " +
                                std::to_string(shape[d]) + ")");
      off = off * shape[d] + i;
      ++d;
    }
    return static_cast<std::size_t>(off);
  }
};

}  // namespace spmd::host
