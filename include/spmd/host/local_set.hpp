// spmd/host/local_set.hpp — the local tensors this process holds, in host memory.
//
// A `local_set<T>` is indexed by mesh index (the rank's row-major position in the mesh, not
// its rank id) over the whole mesh, and holds a local tensor — a row-major contiguous buffer
// and its shape — for the mesh indices in its `held()` range: all of them in the simulation,
// this process's one (or none, outside the mesh) under MPI. It is the value-level state the
// executors work on; `runtime::dtensor` wraps one with a typed layout. Code that works on
// locals loops over `held()`, so it is the same for every backend.
//
// Ranks whose locals are equal by construction (replicas) may hold one buffer (`share`):
// a copy of a set shares every buffer, and writing a rank's local through the non-const
// `data(i)`/`view(i)` first gives that rank a copy of its own (copy on write), so changing
// one rank's local changes only that rank, as in LocalTensor. Code that only reads a
// non-const set says so with `cdata(i)`. `bytes_held()` counts each buffer once.
#pragma once

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/host/buffer.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/host/view.hpp"

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
  /// A copy: every rank's local shares the other set's buffer (copied when written).
  local_set(const local_set& o) : locals_(o.locals_.size()), held_(o.held_) {
    for (const index_t r : held_.indices()) share_from(r, o, r);
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

  // The accessors are forced inline: an operator reads them for every rank, and at -O3 g++
  // kept view() out of line in apply's per-rank loop (+211 instructions for an add on 8
  // ranks, bench/op_overhead), while the same loop written by hand inlined it.
  SPMD_SIM_INLINE const shape_vec& shape(index_t i) const { return locals_[idx(i)].shape; }
  index_t size(index_t i) const { return locals_[idx(i)].size(); }
  /// Mesh index i's elements, to write: a shared buffer is first copied (copy on write).
  SPMD_SIM_INLINE T* data(index_t i) {
    rank_local<T>& l = locals_[idx(i)];
    if (l.buf && !l.buf.unique()) unshare(l);
    return l.buf.data();
  }
  SPMD_SIM_INLINE const T* data(index_t i) const { return locals_[idx(i)].buf.data(); }
  /// Mesh index i's elements, to read (never copies).
  const T* cdata(index_t i) const { return data(i); }
  SPMD_SIM_INLINE strided_view<T> view(index_t i) { return {data(i), shape(i)}; }
  SPMD_SIM_INLINE strided_view<const T> view(index_t i) const { return {data(i), shape(i)}; }

  /// Mesh index i holds the buffer (and shape) of mesh index j: a replica, not a copy.
  void share(index_t i, index_t j) {
    if (i != j) share_from(i, *this, j);
  }
  /// Mesh index i holds the buffer (and shape) of mesh index j of another set.
  void share_from(index_t i, const local_set& o, index_t j) {
    locals_[idx(i)].buf = o.locals_[idx(j)].buf.share();
    locals_[idx(i)].shape = o.locals_[idx(j)].shape;
  }
  /// True when mesh indices i and j hold one buffer.
  bool shares(index_t i, index_t j) const {
    return locals_[idx(i)].buf && locals_[idx(i)].buf.data() == locals_[idx(j)].buf.data();
  }
  /// Bytes of memory the held locals take: each buffer once, however many ranks share it
  /// (whole pool blocks: a block is a power of two of at least 64 bytes).
  std::size_t bytes_held() const {
    std::vector<const T*> seen;
    seen.reserve(static_cast<std::size_t>(held_.count()));
    std::size_t bytes = 0;
    for (const index_t r : held_.indices()) {
      const buffer<T>& b = locals_[idx(r)].buf;
      if (!b || std::find(seen.begin(), seen.end(), b.data()) != seen.end()) continue;
      seen.push_back(b.data());
      bytes += b.block_bytes();
    }
    return bytes;
  }

  /// Give mesh index i a new, uninitialised local of `shape`.
  void assign(index_t i, const shape_vec& shape) { assign_local(locals_[idx(i)], shape); }
  /// assign(i, shapes[i]) for every mesh index i of `indices` (held ones) but those whose
  /// twin[i] >= 0 (`twin` null: none), in one loop of its own: an operator's outputs. Kept out
  /// of line so that, like a hand-written loop, it inlines assign and the pool acquire, which
  /// g++ left as 8 calls each in apply's large body (+110 instructions for an add on 8 ranks
  /// at -O3, bench/op_overhead). Not a template over the operator (its shapes and twins come
  /// as arrays): one per element type, not three functions per operator a unit uses.
  SPMD_SIM_NOINLINE void assign_each(index_range indices, const shape_vec* shapes, const index_t* twin) {
    if (twin == nullptr) {
      for (index_t i = indices.lo; i < indices.hi; ++i) assign_local(locals_[idx(i)], shapes[i]);
    } else {
      for (index_t i = indices.lo; i < indices.hi; ++i)
        if (twin[i] < 0) assign_local(locals_[idx(i)], shapes[i]);
    }
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
  SPMD_SIM_INLINE static void assign_local(rank_local<T>& l, const shape_vec& shape) {
    const index_t n = shape_elems(shape);
    if (l.buf.capacity() < n || (n == 0 && l.buf) || (l.buf && !l.buf.unique())) l.buf.renew(n);
    l.shape = shape;
  }
  static void unshare(rank_local<T>& l) {
    buffer<T> own(l.size());
    if (l.size() > 0)
      detail::copy_bytes(own.data(), l.buf.data(), static_cast<std::size_t>(l.size()) * sizeof(T));
    l.buf = std::move(own);
  }
  std::vector<rank_local<T>, detail::pool_allocator<rank_local<T>>> locals_;
  held_range held_{};
};

}  // namespace spmd::host
