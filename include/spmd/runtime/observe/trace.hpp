// spmd/runtime/observe/trace.hpp — timelines of a run in the Chrome trace-event format
// (Perfetto, chrome://tracing open it): every operator, redistribute and plan step with its
// start and end, one lane per rank.
//
//   SPMD_TRACE=step.json ./train             the whole run, written when the program ends
//   { spmd::timeline::session s("step.json"); ... }   a scope, written when s ends
//
// Events are complete events ("ph": "X", times in µs from the start of the trace) with
// "pid" 0 and "tid" the rank; their "args" carry what the log line says (layouts, the plan,
// the step's kind, mesh dims and bytes per rank). The simulation runs every rank's part of
// a step together, so its ranks' lanes show the same spans. Under MPI each process records
// its own rank and rank 0 writes one file: the clocks start together at a barrier (the
// backend registers that barrier and the gather: hooks below).
//
// The file is written as every text spmd writes (host/output_file.hpp): a regular file is
// replaced whole, /dev/stdout, a FIFO or a character device written through; a directory or a
// socket is refused. A trace that cannot be written is not silent: SPMD_TRACE's failure prints
// why and ends the program with exit code 2 after its own output (stdout flushed); a session
// names its file's problem when it is opened, and close() throws host::file_error.
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/host/output_file.hpp"
#include "spmd/host/sync.hpp"  // not <mutex>, <chrono>, <fstream>: compile time (sync.hpp says why)
#include "spmd/runtime/observe/switch.hpp"
#include "spmd/host/text_out.hpp"

namespace spmd::timeline {

/// A JSON string literal of s (quotes and escapes).
[[gnu::cold]] inline std::string quoted(std::string_view s) {
  host::text_out t;
  t << '"';
  for (char c : s) {
    if (c == '"' || c == '\\') t << '\\' << c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      t << b;
    } else t << c;
  }
  return std::move(t << '"').str();
}

namespace detail {

/// What a multi-process backend supplies (mpi::environment registers them): a barrier over
/// every process, and the gather of each process's events to the first, which writes.
struct hooks_t {
  void (*barrier)() = nullptr;
  /// Replaces `events` (this process's, comma-joined) with every process's on the writer;
  /// returns whether this process writes.
  bool (*gather)(std::string& events) = nullptr;
};
inline hooks_t& hooks() {
  static hooks_t h;
  return h;
}

struct recorder;
[[gnu::cold]] inline bool write(recorder& r, std::string* error = nullptr);

/// What is recorded. Made when first used; SPMD_TRACE=FILE (read then) names the file that
/// its destructor writes at exit, or, under MPI, that finish() writes while the processes can
/// still talk (mpi::environment calls it). Made lazily, not by a static object, so that a
/// unit including spmd gets no code that runs before main (switch.hpp says why).
struct recorder {
  host::mutex m;
  std::string events;          // comma-joined JSON objects
  std::vector<index_t> ranks;  // lanes seen (sorted, once each), named in the metadata
  double epoch = host::monotonic_us();
  std::string file;            // where stop() writes
  bool from_environment = false;
  bool written = false;
  bool failed = false;         // SPMD_TRACE's file could not be written: the exit code is 2

