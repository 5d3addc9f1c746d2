// tools/json_out.hpp — the JSON forms spmd-plan's commands share: index lists and numbers.
#pragma once

#include <cmath>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "spmd/core/small_array.hpp"

namespace spmd_plan {

template <int Cap>
nlohmann::ordered_json json_list(const spmd::svec<spmd::index_t, Cap>& v) {
  auto a = nlohmann::ordered_json::array();
  for (spmd::index_t x : v) a.push_back(x);
  return a;
}

/// JSON has no infinities (a fill with max's identity holds -inf): those print as the
/// strings "inf", "-inf" and "nan".
template <class T>
nlohmann::ordered_json json_number(T v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  }
  return v;
}

}  // namespace spmd_plan
