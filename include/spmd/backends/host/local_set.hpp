// spmd/backends/host/local_set.hpp — the local tensors this process holds, in host memory.
//
// A `local_set<T>` is indexed by mesh index (the rank's row-major position in the mesh, not
// its rank id) over the whole mesh, and holds a local tensor — a row-major contiguous buffer
// and its shape — for the mesh indices in its `held()` range: all of them in the simulation,
// this process's one (or none, outside the mesh) under MPI. It is the value-level state the
// executors work on; `runtime::dtensor` wraps one with a typed layout. Code that works on
// locals loops over `held()`, so it is the same for every backend.
#pragma once

#include <cstring>
#include <utility>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/backends/host/buffer.hpp"
#include "spmd/backends/host/kernels.hpp"
#include "spmd/backends/host/view.hpp"

namespace spmd::host {

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

/// Indices lo, lo + 1, ..., hi - 1, for range-for (std::views::iota, which clang 14 cannot
/// compile against libstdc++ 12's ranges).
struct index_range {
  struct iterator {
    index_t i;
    constexpr index_t operator*() const { return i; }
    constexpr iterator& operator++() {
      ++i;
      return *this;
    }
    friend constexpr bool operator==(iterator, iterator) = default;
  };
  index_t lo = 0, hi = 0;
  constexpr iterator begin() const { return {lo}; }
  constexpr iterator end() const { return {hi > lo ? hi : lo}; }
};

/// The mesh indices [lo, hi) a process holds (one range: all of them, one, or none).
struct held_range {
  index_t lo = 0;
  index_t hi = 0;
  constexpr bool contains(index_t i) const { return lo <= i && i < hi; }
  constexpr index_t count() const { return hi - lo; }
  constexpr index_range indices() const { return {lo, hi}; }
  friend constexpr bool operator==(const held_range&, const held_range&) = default;
};

template <class T>
class local_set {
 public:
  local_set() = default;
  /// Every mesh index held (the simulation).
  explicit local_set(index_t n_ranks)
      : locals_(static_cast<std::size_t>(n_ranks)), held_{0, n_ranks} {}
  /// Only the mesh indices of `held` (a real backend: this process's ranks).
  local_set(index_t n_ranks, held_range held)
      : locals_(static_cast<std::size_t>(n_ranks)), held_(held) {}

  local_set(local_set&&) noexcept = default;
  local_set& operator=(local_set&&) noexcept = default;
  /// A deep copy.
  local_set(const local_set& o) : locals_(o.locals_.size()), held_(o.held_) {
    for (const index_t r : held_.indices()) {
      const auto i = static_cast<std::size_t>(r);
      assign(r, o.locals_[i].shape);
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
  /// The mesh indices whose locals this set holds.
  held_range held_ranks() const { return held_; }
  auto held() const { return held_.indices(); }
  bool holds(index_t i) const { return held_.contains(i); }
  /// True when every rank's local is here (the simulation).
  bool holds_all() const { return held_.lo == 0 && held_.hi == ranks(); }

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
  /// Take mesh index i's buffer (its local is left empty).
  buffer<T> release(index_t i) { return std::move(locals_[idx(i)].buf); }
  rank_local<T>& operator[](index_t i) { return locals_[idx(i)]; }
  const rank_local<T>& operator[](index_t i) const { return locals_[idx(i)]; }

 private:
  static std::size_t idx(index_t i) { return static_cast<std::size_t>(i); }
  std::vector<rank_local<T>> locals_;
  held_range held_{};
};

}  // namespace spmd::host
