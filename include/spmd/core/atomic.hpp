// spmd/core/atomic.hpp — the atomic word spmd's own counters and flags use, over the
// compiler's __atomic builtins.
//
//   spmd::atomic_word<long> n{1};
//   n.fetch_add(1, spmd::order::relaxed);   if (n.load(spmd::order::acquire) == 1) ...
//
// Why not std::atomic: with g++ 12 in C++20, <atomic> brings the atomic waits, and they
// bring <bits/std_mutex.h>, <system_error> and the sleep functions' <chrono>: 0.1 s of every
// translation unit that includes the simulation, which needs none of it (bench/RESULTS.md,
// "Compile time"). The builtins are what libstdc++'s and libc++'s std::atomic call for these
// operations; g++, clang and nvcc's host compilers have them, and ThreadSanitizer sees them.
// Only the operations spmd uses are here: loads, stores, exchange, compare-exchange and the
// fetch-and-modify of integers.
#pragma once

#include <type_traits>

namespace spmd {

/// The memory orders (std::memory_order's names).
enum class order : int {
  relaxed = __ATOMIC_RELAXED,
  acquire = __ATOMIC_ACQUIRE,
  release = __ATOMIC_RELEASE,
  acq_rel = __ATOMIC_ACQ_REL,
  seq_cst = __ATOMIC_SEQ_CST,
};

/// An integer or pointer read and written atomically (std::atomic<T>'s contract for the
/// operations it has). Not copyable, like std::atomic; constant-initialised from a constant.
template <class T>
class atomic_word {
  static_assert(std::is_integral_v<T> || std::is_pointer_v<T>,
                "spmd::atomic_word holds an integer or a pointer");

 public:
  constexpr atomic_word() noexcept : v_() {}
  constexpr atomic_word(T v) noexcept : v_(v) {}  // NOLINT: std::atomic converts implicitly too
  atomic_word(const atomic_word&) = delete;
  atomic_word& operator=(const atomic_word&) = delete;

  T load(order o = order::seq_cst) const noexcept { return __atomic_load_n(&v_, int(o)); }
  void store(T v, order o = order::seq_cst) noexcept { __atomic_store_n(&v_, v, int(o)); }
  T exchange(T v, order o = order::seq_cst) noexcept { return __atomic_exchange_n(&v_, v, int(o)); }
  /// On failure `expected` becomes the value found (std::atomic's rule); the failure order is
  /// the strongest that a failed load may have.
  bool compare_exchange_strong(T& expected, T desired, order o = order::seq_cst) noexcept {
    return __atomic_compare_exchange_n(&v_, &expected, desired, false, int(o), failure(o));
  }

  template <class U = T, class = std::enable_if_t<std::is_integral_v<U>>>
  T fetch_add(T d, order o = order::seq_cst) noexcept { return __atomic_fetch_add(&v_, d, int(o)); }
  template <class U = T, class = std::enable_if_t<std::is_integral_v<U>>>
  T fetch_sub(T d, order o = order::seq_cst) noexcept { return __atomic_fetch_sub(&v_, d, int(o)); }
  template <class U = T, class = std::enable_if_t<std::is_integral_v<U>>>
  T fetch_or(T d, order o = order::seq_cst) noexcept { return __atomic_fetch_or(&v_, d, int(o)); }
  template <class U = T, class = std::enable_if_t<std::is_integral_v<U>>>
  T fetch_and(T d, order o = order::seq_cst) noexcept { return __atomic_fetch_and(&v_, d, int(o)); }

 private:
  static constexpr int failure(order o) noexcept {
    return o == order::acq_rel ? __ATOMIC_ACQUIRE : o == order::release ? __ATOMIC_RELAXED : int(o);
  }
  alignas(sizeof(T)) T v_;  // aligned as std::atomic<T> is: a misaligned word is not atomic
};

}  // namespace spmd
