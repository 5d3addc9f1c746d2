// spmd/backends/mpi/environment.hpp — MPI's lifetime, the communicator meshes name, and
// what happens when one rank fails.
//
//   int main(int argc, char** argv) {
//     spmd::mpi::environment env(argc, argv);   // MPI_Init_thread ... MPI_Finalize
//     auto x = spmd::mpi::distribute_tensor<L>(global);
//   }
//
// A mesh's rank list names ranks of the communicator in use: MPI_COMM_WORLD, or the one a
// `communicator_scope` installs for the calling thread. A process whose rank the mesh does
// not name holds an empty local, as in DTensor.
//
// Failure on one rank never leaves the others waiting in a collective: the environment
// installs a terminate handler that prints "spmd::mpi: rank R of N failed: <what>" and calls
// MPI_Abort, so an exception nobody catches (a bad local shape in from_local, an exception
// in a kernel, an MPI error, which spmd turns into spmd::mpi::error) ends the whole job.
// mpirun then reports the exit code (2 for bad input, spmd's convention; 1 otherwise).
//
// A failure on *every* rank (bad input every process read the same way: a mesh larger than
// the job, a checkpoint of another optimizer) is one line, not N copies and mpirun's abort
// banner: a failing process waits up to failure_wait_s for the others on a communicator of
// its own (processes still working never touch it); when every process has failed, the first
// prints its message once and all end with the exit code through MPI_Finalize. When some keep
// working past the wait, the job is aborted as above (end_job).
#pragma once

#include "spmd/backends/mpi/mpi_c.hpp"

#include <time.h>

#include <cstdio>
#include <exception>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/runtime/observe/switch.hpp"
#include "spmd/runtime/observe/trace.hpp"

namespace spmd::mpi {

/// An MPI call failed (its error string, and which call).
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

inline void check(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  throw error(std::string("spmd::mpi: ") + call + " failed: " + std::string(text, len));
}

inline MPI_Comm& current_comm() {
  thread_local MPI_Comm comm = MPI_COMM_WORLD;
  return comm;
}

inline int world_rank() {
  int r = -1, init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (init && !fin) MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

/// How long a failed process waits for the others to fail too before aborting the job.
inline constexpr double failure_wait_s = 5.0;

/// The communicator failures meet on (a duplicate of MPI_COMM_WORLD that the environment
/// makes; MPI_COMM_NULL before).
inline MPI_Comm& failure_comm() {
  static MPI_Comm comm = MPI_COMM_NULL;
  return comm;
}

/// After a failure on this process: true when every process of MPI_COMM_WORLD has failed
/// within `wait_s` seconds (each calls this), false when some did not (they are still
/// working, or waiting on this one).
inline bool all_failed(double wait_s) {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin || failure_comm() == MPI_COMM_NULL) return false;
  MPI_Request req = MPI_REQUEST_NULL;
  if (MPI_Ibarrier(failure_comm(), &req) != MPI_SUCCESS) return false;
  const double until = MPI_Wtime() + wait_s;
  for (;;) {
    int done = 0;
    if (MPI_Test(&req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS) return false;
    if (done) return true;
    if (MPI_Wtime() > until) return false;
    struct timespec ms {0, 1000000};
    nanosleep(&ms, nullptr);
  }
}

/// Ends the whole job with a message naming this rank and the error.
[[noreturn]] inline void abort_job(const char* what, int code) {
  int size = 0, init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  const int rank = world_rank();
  if (init && !fin) MPI_Comm_size(MPI_COMM_WORLD, &size);
  std::fprintf(stderr, "spmd::mpi: rank %d of %d failed: %s\n", rank, size, what);
  std::fflush(stderr);
  if (init && !fin) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace detail

/// Ends this process's part of a job after a failure (`what`, exit code `code`): when every
/// process fails within failure_wait_s, the first prints `prefix` + `what` once and each
/// ends with `code` (MPI_Finalize: a clean exit, no abort banner); otherwise the job is
/// aborted with this rank's message (detail::abort_job), so no process is left waiting.
[[noreturn]] inline void end_job(const char* prefix, const char* what, int code) {
  if (detail::all_failed(detail::failure_wait_s)) {
    if (detail::world_rank() == 0) std::fprintf(stderr, "%s%s\n", prefix, what);
    std::fflush(nullptr);
    MPI_Finalize();
    std::_Exit(code);
  }
  detail::abort_job(what, code);
}

namespace detail {

inline void on_terminate() {
  constexpr const char* prefix = "spmd::mpi: every process failed: ";
  // "spmd::mpi: every process failed: the mesh ...", not "...failed: spmd::mpi: the mesh ...".
  const auto end = [&](const char* what, int code) {
    constexpr std::string_view ours = "spmd::mpi: ";
    end_job(prefix, std::string_view(what).starts_with(ours) ? what + ours.size() : what, code);
  };
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::invalid_argument& x) {  // bad input: spmd's exit code 2
      end(x.what(), 2);
    } catch (const std::out_of_range& x) {
      end(x.what(), 2);
    } catch (const std::exception& x) {
      end(x.what(), 1);
    } catch (...) {
      end_job(prefix, "an exception that is not a std::exception", 1);
    }
  }
  end_job(prefix, "std::terminate was called", 1);
}

inline void trace_barrier() { MPI_Barrier(MPI_COMM_WORLD); }

/// Every process's trace events to rank 0 of MPI_COMM_WORLD, comma-joined; true on rank 0.
inline bool trace_gather(std::string& events) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int n = static_cast<int>(events.size());
  std::vector<int> sizes(static_cast<std::size_t>(size)), at(static_cast<std::size_t>(size));
  MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  std::string all;
  if (rank == 0) {
    long long total = 0;
    for (int r = 0; r < size; ++r) at[static_cast<std::size_t>(r)] = static_cast<int>(total), total += sizes[static_cast<std::size_t>(r)];
    all.resize(static_cast<std::size_t>(total));
  }
  MPI_Gatherv(events.data(), n, MPI_CHAR, all.data(), sizes.data(), at.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank != 0) return false;
  events.clear();
  for (int r = 0; r < size; ++r) {
    const auto k = static_cast<std::size_t>(r);
    if (sizes[k] == 0) continue;
    if (!events.empty()) events += ",\n";
    events.append(all, static_cast<std::size_t>(at[k]), static_cast<std::size_t>(sizes[k]));
  }
  return true;
}

}  // namespace detail

