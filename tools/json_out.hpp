// tools/json_out.hpp — the forms spmd-plan's commands share: index lists, numbers, and the
// ranks' locals as `run` prints them (`rand` and `load` print the same).
#pragma once

#include <cmath>
#include <string>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "spmd/core/layout_spec.hpp"
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

/// One rank's local as `run` prints it: {"rank", "coord", "local_shape", "data"}; 16-bit
/// floats print as the floats they are.
template <class T>
nlohmann::ordered_json rank_json(spmd::index_t rank, const spmd::coord_vec& coord,
                                 const spmd::shape_vec& local_shape, const T* data, spmd::index_t n) {
  nlohmann::ordered_json j;
  j["rank"] = rank;
  j["coord"] = json_list(coord);
  j["local_shape"] = json_list(local_shape);
  auto a = nlohmann::ordered_json::array();
  for (spmd::index_t k = 0; k < n; ++k) {
    if constexpr (std::is_arithmetic_v<T>) a.push_back(json_number(data[k]));
    else a.push_back(json_number(static_cast<float>(data[k])));
  }
  j["data"] = std::move(a);
  return j;
}

/// The text form of the ranks: "rank R [coord] shape [shape]: [data]" a line each.
inline std::string ranks_text(const nlohmann::ordered_json& ranks) {
  std::string text;
  for (const auto& rank : ranks)
    text += "rank " + rank["rank"].dump() + " " + rank["coord"].dump() + " shape " +
            rank["local_shape"].dump() + ": " + rank["data"].dump() + "\n";
  return text;
}

}  // namespace spmd_plan
