// tests/common/throws.hpp — checking what an error says: the message of the exception a call
// throws ("" when it throws none of that type), and substring search.
#pragma once

#include <string>

namespace spmd_test {

template <class E, class F>
std::string message(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

inline bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace spmd_test
