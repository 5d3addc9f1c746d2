// bench/resident.hpp — the process's resident memory, read from /proc, for the benchmarks that
// measure what a step holds: now (VmRSS) and the most since a reset (VmHWM, reset by writing 5
// to /proc/self/clear_refs). Large buffers are mapped (host/buffer.hpp), so releasing the
// pool's cache first gives their pages back and the resident bytes are what is held.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "spmd/host/buffer.hpp"

namespace bench {

/// A field of /proc/self/status in bytes ("VmRSS", "VmHWM"); -1 where it cannot be read.
inline long long status_bytes(const char* field) {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return -1;
  char line[256];
  long long kb = -1;
  const std::size_t n = std::strlen(field);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, field, n) == 0 && line[n] == ':') kb = std::atoll(line + n + 1);
  std::fclose(f);
  return kb * 1024;
}

/// The bytes resident now, the buffer pool's cache released.
inline long long resident() {
  spmd::host::release_cached_memory();
  return status_bytes("VmRSS");
}

/// The most resident since the last reset.
inline long long resident_peak() { return status_bytes("VmHWM"); }

/// Starts a new peak (VmHWM) from the bytes resident now.
inline void reset_peak() {
  if (std::FILE* f = std::fopen("/proc/self/clear_refs", "w")) {
    std::fputs("5", f);
    std::fclose(f);
  }
}

}  // namespace bench
