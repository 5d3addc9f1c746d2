// spmd/host/buffer.hpp — host buffers for local tensors, from a caching pool.
//
// Every local tensor lives in a `buffer<T>` (owning, move-only, uninitialised). Buffers come
// from a process-wide pool that keeps released blocks by size class (powers of two) and
// hands them out again, as PyTorch's caching allocator does: a redistribute that runs again
// finds its buffers already mapped and touched, so it runs at memcpy speed instead of paying
// for page faults, and small steps cost no malloc. `release_cached_memory()` frees the
// cache; `cached_bytes()` tells its size.
//
// A block can have several owners (`share()`): ranks whose locals are equal by construction
// (replicas) hold one block, and whoever writes first takes a copy (local_set::data). The
// count of owners is allocated only when a block is first shared, so a block with one owner
// costs what it did before sharing existed.
#pragma once

#include <bit>
#include <cstdint>
#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/atomic.hpp"
#include "spmd/core/config.hpp"
#include "spmd/host/sync.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace spmd::host {

namespace detail {

class buffer_pool {
 public:
  static constexpr std::size_t alignment = 64;
  static constexpr int min_class = 6;  // 64 bytes
  static constexpr int classes = 64;

  static buffer_pool& instance() {
    static buffer_pool* pool = new buffer_pool;  // never destroyed: buffers may outlive main
    return *pool;
  }

  /// Size class of a request: the smallest power of two >= bytes (at least 64).
  static int class_of(std::size_t bytes) {
    const int c = static_cast<int>(std::bit_width(bytes > 1 ? bytes - 1 : 1));
    return c < min_class ? min_class : c;
  }

  void* acquire(int cls) {
    {
      lock held(mutex_);
      auto& list = free_[cls];
      if (!list.empty()) {
        // Small blocks: the last one freed (warm in the cache). Large ones: the first one
        // freed, so that a tensor's ranks get back their blocks in the order they released
        // them. Measured on the development machine: 8 ranks of 256 MiB handed back in
        // reverse order (last freed first) made a reduction over them read at 0.4 of the
        // speed it has on the same blocks in their first order (bench/RESULTS.md).
        void* p;
        if (cls >= huge_class) {
          p = list.front();
          list.erase(list.begin());
        } else {
          p = list.back();
          list.pop_back();
        }
        cached_ -= std::size_t{1} << cls;
        return p;
      }
    }
    try {
      return allocate(cls);
    } catch (const std::bad_alloc&) {
      release_all();
      return allocate(cls);
    }
  }

  void release(void* p, int cls) {
    lock held(mutex_);
    free_[cls].push_back(p);
    cached_ += std::size_t{1} << cls;
  }

  void release_all() {
    lock held(mutex_);
    for (int c = 0; c < classes; ++c) {
      for (void* p : free_[c]) deallocate(p, c);
      free_[c].clear();
    }
    cached_ = 0;
  }

  /// Blocks of 2 MiB and more are mapped from the system directly (Linux), aligned to 2 MiB
  /// and asked to be backed by huge pages: one page fault per 2 MiB instead of 512 when
  /// first touched, and fewer TLB misses when copied. Mapped, not taken from the heap:
  /// measured on the development machine (bench/RESULTS.md, "Replicas and threads"), a
  /// reduction reading 8 heap blocks of 256 MiB ran at half the speed of the same reading
  /// 8 mapped blocks, whatever their alignment.
  static constexpr int huge_class = 21;
  static std::size_t align_of(int cls) {
    return cls >= huge_class ? std::size_t{1} << huge_class : alignment;
  }
  static void* allocate(int cls) {
    const std::size_t bytes = std::size_t{1} << cls;
#if defined(__linux__) && defined(MAP_ANONYMOUS)
    if (cls >= huge_class) {
      const std::size_t align = align_of(cls);
      const std::size_t span = bytes + align;
      void* m = ::mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (m == MAP_FAILED) throw std::bad_alloc();
      char* raw = static_cast<char*>(m);
      char* p = reinterpret_cast<char*>(
                    (reinterpret_cast<std::uintptr_t>(raw) + align - 1) & ~(std::uintptr_t{align} - 1));
      if (p > raw) ::munmap(raw, static_cast<std::size_t>(p - raw));  // the slack, both ends
      if (const std::size_t tail = static_cast<std::size_t>(raw + span - (p + bytes)); tail > 0)
        ::munmap(p + bytes, tail);
#if defined(MADV_HUGEPAGE) && !defined(SPMD_SIM_NO_HUGEPAGES)
      ::madvise(p, bytes, MADV_HUGEPAGE);
#endif
      return p;
    }
#endif
    return ::operator new(bytes, std::align_val_t{align_of(cls)});
  }
  static void deallocate(void* p, int cls) {
#if defined(__linux__) && defined(MAP_ANONYMOUS)
    if (cls >= huge_class) {
      ::munmap(p, std::size_t{1} << cls);
      return;
    }
#endif
    ::operator delete(p, std::align_val_t{align_of(cls)});
  }