  recorder() {
    if (const char* f = std::getenv("SPMD_TRACE"); f && *f) {
      file = f;
      from_environment = true;
    }
  }
  ~recorder() {
    if (from_environment) write(*this);
    if (failed) {  // at exit: the program's own output first, then the failure's exit code
      std::fflush(nullptr);
      std::_Exit(2);
    }
  }
  recorder(const recorder&) = delete;
  recorder& operator=(const recorder&) = delete;
};
inline recorder& rec() {
  static recorder r;
  return r;
}

/// One event per rank of [lo, lo + count); begin and end are host::monotonic_us() readings.
[[gnu::cold, gnu::noinline]] inline void add(const char* cat, const std::string& name, index_t lo, index_t count,
                                            double begin, double end, const std::string& args) {
  recorder& r = rec();
  char times[96];
  std::snprintf(times, sizeof times, "\"ts\":%.3f,\"dur\":%.3f", begin - r.epoch, end - begin);
  host::text_out head;
  head << "{\"name\":" << timeline::quoted(name) << ",\"cat\":\"" << cat << "\",\"ph\":\"X\"," << times << ",\"pid\":0,\"tid\":";
  host::lock g(r.m);
  for (index_t k = 0; k < count; ++k) {
    host::text_out e;
    if (!r.events.empty()) e << ",\n";
    e << head.str() << lo + k << ",\"args\":{" << args << "}}";
    r.events += e.str();
    const auto at = std::lower_bound(r.ranks.begin(), r.ranks.end(), lo + k);
    if (at == r.ranks.end() || *at != lo + k) r.ranks.insert(at, lo + k);
  }
}

/// Writes r's file (rank 0 under MPI, after gathering every rank's events) and clears.
/// Returns false, having said why on stderr (and marked SPMD_TRACE's run failed), when the
/// file cannot be written; `error`, if given, gets the reason instead.
[[gnu::cold]] inline bool write(recorder& r, std::string* error) {
  std::string events;
  host::text_out meta;
  std::string file;
  {
    host::lock g(r.m);
    if (r.written || r.file.empty()) return true;
    r.written = true;
    events.swap(r.events);
    for (index_t k : r.ranks)
      meta << ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":0,\"tid\":" << k << ",\"args\":{\"name\":\"rank "
           << k << "\"}}";
    r.ranks.clear();
    file = r.file;
  }
  std::string all = std::move(events);
  all += meta.str();
  if (!all.empty() && all[0] == ',') all.erase(0, 2);
  if (hooks().gather && !hooks().gather(all)) return true;
  host::text_out text;
  text << "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n"
          "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"args\":{\"name\":\"spmd\"}}"
       << (all.empty() ? "" : ",\n") << all << "\n]}\n";
  try {
    host::write_text(file, text.str());
    return true;
  } catch (const host::file_error& e) {
    if (error) {
      *error = e.what();
      return false;
    }
    std::fprintf(stderr, "spmd: SPMD_TRACE: the trace was not written: %s\n", e.what());
    host::lock g(r.m);
    r.failed = r.failed || r.from_environment;
    return false;
  }
}

inline bool write(std::string* error = nullptr) { return write(rec(), error); }

}  // namespace detail

/// Starts the clock of a trace together on every process (the backend's barrier, if any).
inline void align_clocks() {
  if (detail::hooks().barrier) detail::hooks().barrier();
  detail::rec().epoch = host::monotonic_us();
}

/// Ends the trace of the environment (SPMD_TRACE) now: writes the file. A multi-process
/// backend calls it while its processes can still talk. Returns false when the file could
/// not be written (said on stderr; the program then ends with exit code 2).
inline bool finish() {
  if (detail::rec().from_environment) return detail::write();
  return true;
}

/// Records a scope to `file`, written when the session ends (rank 0 writes under MPI; every
/// process must open and close its session at the same point). A file that cannot be written
/// there (a missing folder, a directory, a socket) is refused when the session opens
/// (host::file_error naming it); close() writes and throws host::file_error if the write
/// fails; the destructor writes if close() was not called, and says on stderr if it failed.
class session {
 public:
  explicit session(std::string file) {
    if (file.empty()) throw std::invalid_argument("spmd::timeline::session: the file name is empty");
    (void)host::resolve_output(file, host::write_use::stream);  // before anything is recorded
    detail::recorder& r = detail::rec();
    {
      host::lock g(r.m);
      r.events.clear();
      r.ranks.clear();
      r.file = std::move(file);
      r.written = false;
      r.from_environment = false;
    }
    align_clocks();
    observe::turn_on(observe::trace);
  }
  ~session() {
    if (open_) {
      observe::turn_off(observe::trace);
      detail::write();
    }
  }
  /// Ends the session and writes its file; throws host::file_error naming it on failure.
  void close() {
    if (!open_) return;
    open_ = false;
    observe::turn_off(observe::trace);
    std::string error;
    if (!detail::write(&error)) throw host::file_error(error);
  }
  session(const session&) = delete;
  session& operator=(const session&) = delete;

 private:
  bool open_ = true;
};

/// One span: from construction to destruction, on the lanes of ranks [lo, lo + count).
/// Costs nothing but the check when no trace records.
class span {
 public:
  span() = default;
  span(const char* cat, std::string name, index_t lo, index_t count, std::string args)
      : cat_(cat), name_(std::move(name)), args_(std::move(args)), lo_(lo), count_(count),
        begin_((detail::rec(), host::monotonic_us())) {}  // the recorder (its epoch) first
  ~span() {
    if (cat_) detail::add(cat_, name_, lo_, count_, begin_, host::monotonic_us(), args_);
  }
  span(const span&) = delete;
  span& operator=(const span&) = delete;

 private:
  const char* cat_ = nullptr;
  std::string name_, args_;
  index_t lo_ = 0, count_ = 0;
  double begin_ = 0;  // host::monotonic_us()
};

}  // namespace spmd::timeline
