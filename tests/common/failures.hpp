// tests/common/failures.hpp — failures collected in hot loops, reported once.
//
// A REQUIRE per element would dominate the run time of the sweeps; they count checks and
// keep the first failures' descriptions instead, and report them in one Catch2 check.
#pragma once

#include <catch2/catch.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace spmd_test {

struct failures {
  std::vector<std::string> first;  // the first few, described
  std::size_t count = 0;
  std::size_t checks = 0;  // for sweeps that count what they checked

  void add(const std::string& what) {
    if (first.size() < 20) first.push_back(what);
    ++count;
  }
  /// No failures.
  void report() const {
    std::string all;
    for (const auto& f : first) all += f + '\n';
    INFO(all);
    INFO(count << " failures in " << checks << " checks");
    CHECK(count == 0);
  }
  /// No failures, and the sweep checked something (an empty sweep passes nothing).
  void report_checked() const {
    report();
    CHECK(checks > 0);
  }
};

}  // namespace spmd_test
