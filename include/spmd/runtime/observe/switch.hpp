// spmd/runtime/observe/switch.hpp — whether a run is being watched: logging (SPMD_LOG,
// log.hpp) and timelines (SPMD_TRACE, trace.hpp).
//
// Every redistribute, operator and plan step asks `observe::active()` once: one load of a
// word and one branch that is always taken the same way when nothing watches, so an
// unwatched program pays that and nothing else (bench/op_overhead counts the instructions).
// The word is set from the environment when it is first asked (SPMD_LOG, SPMD_TRACE) and by
// the API (spmd::log::enable, spmd::timeline::session). Nothing runs before main: a unit
// that includes spmd but runs no operator gets no code from here (bench/RESULTS.md,
// "Compile time").
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "spmd/core/atomic.hpp"

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

/// Not a watched thing: the word's state before the environment is read.
inline constexpr unsigned unread = 1u << 31;

/// The switch word. It starts as `unread` (a constant, so no code runs before main in
/// a unit that includes this, and a static initialiser's redistribute reads the
/// environment too); the first question reads SPMD_LOG and SPMD_TRACE (read_environment).
inline atomic_word<unsigned> word{unread};

/// Replaces `unread` with the environment's bits, once; returns the word. Out of line and
/// cold: the one-load-one-branch path of active() never reaches it after the first call.
[[gnu::cold, gnu::noinline]] inline unsigned read_environment() {
  static const unsigned bits = from_environment();  // once, whichever thread asks first
  unsigned expected = unread;
  word.compare_exchange_strong(expected, bits, order::relaxed);  // fails: already settled
  return word.load(order::relaxed);
}

/// The word with the environment read.
inline unsigned settled() {
  const unsigned w = word.load(order::relaxed);
  return (w & unread) ? read_environment() : w;
}

}  // namespace detail

/// The one branch every call pays: the word is 0 when nothing watches, and stays 0.
inline bool active() {
  const unsigned w = detail::word.load(order::relaxed);
  if (w == 0) [[likely]] return false;
  return (w & detail::unread) ? detail::read_environment() != 0 : true;
}
inline bool watching(unsigned bits) { return (detail::settled() & bits) != 0; }
inline void turn_on(unsigned bits) {
  detail::settled();
  detail::word.fetch_or(bits, order::relaxed);
}
inline void turn_off(unsigned bits) {
  detail::settled();
  detail::word.fetch_and(~bits, order::relaxed);
}

}  // namespace spmd::observe
