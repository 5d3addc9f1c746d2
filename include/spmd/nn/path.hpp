// spmd/nn/path.hpp — a parameter's path in a model ("blocks.1.attn.wq"), made and matched at
// compile time.
//
//   static_assert(spmd::nn::join<"blocks", spmd::nn::index_text<1>()>().view() == "blocks.1");
//   static_assert(spmd::nn::path_matches("blocks.*.attn.wq", "blocks.1.attn.wq"));
//
// A path is the member names from the model down to the parameter, joined by '.', with an
// array element's index as a name (PyTorch's state_dict keys). A pattern is a path whose
// segments may be '*', which matches any one segment; a pattern with no '*' matches only
// itself.
#pragma once

#include <cstddef>
#include <string_view>

#include "spmd/core/fixed_string.hpp"

namespace spmd::nn {

/// a + "." + b (just b when a is empty).
template <fixed_string A, fixed_string B>
constexpr auto join() {
  constexpr std::size_t n = A.size() == 0 ? B.size() : A.size() + 1 + B.size();
  char buf[n + 1]{};
  std::size_t k = 0;
  for (std::size_t i = 0; i < A.size(); ++i) buf[k++] = A.chars[i];
  if (A.size() != 0) buf[k++] = '.';
  for (std::size_t i = 0; i < B.size(); ++i) buf[k++] = B.chars[i];
  return fixed_string<n + 1>(buf);
}

/// The decimal text of I.
template <std::size_t I>
constexpr auto index_text() {
  constexpr std::size_t n = [] {
    std::size_t d = 1;
    for (std::size_t v = I; v >= 10; v /= 10) ++d;
    return d;
  }();
  char buf[n + 1]{};
  std::size_t v = I;
  for (std::size_t k = n; k-- > 0; v /= 10) buf[k] = static_cast<char>('0' + v % 10);
  return fixed_string<n + 1>(buf);
}

/// Whether `path` matches `pattern` segment by segment ('*' matching any one segment).
constexpr bool path_matches(std::string_view pattern, std::string_view path) {
  while (true) {
    const std::size_t a = pattern.find('.'), b = path.find('.');
    const std::string_view p = pattern.substr(0, a), s = path.substr(0, b);
    if (p != "*" && p != s) return false;
    if (a == std::string_view::npos || b == std::string_view::npos) return a == b;
    pattern.remove_prefix(a + 1);
    path.remove_prefix(b + 1);
  }
}

}  // namespace spmd::nn
