// spmd/core/fixed_text.hpp — text of bounded length that constant expressions can build:
// plan traces (plan/trace.hpp) and operator summaries (io/op_summary.hpp) are written by the
// compiler, so a static_assert can compare them with a literal and a program prints a
// constant instead of building the string when it runs.
#pragma once

#include <string_view>

namespace spmd {

/// Up to Capacity characters; put() past the end drops the rest (the capacities are chosen
/// so that it does not happen: see their definitions).
template <int Capacity>
struct fixed_text {
  static constexpr int capacity = Capacity;
  char chars[Capacity + 1]{};
  int n = 0;

  constexpr void put(char c) {
    if (n < capacity) chars[n++] = c;
  }
  constexpr void put(std::string_view s) {
    for (char c : s) put(c);
  }
  constexpr void put(long long v) {
    if (v < 0) put('-'), v = -v;
    char digits[20]{};
    int k = 0;
    do digits[k++] = static_cast<char>('0' + v % 10), v /= 10;
    while (v > 0);
    while (k > 0) put(digits[--k]);
  }
  constexpr std::string_view view() const { return {chars, static_cast<std::size_t>(n)}; }
  friend constexpr bool operator==(const fixed_text& a, std::string_view b) { return a.view() == b; }
};

}  // namespace spmd
