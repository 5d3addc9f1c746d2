// spmd/host/sync.hpp — the few threading primitives the host layer uses (the simulation's
// worker pool, the buffer pool, the trace recorder), on POSIX threads.
//
//   spmd::host::mutex m;            { spmd::host::lock l(m); ... }
//   spmd::host::condition c;        c.wait(l, [&] { return ready; }); c.notify_all();
//   spmd::host::start_detached([=] { ... });
//   spmd::host::hardware_threads(); spmd::host::monotonic_us();
//
// Why not <thread>, <mutex>, <condition_variable> and <chrono>: with g++ 12 in C++20 they
// cost 0.34 s of every translation unit that includes a backend (<thread> brings
// <stop_token>, <semaphore> and the atomic waits; <mutex> the timed mutexes and <chrono>),
// more than a third of what the standard headers the simulation needs cost together
// (bench/RESULTS.md, "Compile time"). <pthread.h> and <time.h> are C headers: a few ms.
// Linux and macOS have them; a platform without POSIX threads fails here with a sentence.
#pragma once

#if !__has_include(<pthread.h>)
#error "spmd: the host layer needs POSIX threads (<pthread.h>) for the simulation's workers."
#endif

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace spmd::host {

/// A non-recursive mutex (std::mutex's contract: lock, try_lock, unlock).
class mutex {
 public:
  mutex() = default;
  ~mutex() { pthread_mutex_destroy(&m_); }
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;

  void lock() { pthread_mutex_lock(&m_); }
  bool try_lock() { return pthread_mutex_trylock(&m_) == 0; }
  void unlock() { pthread_mutex_unlock(&m_); }
  pthread_mutex_t* native() { return &m_; }

 private:
  pthread_mutex_t m_ = PTHREAD_MUTEX_INITIALIZER;
};

/// Holds a mutex for a scope (std::unique_lock's part that is used: may start unlocked by
/// try_lock, and a condition waits on it).
class lock {
 public:
  explicit lock(mutex& m) : m_(m), owns_(true) { m_.lock(); }
  struct try_t {};
  lock(mutex& m, try_t) : m_(m), owns_(m.try_lock()) {}
  ~lock() {
    if (owns_) m_.unlock();
  }
  lock(const lock&) = delete;
  lock& operator=(const lock&) = delete;

  bool owns() const { return owns_; }
  mutex& held() { return m_; }

 private:
  mutex& m_;
  bool owns_;
};

/// A condition variable waited on under a `lock`.
class condition {
 public:
  condition() = default;
  ~condition() { pthread_cond_destroy(&c_); }
  condition(const condition&) = delete;
  condition& operator=(const condition&) = delete;

  /// Waits until pred() holds (spurious wake-ups re-check it).
  template <class Pred>
  void wait(lock& l, Pred pred) {
    while (!pred()) pthread_cond_wait(&c_, l.held().native());
  }
  void notify_all() { pthread_cond_broadcast(&c_); }

 private:
  pthread_cond_t c_ = PTHREAD_COND_INITIALIZER;
};

/// Runs f() on a new thread that is never joined. Throws std::runtime_error when the
/// system refuses a thread.
template <class F>
void start_detached(F f) {
  struct box {
    F f;
    static void* run(void* p) {
      box* b = static_cast<box*>(p);
      F fn = std::move(b->f);
      delete b;
      fn();
      return nullptr;
    }
  };
  box* b = new box{std::move(f)};
  pthread_t t;
  if (const int e = pthread_create(&t, nullptr, &box::run, b); e != 0) {
    delete b;
    throw std::runtime_error(std::string("spmd: cannot start a thread: ") + std::strerror(e));
  }
  pthread_detach(t);
}

/// The processors online (std::thread::hardware_concurrency's answer on Linux), at least 1.
inline int hardware_threads() {
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n < 1 ? 1 : static_cast<int>(n);
}

/// Microseconds of a monotonic clock (steady_clock's, CLOCK_MONOTONIC) from an arbitrary start.
inline double monotonic_us() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) * 1e6 + static_cast<double>(t.tv_nsec) * 1e-3;
}

}  // namespace spmd::host
