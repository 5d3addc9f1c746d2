// spmd/runtime/autograd/shared.hpp — shared ownership for the tape's objects (nodes, the
// tensors variables share, the tensors a backward saves), without std::shared_ptr.
//
// Why not std::shared_ptr: the tape holds objects of a new type for nearly every recorded op
// (an op_node per closure type, a dtensor per layout), and std::shared_ptr instantiates its
// control block, allocator and constructor overloads for each of them: in
// tests/autograd/grad_shape.cpp, 46,548 functions and 3.4 MB of a 14.7 MB object at -O0
// (bench/RESULTS.md, "The tape's compile time"). Here the count sits in the object (an
// intrusive count, atomic as std::shared_ptr's is), every copy, move and release is the one
// non-template `shared_handle`, and a type adds only its constructor and destructor.
#pragma once

#include <cstddef>
#include <type_traits>
#include <utility>

#include "spmd/core/atomic.hpp"

namespace spmd::runtime {

/// A heap object owned by handles: the count, and the virtual destructor the last handle's
/// release calls.
class counted {
 public:
  counted() = default;
  counted(const counted&) = delete;
  counted& operator=(const counted&) = delete;
  virtual ~counted() = default;

 private:
  friend class shared_handle;
  atomic_word<long> refs_{1};  // a new object has its first owner
};

/// Shared ownership of a counted object (null, or one owner among others); not a template,
/// so copying, moving and dropping compile once.
class shared_handle {
 public:
  shared_handle() = default;
  shared_handle(std::nullptr_t) noexcept {}  // NOLINT: null converts, as for pointers
  /// Adopts p: a new object (count 1), owned by this handle from now on.
  explicit shared_handle(counted* p) noexcept : p_(p) {}
  shared_handle(const shared_handle& o) noexcept : p_(o.p_) {
    if (p_) p_->refs_.fetch_add(1, order::relaxed);
  }
  shared_handle(shared_handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  shared_handle& operator=(shared_handle o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }
  ~shared_handle() { reset(); }

  /// Drops this owner; the last one deletes the object. (acq_rel: every owner's writes
  /// happen before the destructor, as with std::shared_ptr.)
  void reset() noexcept {
    if (counted* p = std::exchange(p_, nullptr); p && p->refs_.fetch_sub(1, order::acq_rel) == 1) delete p;
  }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  friend bool operator==(const shared_handle& a, std::nullptr_t) noexcept { return a.p_ == nullptr; }
  /// How many handles own the object (0 for null): for tests.
  long owners() const noexcept { return p_ ? p_->refs_.load(order::relaxed) : 0; }

 protected:
  counted* p_ = nullptr;
};

/// A handle to an object of type N (a counted), for handles of the untyped base to be one type.
template <class N>
class counted_ref : public shared_handle {
  static_assert(std::is_base_of_v<counted, N>, "spmd::counted_ref: N must derive from spmd::runtime::counted.");

 public:
  counted_ref() = default;
  counted_ref(std::nullptr_t) noexcept {}  // NOLINT
  explicit counted_ref(N* p) noexcept : shared_handle(p) {}
  /// A handle to a derived type's object, seen as N.
  template <class D>
    requires(std::is_base_of_v<N, D> && !std::is_same_v<N, D>)
  counted_ref(const counted_ref<D>& d) noexcept : shared_handle(d) {}  // NOLINT
  template <class D>
    requires(std::is_base_of_v<N, D> && !std::is_same_v<N, D>)
  counted_ref(counted_ref<D>&& d) noexcept : shared_handle(std::move(d)) {}  // NOLINT

  N* get() const noexcept { return static_cast<N*>(p_); }
  N* operator->() const noexcept { return get(); }
  N& operator*() const noexcept { return *get(); }
};

/// A new N(args...), owned by the returned handle.
template <class N, class... A>
counted_ref<N> make_counted(A&&... a) {
  return counted_ref<N>(new N(std::forward<A>(a)...));
}

/// A value on the heap, shared by handles (copies of a variable are one tensor; a saved
/// tensor outlives the op that saved it).
template <class V>
class shared_value : public shared_handle {
  struct box final : counted {
    template <class... A>
    explicit box(A&&... a) : value(std::forward<A>(a)...) {}
    V value;
  };

 public:
  shared_value() = default;
  shared_value(std::nullptr_t) noexcept {}  // NOLINT
  /// A new heap copy of v.
  explicit shared_value(V v) : shared_handle(new box(std::move(v))) {}

  V* get() const noexcept { return p_ ? &static_cast<box*>(p_)->value : nullptr; }
  V* operator->() const noexcept { return get(); }
  V& operator*() const noexcept { return *get(); }
};

/// v copied to the heap, shared: what a backward closure keeps of a tensor.
template <class V>
shared_value<std::remove_cvref_t<V>> share(V&& v) {
  return shared_value<std::remove_cvref_t<V>>(std::forward<V>(v));
}

}  // namespace spmd::runtime