/// Initialises MPI (thread level MPI_THREAD_FUNNELED: spmd calls MPI from the thread that
/// runs the plans) unless it already is, and finalises it if it did. Installs the
/// terminate handler above and makes MPI errors on MPI_COMM_WORLD return codes, which
/// spmd turns into exceptions.
class environment {
 public:
  environment(int& argc, char**& argv) {
    int init = 0;
    MPI_Initialized(&init);
    if (!init) {
      int provided = 0;
      detail::check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided),
                    "MPI_Init_thread");
      owns_ = true;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    if (detail::failure_comm() == MPI_COMM_NULL) MPI_Comm_dup(MPI_COMM_WORLD, &detail::failure_comm());
    std::set_terminate(detail::on_terminate);
    // Timelines (SPMD_TRACE, timeline::session): one file, written by rank 0, the clocks of
    // every process started together after a barrier.
    timeline::detail::hooks() = {&detail::trace_barrier, &detail::trace_gather};
    if (observe::watching(observe::trace)) timeline::align_clocks();
  }
  environment() : environment(no_argc(), no_argv()) {}
  environment(const environment&) = delete;
  environment& operator=(const environment&) = delete;
  ~environment() {
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) timeline::finish();  // SPMD_TRACE's file, while the processes can still talk
    timeline::detail::hooks() = {};
    if (!fin && detail::failure_comm() != MPI_COMM_NULL) MPI_Comm_free(&detail::failure_comm());
    if (owns_ && !fin) MPI_Finalize();
  }

  /// This process's rank and the size of the communicator in use.
  static int rank() {
    int r = 0;
    MPI_Comm_rank(detail::current_comm(), &r);
    return r;
  }
  static int size() {
    int s = 0;
    MPI_Comm_size(detail::current_comm(), &s);
    return s;
  }

 private:
  static int& no_argc() {
    static int c = 0;
    return c;
  }
  static char**& no_argv() {
    static char** v = nullptr;
    return v;
  }
  bool owns_ = false;
};

/// While alive, meshes on this thread name ranks of `comm` instead of MPI_COMM_WORLD.
class communicator_scope {
 public:
  explicit communicator_scope(MPI_Comm comm) : prev_(detail::current_comm()) {
    if (comm == MPI_COMM_NULL)
      throw std::invalid_argument("spmd::mpi::communicator_scope: MPI_COMM_NULL");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    detail::current_comm() = comm;
  }
  communicator_scope(const communicator_scope&) = delete;
  communicator_scope& operator=(const communicator_scope&) = delete;
  ~communicator_scope() { detail::current_comm() = prev_; }

 private:
  MPI_Comm prev_;
};

/// The communicator meshes name ranks of, on this thread.
inline MPI_Comm communicator() { return detail::current_comm(); }

}  // namespace spmd::mpi