  std::size_t cached_bytes() {
    lock held(mutex_);
    return cached_;
  }

 private:
  mutex mutex_;
  std::vector<void*> free_[classes];
  std::size_t cached_ = 0;
};

/// A per-thread front for small blocks (up to 1 MiB, a few per size class): no lock on
/// the path of the small steps, which allocate and free a block per rank. Blocks of up to
/// 4 KiB (a rank table, a small rank's local) are kept 64 deep, as a recorded graph holds
/// many at once; larger ones 16 deep, which bounds what a thread keeps.
class thread_cache {
 public:
  static constexpr int max_class = 20;
  static constexpr int small_class = 12;
  static constexpr int per_class = 64;
  static constexpr int depth(int cls) { return cls <= small_class ? per_class : 16; }

  ~thread_cache() { flush(); }

#if defined(__GNUC__)
  [[gnu::noinline]]  // one call per buffer; inlined, every rank of every step repeats it
#endif
  void* acquire(int cls) {
    if (cls <= max_class && count_[cls] > 0) return free_[cls][--count_[cls]];
    return buffer_pool::instance().acquire(cls);
  }
#if defined(__GNUC__)
  [[gnu::noinline]]
#endif
  void release(void* p, int cls) {
    if (cls <= max_class && count_[cls] < depth(cls)) {
      free_[cls][count_[cls]++] = p;
      return;
    }
    buffer_pool::instance().release(p, cls);
  }
  void flush() {
    for (int c = 0; c <= max_class; ++c)
      while (count_[c] > 0) buffer_pool::instance().release(free_[c][--count_[c]], c);
  }
  std::size_t cached_bytes() const {
    std::size_t b = 0;
    for (int c = 0; c <= max_class; ++c) b += static_cast<std::size_t>(count_[c]) << c;
    return b;
  }

  static thread_cache& instance() {
    thread_local thread_cache cache;
    return cache;
  }

 private:
  void* free_[max_class + 1][per_class]{};
  int count_[max_class + 1]{};
};

/// A standard allocator over the pool (the small blocks of the calling thread's cache): the
/// per-rank tables of a local set come and go with every operator, and the pool hands
/// them out without malloc's bookkeeping.
template <class U>
struct pool_allocator {
  using value_type = U;
  pool_allocator() = default;
  template <class V>
  pool_allocator(const pool_allocator<V>&) noexcept {}
  U* allocate(std::size_t n) {
    static_assert(alignof(U) <= buffer_pool::alignment);
    return static_cast<U*>(thread_cache::instance().acquire(buffer_pool::class_of(n * sizeof(U))));
  }
  void deallocate(U* p, std::size_t n) noexcept {
    thread_cache::instance().release(p, buffer_pool::class_of(n * sizeof(U)));
  }
  template <class V>
  friend bool operator==(const pool_allocator&, const pool_allocator<V>&) noexcept {
    return true;
  }
};

}  // namespace detail

/// Frees the blocks the pool keeps for reuse (the shared ones and the calling thread's).
inline void release_cached_memory() {
  detail::thread_cache::instance().flush();
  detail::buffer_pool::instance().release_all();
}
/// Bytes the pool keeps for reuse (the shared blocks and the calling thread's).
inline std::size_t cached_bytes() {
  return detail::buffer_pool::instance().cached_bytes() +
         detail::thread_cache::instance().cached_bytes();
}

