// spmd/ops/shape_text.hpp — "[4, dyn, 6]": a shape in the operators' error messages.
#pragma once

#include <string>

#include "spmd/core/extents.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd::ops {

inline std::string shape_text(const shape_vec& s) {
  std::string t = "[";
  for (int d = 0; d < s.size(); ++d) {
    if (d) t += ", ";
    t += s[d] == dyn ? std::string("dyn") : std::to_string(s[d]);
  }
  return t + "]";
}

}  // namespace spmd::ops
