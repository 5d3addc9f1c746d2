// spmd/io/placement_format.hpp — placements, meshes and shapes as text: the formatting half
// of placement_text.hpp (whose parsers are their inverses), alone so that units that only
// print (operator summaries, the demo) do not compile the parsers.
//
//   format_placements(spec)   "S(0),R"        put_placements(t, spec): the same, constexpr
//   format_mesh({2, 4})       "2x4"
//   format_shape({10, 5})     "10,5"          format_list: "[10, 5]"
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/fixed_text.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/core/put_placement.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd {

/// The longest placements text of a layout: max_mesh_dims placements joined by ','.
inline constexpr int placements_chars = max_mesh_dims * (placement_chars + 1);
/// The same for a raw list, whose dims and orders are any int (format_placement(s) of what
/// parse_placements accepted must parse back to it, however large the numbers).
inline constexpr int any_placements_chars = max_mesh_dims * (any_placement_chars + 1);

/// "R", "S(0)", "S(1)[2]" (the bracket when p.order is explicit), "P(sum)".
template <int N>
constexpr void put_placement(fixed_text<N>& t, const placement& p) {
  put_placement(t, p, p.order != default_order);
}

/// Placement m of a spec as lists show it: the order dropped where it is the default.
constexpr placement shown_placement(const layout_spec& spec, int m) {
  placement p = spec.placements[m];
  if (p.is_shard() && spec.default_order(p.dim)) p.order = default_order;
  return p;
}

/// The normalised placements of a spec joined by ',': shard dims non-negative, and "[k]" only
/// on the shards of tensor dims whose order is not the default left to right (parses back to
/// an equal spec). Constexpr, so that compile-time summaries are constants.
template <int N>
constexpr void put_placements(fixed_text<N>& t, const layout_spec& spec) {
  for (int m = 0; m < spec.placements.size(); ++m) {
    if (m) t.put(',');
    put_placement(t, shown_placement(spec, m));
  }
}

inline std::string format_placement(const placement& p) {
  fixed_text<any_placement_chars> t;
  put_placement(t, p);
  return std::string(t.view());
}

/// A raw placement list joined by ',' (inverse of parse_placements).
inline std::string format_placements(const placement_vec& ps) {
  fixed_text<any_placements_chars> t;
  for (int m = 0; m < ps.size(); ++m) {
    if (m) t.put(',');
    put_placement(t, ps[m]);
  }
  return std::string(t.view());
}

/// The normalised placements of a spec, one string per mesh dim (put_placements' items).
inline std::vector<std::string> placement_strings(const layout_spec& spec) {
  std::vector<std::string> out;
  for (int m = 0; m < spec.placements.size(); ++m) out.push_back(format_placement(shown_placement(spec, m)));
  return out;
}

/// put_placements as a string.
inline std::string format_placements(const layout_spec& spec) {
  fixed_text<placements_chars> t;
  put_placements(t, spec);
  return std::string(t.view());
}

namespace io_detail {
/// The numbers v[0, n) joined by sep.
inline std::string joined_numbers(const index_t* v, int n, std::string_view sep) {
  std::string out;
  for (int k = 0; k < n; ++k) {
    if (k) out += sep;
    out += std::to_string(v[k]);
  }
  return out;
}
}  // namespace io_detail

/// "2x4" (inverse of parse_mesh).
inline std::string format_mesh(const mesh_shape_vec& mesh) {
  return io_detail::joined_numbers(mesh.begin(), mesh.size(), "x");
}

/// "10,5"; "" for a 0-d tensor (inverse of parse_shape).
template <int Cap>
inline std::string format_shape(const svec<index_t, Cap>& shape) {
  return io_detail::joined_numbers(shape.begin(), shape.size(), ",");
}

/// "[10, 5]", "[]" — the bracketed form the tables print.
template <int Cap>
inline std::string format_list(const svec<index_t, Cap>& v) {
  return "[" + io_detail::joined_numbers(v.begin(), v.size(), ", ") + "]";
}

}  // namespace spmd