/// An owning, uninitialised array of trivially copyable T from the pool; empty when it
/// holds no block (a zero-size local tensor needs none). Move-only; `share()` gives another
/// owner of the same block, which goes back to the pool when its last owner lets go.
template <class T>
class buffer {
  static_assert(std::is_trivially_copyable_v<T>, "spmd::sim: elements must be trivially copyable");
  using count_t = atomic_word<long>;

 public:
  buffer() = default;
  explicit buffer(index_t elems) {
    if (elems <= 0) return;
    cls_ = detail::buffer_pool::class_of(static_cast<std::size_t>(elems) * sizeof(T));
    data_ = static_cast<T*>(detail::thread_cache::instance().acquire(cls_));
  }
  buffer(buffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)),
        cls_(o.cls_),
        owners_(o.owners_.exchange(nullptr, order::relaxed)) {}
  buffer& operator=(buffer&& o) noexcept {
    if (this != &o) {
      reset();
      data_ = std::exchange(o.data_, nullptr);
      cls_ = o.cls_;
      owners_.store(o.owners_.exchange(nullptr, order::relaxed),
                    order::relaxed);
    }
    return *this;
  }
  buffer(const buffer&) = delete;
  buffer& operator=(const buffer&) = delete;
  ~buffer() { reset(); }

  /// Let go of the block, then hold a new one of `elems` (none when elems <= 0): what
  /// `*this = buffer(elems)` does, without the temporary, inlined where an operator gives
  /// each rank its output (bench/op_overhead).
  SPMD_FORCE_INLINE void renew(index_t elems) {
    reset();
    if (elems <= 0) return;
    cls_ = detail::buffer_pool::class_of(static_cast<std::size_t>(elems) * sizeof(T));
    data_ = static_cast<T*>(detail::thread_cache::instance().acquire(cls_));
  }

  /// Another owner of this block (an empty buffer when this one is empty). Safe to call
  /// from several threads on one buffer (a const dtensor read by several threads).
  buffer share() const {
    buffer b;
    if (!data_) return b;
    count_t* c = owners_.load(order::acquire);
    if (c == nullptr) {  // first share: the count starts at this owner
      count_t* fresh = new_count();
      if (owners_.compare_exchange_strong(c, fresh, order::acq_rel))
        c = fresh;
      else
        delete_count(fresh);  // another thread shared first; c is its count
    }
    c->fetch_add(1, order::relaxed);
    b.data_ = data_;
    b.cls_ = cls_;
    b.owners_.store(c, order::relaxed);
    return b;
  }
  /// True when this is the block's only owner (it may be written in place). Forced inline:
  /// every write access of an operator's output asks it.
  SPMD_FORCE_INLINE bool unique() const {
    if (!data_) return false;
    const count_t* c = owners_.load(order::acquire);
    return c == nullptr || c->load(order::acquire) == 1;
  }

  T* data() const { return data_; }
  /// Elements the block can hold.
  index_t capacity() const {
    return data_ ? static_cast<index_t>((std::size_t{1} << cls_) / sizeof(T)) : 0;
  }
  /// Bytes of the block (what it takes from the pool).
  std::size_t block_bytes() const { return data_ ? std::size_t{1} << cls_ : 0; }
  explicit operator bool() const { return data_ != nullptr; }

  void reset() {
    if (!data_) return;
    count_t* c = owners_.exchange(nullptr, order::relaxed);
    if (c == nullptr || c->fetch_sub(1, order::acq_rel) == 1) {
      detail::thread_cache::instance().release(data_, cls_);
      if (c != nullptr) delete_count(c);
    }
    data_ = nullptr;
  }

 private:
  // The owners' count, a small pool block (sharing a tensor's blocks, which every copy of a
  // dtensor does, then costs no malloc).
  static count_t* new_count() {
    return new (detail::thread_cache::instance().acquire(detail::buffer_pool::min_class)) count_t(1);
  }
  static void delete_count(count_t* c) {
    c->~count_t();
    detail::thread_cache::instance().release(c, detail::buffer_pool::min_class);
  }

  T* data_ = nullptr;
  int cls_ = 0;
  mutable atomic_word<count_t*> owners_{nullptr};  // null: one owner, never shared
};

}  // namespace spmd::host
