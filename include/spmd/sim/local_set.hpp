// spmd/sim/local_set.hpp — every rank's local tensor, in host memory.
//
// A `local_set<T>` holds one local tensor per rank of a mesh, indexed by mesh index (the
// rank's row-major position in the mesh, not its rank id): a row-major contiguous buffer
// and its local shape. It is the value-level state the executor works on; `dtensor` wraps
// one with a typed layout.
#pragma once

#include <cstring>
#include <utility>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/sim/buffer.hpp"
#include "spmd/sim/kernels.hpp"
#include "spmd/sim/view.hpp"

namespace spmd::sim {

inline index_t shape_elems(const shape_vec& s) {
  index_t n = 1;
  for (index_t e : s) n *= e;
  return n;
}

/// One rank's local tensor: a row-major buffer and its shape (local_set's element).
template <class T>
struct rank_local {
  buffer<T> buf;     // empty when the tensor has no elements
  shape_vec shape{};
  index_t size() const { return shape_elems(shape); }
};

template <class T>
class local_set {
 public:
  local_set() = default;
  explicit local_set(index_t n_ranks) : locals_(static_cast<std::size_t>(n_ranks)) {}

  local_set(local_set&&) noexcept = default;
  local_set& operator=(local_set&&) noexcept = default;
  /// A deep copy.
  local_set(const local_set& o) : locals_(o.locals_.size()) {
    for (std::size_t i = 0; i < locals_.size(); ++i) {
      assign(static_cast<index_t>(i), o.locals_[i].shape);
      if (const index_t n = o.locals_[i].size(); n > 0)
        detail::copy_bytes(locals_[i].buf.data(), o.locals_[i].buf.data(),
                           static_cast<std::size_t>(n) * sizeof(T));
    }
  }
  local_set& operator=(const local_set& o) {
    if (this != &o) *this = local_set(o);
    return *this;
  }

  /// Number of ranks (the mesh size).
  index_t ranks() const { return static_cast<index_t>(locals_.size()); }

  const shape_vec& shape(index_t i) const { return locals_[idx(i)].shape; }
  index_t size(index_t i) const { return locals_[idx(i)].size(); }
  T* data(index_t i) { return locals_[idx(i)].buf.data(); }
  const T* data(index_t i) const { return locals_[idx(i)].buf.data(); }
  strided_view<T> view(index_t i) { return {data(i), shape(i)}; }
  strided_view<const T> view(index_t i) const { return {data(i), shape(i)}; }

  /// Give mesh index i a new, uninitialised local of `shape`.
  void assign(index_t i, const shape_vec& shape) {
    rank_local<T>& l = locals_[idx(i)];
    const index_t n = shape_elems(shape);
    if (l.buf.capacity() < n || (n == 0 && l.buf)) l.buf = buffer<T>(n);
    l.shape = shape;
  }
  /// Install a buffer (at least shape's size) as mesh index i's local.
  void adopt(index_t i, buffer<T> buf, const shape_vec& shape) {
    locals_[idx(i)].buf = std::move(buf);
    locals_[idx(i)].shape = shape;
  }
  rank_local<T>& operator[](index_t i) { return locals_[idx(i)]; }
  const rank_local<T>& operator[](index_t i) const { return locals_[idx(i)]; }

 private:
  static std::size_t idx(index_t i) { return static_cast<std::size_t>(i); }
  std::vector<rank_local<T>> locals_;
};

}  // namespace spmd::sim
