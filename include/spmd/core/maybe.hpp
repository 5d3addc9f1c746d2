// spmd/core/maybe.hpp — a value or nothing, in place: what std::optional does for the tape's
// nodes (a gradient not yet arrived, a closure already released), at a smaller compile cost.
//
// std::optional<T> is five class templates deep (payload, base, the copy and move
// assignment bases, optional), each with its own members; a node type per recorded op
// instantiates them all: 22,449 functions in tests/autograd/grad_shape.cpp at -O0. maybe<T>
// is one class with the members a node uses; it is neither copied nor moved (a node is not).
#pragma once

#include <memory>
#include <new>
#include <utility>

namespace spmd {

template <class T>
class maybe {
 public:
  maybe() = default;
  maybe(const maybe&) = delete;
  maybe& operator=(const maybe&) = delete;
  ~maybe() { reset(); }

  /// Destroys the value held, if any, then holds T(args...). (When that throws, nothing is
  /// held. The arguments must not refer to the value held: it is gone before they are used;
  /// pass a new value, as grad_node::accumulate does.)
  template <class... A>
  T& emplace(A&&... args) {
    reset();
    T* p = ::new (static_cast<void*>(buf_)) T(std::forward<A>(args)...);
    has_ = true;
    return *p;
  }
  void reset() noexcept {
    if (has_) {
      has_ = false;
      std::destroy_at(get());
    }
  }
  bool has_value() const noexcept { return has_; }
  explicit operator bool() const noexcept { return has_; }
  T& operator*() noexcept { return *get(); }
  const T& operator*() const noexcept { return *get(); }
  T* operator->() noexcept { return get(); }
  const T* operator->() const noexcept { return get(); }

 private:
  T* get() noexcept { return std::launder(reinterpret_cast<T*>(buf_)); }
  const T* get() const noexcept { return std::launder(reinterpret_cast<const T*>(buf_)); }

  alignas(T) unsigned char buf_[sizeof(T)];
  bool has_ = false;
};

}  // namespace spmd
