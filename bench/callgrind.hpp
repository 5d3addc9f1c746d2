// bench/callgrind.hpp — instruction counts for the host benchmarks that compare two paths
// (op_overhead, backward_overhead): the program runs itself under valgrind's callgrind as
// `valgrind --tool=callgrind ... self --callgrind`, that copy runs each case's loops between
// CALLGRIND_ZERO_STATS and CALLGRIND_DUMP_STATS_AT (count_instructions), and the parent reads
// the per-loop dumps back (callgrind_counts). Instructions do not drift with the machine's
// load as times do, which is why the overhead targets are stated in them.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define SPMD_BENCH_CALLGRIND 1
#endif

namespace bench {

/// True in the copy of the program that callgrind runs (its first argument is --callgrind).
inline bool callgrind_mode = false;

/// Under callgrind: `warm` calls of f, then `calls` counted ones, dumped as `name`.
template <class F>
void count_instructions(F&& f, const std::string& name, int warm, int calls) {
#ifdef SPMD_BENCH_CALLGRIND
  for (int i = 0; i < warm; ++i) f();  // pool blocks, schedules, caches
  CALLGRIND_ZERO_STATS;
  for (int i = 0; i < calls; ++i) f();
  CALLGRIND_DUMP_STATS_AT(name.c_str());
#else
  (void)f, (void)name, (void)warm, (void)calls;
#endif
}

/// Runs `env self --callgrind` under callgrind and returns each dump's instructions per call
/// (its total over `calls`), by name; empty when valgrind is missing or its run fails. The
/// dumps go to /tmp/spmd_<tag>_callgrind.* and are removed afterwards.
inline std::map<std::string, double> callgrind_counts(const char* self, const std::string& tag, int calls,
                                                      const std::string& env = "") {
  std::map<std::string, double> out;
  if (std::system("valgrind --version > /dev/null 2>&1") != 0) return out;
  const std::string prefix = "/tmp/spmd_" + tag + "_callgrind";
  std::system(("rm -f " + prefix + ".*").c_str());
  const std::string cmd = env + (env.empty() ? "" : " ") + "valgrind --tool=callgrind --callgrind-out-file=" +
                          prefix + ".%p " + self + " --callgrind > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0) return out;
  FILE* ls = popen(("ls " + prefix + ".*").c_str(), "r");
  char path[512];
  while (ls && std::fgets(path, sizeof path, ls)) {
    std::string p(path);
    p.erase(p.find_last_not_of("\n") + 1);
    std::ifstream f(p);
    std::string line, name;
    double ir = -1;
    while (std::getline(f, line)) {
      if (line.rfind("desc: Trigger: Client Request: ", 0) == 0) name = line.substr(31);
      if (line.rfind("summary: ", 0) == 0) ir = std::atof(line.c_str() + 9);
    }
    if (!name.empty() && ir >= 0) out[name] = ir / calls;
  }
  if (ls) pclose(ls);
  std::system(("rm -f " + prefix + ".*").c_str());
  return out;
}

}  // namespace bench
