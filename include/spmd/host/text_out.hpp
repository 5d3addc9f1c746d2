// spmd/host/text_out.hpp — the string an error message, a log line or a trace event is built in.
//
//   text_out t;
//   t << "step " << i + 1 << "/" << n;      every << is a call
//   log::line(lo, count, t.str());
//
// Why not std::string's operator+: each '+' inlines the string's growth, its length check
// and its exception path, and every unit that runs an operator compiles the messages, the
// log and the trace text (header-only: there is no other unit to put them in). Written with
// '+', the log and trace text was 0.6 s of g++ -O2's 4.5 s on examples/mlp_demo.cpp.
// Appends that are calls to one function keep it small; it is cold text, run only when
// something watches or goes wrong.
#pragma once

#include <concepts>
#include <cstdio>
#include <string>
#include <string_view>
#include <utility>

#include "spmd/core/small_array.hpp"

namespace spmd::host {

class text_out {
 public:
  [[gnu::noinline]] text_out& operator<<(std::string_view v) {
    s_.append(v.data(), v.size());
    return *this;
  }
  text_out& operator<<(const char* v) { return *this << std::string_view(v); }
  text_out& operator<<(const std::string& v) { return *this << std::string_view(v); }
  text_out& operator<<(char c) { return *this << std::string_view(&c, 1); }
  template <std::integral I>
    requires(!std::same_as<I, char> && !std::same_as<I, bool>)
  text_out& operator<<(I v) {
    if constexpr (std::signed_integral<I>) return signed_number(static_cast<long long>(v));
    else return unsigned_number(static_cast<unsigned long long>(v));
  }

  const std::string& str() const& { return s_; }
  std::string str() && { return std::move(s_); }
  bool empty() const { return s_.empty(); }

 private:
  [[gnu::noinline]] text_out& signed_number(long long v) {
    char b[24];
    return *this << std::string_view(b, static_cast<std::size_t>(std::snprintf(b, sizeof b, "%lld", v)));
  }
  [[gnu::noinline]] text_out& unsigned_number(unsigned long long v) {
    char b[24];
    return *this << std::string_view(b, static_cast<std::size_t>(std::snprintf(b, sizeof b, "%llu", v)));
  }

  std::string s_;
};

/// "[8, 16]".
[[gnu::cold]] inline std::string shape_text(const shape_vec& s) {
  text_out t;
  t << '[';
  for (int d = 0; d < s.size(); ++d) t << (d ? ", " : "") << s[d];
  return std::move(t << ']').str();
}

}  // namespace spmd::host
