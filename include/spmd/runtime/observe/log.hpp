// spmd/runtime/observe/log.hpp — the decisions of a run, one line each, on stderr
// (TORCH_LOGS=+dtensor's job):
//
//   SPMD_LOG=redistribute,ops ./train        (or all; steps adds each plan step as it runs)
//   SPMD_LOG_RANKS=0 mpirun -np 8 ./train    only rank 0's lines
//
//   spmd::log::enable("redistribute");      the same from C++ (disable() turns it off)
//   spmd::log::capture c;                   while c lives, this thread's lines go to
//   ... c.lines() ...                       c.lines() instead of stderr (tests)
//
// A line starts with "[spmd]" in a process that holds every rank (the simulation, CUDA) and
// with "[spmd rank R]" in one that holds one (MPI, NCCL). The lines (docs/observability.md):
//   [spmd] op matmul: in0 f32[8, 16] R on mesh(4) -> S(1) (redistribute), in1 f32[16, 4] S(0) on mesh(4) (kept) => out f32 P(sum), compile time
//   [spmd] redistribute f32[8, 16] S(0) on mesh(4) -> R: plan S(0)->R, 1 step (all_gather over mesh dims 0, 384 B/rank), 384 B/rank, compile time
//   [spmd]   step 1/1 all_gather over mesh dims 0, 384 B/rank: S(0)->R
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/runtime/observe/switch.hpp"
#include "spmd/host/text_out.hpp"

namespace spmd::log {

class capture;

namespace detail {
inline capture*& capture_top() {
  thread_local capture* top = nullptr;
  return top;
}
/// SPMD_LOG_RANKS: the ranks whose lines are printed (comma-separated; unset: every rank).
inline const std::vector<index_t>& ranks_shown() {
  static const std::vector<index_t> ranks = [] {
    std::vector<index_t> r;
    if (const char* v = std::getenv("SPMD_LOG_RANKS")) {
      std::string_view s = v;
      while (!s.empty()) {
        const std::size_t comma = s.find(',');
        const std::string part(s.substr(0, comma));
        char* end = nullptr;
        const long long x = std::strtoll(part.c_str(), &end, 10);
        if (!part.empty() && end && *end == '\0' && x >= 0) r.push_back(static_cast<index_t>(x));
        else std::fprintf(stderr, "spmd: SPMD_LOG_RANKS: '%s' is not a rank; it is left out\n", part.c_str());
        s = comma == std::string_view::npos ? std::string_view{} : s.substr(comma + 1);
      }
    }
    return r;
  }();
  return ranks;
}
inline void write(const std::string& line);
}  // namespace detail

/// Turns logging of `what` on ("redistribute", "ops", "steps", "all", comma-separated).
/// Throws std::invalid_argument naming a word it does not know.
inline void enable(std::string_view what = "all") {
  std::string unknown;
  const unsigned bits = observe::detail::parse_log(what, &unknown);
  if (!unknown.empty())
    throw std::invalid_argument("spmd::log::enable: unknown " + unknown + " (known: redistribute, ops, steps, all)");
  observe::turn_on(bits);
}
/// Turns all logging off (timelines stay as they are).
inline void disable() { observe::turn_off(observe::log_all); }

/// While alive, the calling thread's log lines are kept here instead of going to stderr.
class capture {
 public:
  capture() : prev_(detail::capture_top()) { detail::capture_top() = this; }
  ~capture() { detail::capture_top() = prev_; }
  capture(const capture&) = delete;
  capture& operator=(const capture&) = delete;
  const std::vector<std::string>& lines() const { return lines_; }
  void clear() { lines_.clear(); }

 private:
  friend void detail::write(const std::string&);
  capture* prev_;
  std::vector<std::string> lines_;
};

namespace detail {
inline void write(const std::string& line) {
  if (capture* c = capture_top()) {
    c->lines_.push_back(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}
}  // namespace detail

/// One line from a process holding ranks [lo, lo + count): prefixed with the rank when it
/// holds one, dropped when SPMD_LOG_RANKS leaves that rank out.
[[gnu::cold, gnu::noinline]] inline void line(index_t lo, index_t count, const std::string& text) {
  const auto& shown = detail::ranks_shown();
  if (count == 1 && !shown.empty()) {
    bool keep = false;
    for (index_t r : shown) keep = keep || r == lo;
    if (!keep) return;
  }
  host::text_out t;
  if (count == 1) t << "[spmd rank " << lo << "] ";
  else t << "[spmd] ";
  detail::write((t << text).str());
}

}  // namespace spmd::log
