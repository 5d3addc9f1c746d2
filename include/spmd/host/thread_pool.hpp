// spmd/host/thread_pool.hpp — the simulation's worker threads.
//
//   spmd::sim::set_threads(4);        // 1: everything on the calling thread
//   spmd::sim::threads();             // the setting (default: the machine's cores, or
//                                     // SPMD_SIM_THREADS from the environment)
//   spmd::host::threads_free();       // a parallel_for here would use them
//
// The redistribute kernels and the per-rank operator loops hand their work to
// `parallel_for(n, f)`: f(0) .. f(n - 1), each task on one thread, the caller working too.
// Work is split by what it computes, never by how: every element is computed by the same
// code with the same operands in the same order whatever the thread count, so results are
// identical bit for bit for any setting (tests/sim/threads.cpp checks 1, 2 and 3).
//
// One job at a time: a call made while the workers are busy (another user thread, or a task
// that itself calls parallel_for) runs its tasks on its own thread instead of waiting, so
// nested and concurrent calls cannot deadlock. The first exception a task throws is
// rethrown by parallel_for once every task has ended.
#pragma once

#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>

#include "spmd/core/atomic.hpp"
#include "spmd/core/config.hpp"
#include "spmd/host/sync.hpp"  // POSIX threads: <thread> and <mutex> cost 0.34 s per unit

namespace spmd::host {

namespace detail {

class thread_pool {
 public:
  static thread_pool& instance() {
    static thread_pool* pool = new thread_pool;  // never destroyed: workers may outlive main
    return *pool;
  }

  int threads() const { return threads_.load(order::relaxed); }

  /// True on a thread running one of parallel_for's tasks (a parallel_for there runs serially).
  static bool in_task() { return inside_task(); }

  void set_threads(int n) {
    lock job(job_mutex_);  // not while a job runs
    threads_.store(n, order::relaxed);
    lock l(mutex_);
    while (workers_ < n - 1) start_worker();
  }

  template <class F>
  void run(index_t n, F& f) {
    if (n <= 1 || threads() <= 1 || inside_task()) return serial(n, f);
    run_erased(n, &f, [](void* fp, index_t i) { (*static_cast<F*>(fp))(i); });
  }

 private:
  /// The threaded part of run, compiled once: each task type adds only its one-line caller
  /// (it was compiled per task type, with its lock and waits: 2,800 functions of the
  /// typed suite's MPI unit at -O0).
  void run_erased(index_t n, void* f, void (*call)(void*, index_t)) {
    lock job(job_mutex_, lock::try_t{});
    if (!job.owns()) {  // busy: this caller works alone
      for (index_t i = 0; i < n; ++i) call(f, i);
      return;
    }
    const int t = threads();
    {
      lock l(mutex_);
      finished_.wait(l, [&] { return busy_ == 0; });  // the last job's late workers left
      call_ = call;
      fn_ = f;
      n_ = n;
      next_.store(0, order::relaxed);
      done_.store(0, order::relaxed);
      error_ = nullptr;
      active_ = t - 1;  // workers 0 .. t-2 join this job
      ++generation_;
    }
    wake_.notify_all();
    drain();
    {
      lock l(mutex_);
      finished_.wait(l, [&] { return done_.load(order::acquire) == n_ && busy_ == 0; });
    }
    fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

  thread_pool() {
    int n = hardware_threads();
    if (const char* env = std::getenv("SPMD_SIM_THREADS")) {
      char* end = nullptr;
      const long v = std::strtol(env, &end, 10);
      if (end == env || *end != '\0' || v < 1 || v > 1024)
        throw std::invalid_argument(std::string("spmd::sim: SPMD_SIM_THREADS=") + env +
                                    " is not a thread count from 1 to 1024");
      n = static_cast<int>(v);
    }
    threads_.store(n < 1 ? 1 : n, order::relaxed);
    while (workers_ < threads() - 1) start_worker();
  }

  /// A worker with the next id; it lives as long as the process (the pool is never
  /// destroyed).
  void start_worker() {
    start_detached([this, id = workers_] { work(id); });
    ++workers_;
  }

  static bool& inside_task() {
    thread_local bool inside = false;
    return inside;
  }

  template <class F>
  static void serial(index_t n, F& f) {
    for (index_t i = 0; i < n; ++i) f(i);
  }

  /// Take tasks until none is left.
  void drain() {
    const bool was = inside_task();
    inside_task() = true;
    for (;;) {
      const index_t i = next_.fetch_add(1, order::relaxed);
      if (i >= n_) break;
      try {
        call_(fn_, i);
      } catch (...) {
        lock l(mutex_);
        if (!error_) error_ = std::current_exception();
      }
      if (done_.fetch_add(1, order::acq_rel) + 1 == n_) {
        lock l(mutex_);
        finished_.notify_all();
      }
    }
    inside_task() = was;
  }

  void work(int id) {
    unsigned long seen = 0;
    for (;;) {
      {
        lock l(mutex_);
        wake_.wait(l, [&] { return generation_ != seen; });
        seen = generation_;
        if (id >= active_) continue;  // fewer threads wanted for this job
        ++busy_;
      }
      drain();
      {
        lock l(mutex_);
        --busy_;
        finished_.notify_all();
      }
    }
  }

  atomic_word<int> threads_{1};
  mutex job_mutex_;  // one job at a time
  mutex mutex_;      // the fields below
  condition wake_, finished_;
  int workers_ = 0;  // started so far (ids 0 .. workers_ - 1)
  unsigned long generation_ = 0;
  int active_ = 0;
  int busy_ = 0;
  void (*call_)(void*, index_t) = nullptr;
  void* fn_ = nullptr;
  index_t n_ = 0;
  atomic_word<index_t> next_{0}, done_{0};
  std::exception_ptr error_;
};

}  // namespace detail

/// f(0), ..., f(n - 1) on the simulation's threads (the caller's among them); returns when
/// all have run. Tasks must not depend on one another's order.
template <class F>
void parallel_for(index_t n, F&& f) {
  detail::thread_pool::instance().run(n, f);
}

/// The number of threads the simulation uses (the caller's included).
inline int threads() { return detail::thread_pool::instance().threads(); }

/// True when a parallel_for called here would use the threads: more than one, and this
/// thread not already running a task (a kernel that can spread itself asks before splitting).
inline bool threads_free() { return threads() > 1 && !detail::thread_pool::in_task(); }

/// Use n threads (n >= 1; 1: everything on the calling thread). Throws
/// std::invalid_argument naming n otherwise.
inline void set_threads(int n) {
  if (n < 1 || n > 1024)
    throw std::invalid_argument("spmd::sim::set_threads: " + std::to_string(n) +
                                " is not a thread count from 1 to 1024");
  detail::thread_pool::instance().set_threads(n);
}

}  // namespace spmd::host
