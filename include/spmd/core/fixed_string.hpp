// spmd/core/fixed_string.hpp — strings as template arguments (mesh axis names).
#pragma once

#include <cstddef>
#include <string_view>

namespace spmd {

/// A string literal usable as a C++20 non-type template argument:
/// `spmd::mesh<2, 4>::named<"dp", "tp">`.
template <std::size_t N>
struct fixed_string {
  char chars[N]{};  // includes the terminating '\0'

  constexpr fixed_string(const char (&s)[N]) {
    for (std::size_t i = 0; i < N; ++i) chars[i] = s[i];
  }
  static constexpr std::size_t size() { return N - 1; }
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

template <std::size_t A, std::size_t B>
constexpr bool operator==(const fixed_string<A>& a, const fixed_string<B>& b) {
  return a.view() == b.view();
}

}  // namespace spmd
