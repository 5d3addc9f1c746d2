// spmd/runtime/observe/switch.hpp — whether a run is being watched: logging (SPMD_LOG,
// log.hpp) and timelines (SPMD_TRACE, trace.hpp).
//
// Every redistribute, operator and plan step asks `observe::active()` once: one load of a
// word and one branch that is always taken the same way when nothing watches, so an
// unwatched program pays that and nothing else (bench/op_overhead counts the instructions).
// The word is set from the environment before main runs (SPMD_LOG, SPMD_TRACE) and by the
// API (spmd::log::enable, spmd::timeline::session).
#pragma once

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace spmd::observe {

/// What is watched: bits of the switch word.
enum what : unsigned {
  log_redistribute = 1u << 0,  // SPMD_LOG=redistribute: every redistribute and its plan
  log_ops = 1u << 1,           // SPMD_LOG=ops: every operator's sharding decision
  log_steps = 1u << 2,         // SPMD_LOG=steps: every plan step as it runs
  trace = 1u << 3,             // SPMD_TRACE=FILE: timelines
};
inline constexpr unsigned log_all = log_redistribute | log_ops | log_steps;

namespace detail {

/// The SPMD_LOG value's bits: a comma-separated list of redistribute, ops, steps or all
/// (unknown names are reported once on stderr, not ignored silently).
inline unsigned parse_log(std::string_view v, std::string* unknown = nullptr) {
  unsigned bits = 0;
  while (!v.empty()) {
    const std::size_t comma = v.find(',');
    std::string_view name = v.substr(0, comma);
    while (!name.empty() && (name.front() == ' ' || name.front() == '+')) name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name == "redistribute") bits |= log_redistribute;
    else if (name == "ops") bits |= log_ops;
    else if (name == "steps") bits |= log_steps;
    else if (name == "all" || name == "dtensor") bits |= log_all;
    else if (!name.empty() && unknown) *unknown += (unknown->empty() ? "" : ", ") + std::string(name);
    v = comma == std::string_view::npos ? std::string_view{} : v.substr(comma + 1);
  }
  return bits;
}

inline unsigned from_environment() {
  unsigned bits = 0;
  if (const char* v = std::getenv("SPMD_LOG")) {
    std::string unknown;
    bits |= parse_log(v, &unknown);
    if (!unknown.empty())
      std::fprintf(stderr, "spmd: SPMD_LOG: unknown %s (known: redistribute, ops, steps, all)\n",
                   unknown.c_str());
  }
  if (const char* v = std::getenv("SPMD_TRACE"); v && *v) bits |= trace;
  return bits;
}

/// The switch word. Initialised from the environment during static initialisation (a
/// redistribute run by another static initialiser before this one sees 0: not watched).
inline std::atomic<unsigned> word{from_environment()};

}  // namespace detail

/// The one branch every call pays.
inline bool active() { return detail::word.load(std::memory_order_relaxed) != 0; }
inline bool watching(unsigned bits) { return (detail::word.load(std::memory_order_relaxed) & bits) != 0; }
inline void turn_on(unsigned bits) { detail::word.fetch_or(bits, std::memory_order_relaxed); }
inline void turn_off(unsigned bits) { detail::word.fetch_and(~bits, std::memory_order_relaxed); }

}  // namespace spmd::observe
