// spmd/io/placement_text.hpp — the text forms of placements, meshes and shapes (host only).
//
// Grammar (one placement per mesh dim, comma-separated, whitespace around and inside tokens
// tolerated):
//   R             replicate
//   S(d)          shard tensor dim d (d may be negative: counts from the end)
//   S(d)[k]       ... where this mesh dim is position k (0 splits first) of tensor dim d's shard
//                 order; without brackets nested shards of one tensor dim apply left to right
//   P(op)         partial, op one of sum avg max min product
//   P             P(sum)
// Mesh:  sizes >= 1 joined by 'x', 1 to 8 dims ("2x4").
// Shape: sizes >= 0 joined by ',', 0 to 8 dims ("10,5"; "" is a 0-d tensor).
//
// Every parse function throws std::invalid_argument whose what() names the bad value; the
// formatting functions are their inverses. checked_spec() runs make_spec and turns its error
// into the same kind of exception, with a sentence that names the offending placement.
#pragma once

#include <charconv>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/io/placement_format.hpp"

namespace spmd {

/// Largest mesh size, tensor extent and mesh-size product the text forms accept (2^62), so
/// that the chunk arithmetic (size + n - 1, offsets) can never overflow index_t.
inline constexpr index_t max_text_extent = index_t{1} << 62;

namespace io_detail {

inline bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

/// Split on `sep`; "" gives one empty piece (callers decide what an empty list means).
inline std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

/// The whole of `s` (already trimmed) as a decimal integer with an optional leading '-';
/// "" when it is one, else why not.
template <class Int>
inline std::string parse_int(std::string_view s, Int& out) {
  const char* first = s.data();
  const char* last = s.data() + s.size();
  const auto [ptr, ec] = std::from_chars(first, last, out);
  if (ec == std::errc::result_out_of_range) return "is out of range";
  if (s.empty() || ec != std::errc{} || ptr != last) return "is not an integer";
  return {};
}

/// Cursor over one placement token.
struct token_cursor {
  std::string_view s;
  std::size_t i = 0;

  void skip_ws() {
    while (i < s.size() && is_space(s[i])) ++i;
  }
  bool at_end() {
    skip_ws();
    return i == s.size();
  }
  bool eat(char c) {
    skip_ws();
    if (i < s.size() && s[i] == c) {
      ++i;
      return true;
    }
    return false;
  }
  /// Text up to (not including) `close`, trimmed; false when `close` never comes.
  bool until(char close, std::string_view& out) {
    const std::size_t pos = s.find(close, i);
    if (pos == std::string_view::npos) return false;
    out = trim(s.substr(i, pos - i));
    i = pos + 1;
    return true;
  }
};

[[noreturn]] inline void bad_placement(std::string_view token, int position, const std::string& why) {
  std::string msg = "bad placement '" + std::string(token) + "'";
  if (position >= 0) msg += " at position " + std::to_string(position);
  msg += ": " + why;
  throw std::invalid_argument(msg);
}

/// Parse one token; position < 0 leaves the position out of the message.
inline placement parse_placement_at(std::string_view raw, int position) {
  const std::string_view token = trim(raw);
  const char* expected = "expected R, S(d), S(d)[k], P or P(op)";
  if (token.empty()) bad_placement(token, position, std::string("empty placement; ") + expected);
  token_cursor c{token};
  if (c.eat('R')) {
    if (!c.at_end()) bad_placement(token, position, expected);
    return make_replicate();
  }
  if (c.eat('P')) {
    if (c.at_end()) return make_partial(reduce_op::sum);
    std::string_view name;
    if (!c.eat('(') || !c.until(')', name) || !c.at_end())
      bad_placement(token, position, expected);
    static constexpr struct {
      std::string_view name;
      reduce_op op;
    } ops[] = {{"sum", reduce_op::sum},
               {"avg", reduce_op::avg},
               {"max", reduce_op::max},
               {"min", reduce_op::min},
               {"product", reduce_op::product}};
    for (const auto& o : ops)
      if (o.name == name) return make_partial(o.op);
    bad_placement(token, position,
                  "unknown reduce op '" + std::string(name) +
                      "' (expected sum, avg, max, min or product)");
  }
  if (c.eat('S')) {
    std::string_view dim_text;
    if (!c.eat('(') || !c.until(')', dim_text)) bad_placement(token, position, expected);
    int dim = 0;
    if (const std::string why = parse_int(dim_text, dim); !why.empty())
      bad_placement(token, position, "the shard dim '" + std::string(dim_text) + "' " + why);
    int order = default_order;
    if (c.eat('[')) {
      std::string_view order_text;
      if (!c.until(']', order_text)) bad_placement(token, position, "missing ']'");
      std::string why = parse_int(order_text, order);
      if (why.empty() && order < 0) why = "is negative";
      if (!why.empty())
        bad_placement(token, position,
                      "the shard order position '" + std::string(order_text) + "' " + why);
    }
    if (!c.at_end()) bad_placement(token, position, expected);
    return make_shard(dim, order);
  }
  bad_placement(token, position, expected);
}

/// At most Cap sizes joined by `sep`; `what` is "mesh" or "shape"; "" gives no sizes.
template <int Cap>
inline svec<index_t, Cap> parse_sizes(std::string_view text, char sep, const char* what,
                                      index_t min_size, const char* dim_word) {
  const std::string quoted = "bad " + std::string(what) + " '" + std::string(text) + "': ";
  svec<index_t, Cap> out{};
  if (trim(text).empty()) return out;  // callers decide whether 0 dims is allowed
  const auto pieces = split(text, sep);
  if (pieces.size() > static_cast<std::size_t>(Cap))
    throw std::invalid_argument(quoted + "at most " + std::to_string(Cap) + " " + dim_word +
                                "s, got " + std::to_string(pieces.size()));
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const std::string_view p = trim(pieces[i]);
    const std::string where = std::string(dim_word) + " " + std::to_string(i);
    if (p.empty()) throw std::invalid_argument(quoted + "empty size at " + where);
    index_t v = 0;
    if (const std::string why = parse_int(p, v); !why.empty())
      throw std::invalid_argument(quoted + "size '" + std::string(p) + "' at " + where + " " +
                                  why);
    if (v < min_size)
      throw std::invalid_argument(quoted + "size '" + std::string(p) + "' at " + where +
                                  " must be >= " + std::to_string(min_size));
    if (v > max_text_extent)
      throw std::invalid_argument(quoted + "size '" + std::string(p) + "' at " + where +
                                  " is larger than 2^62");
    out.push_back(v);
  }
  return out;
}

}  // namespace io_detail

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

/// One placement token ("S(0)", " P(max) ", "S(-1)[1]").
/// @throws std::invalid_argument "bad placement 'TOKEN': why"
inline placement parse_placement(std::string_view token) {
  return io_detail::parse_placement_at(token, -1);
}

/// A comma-separated placement list, one per mesh dim; "" (or only whitespace) is the empty list.
/// Shard dims are kept as written (possibly negative); make_spec/checked_spec normalise them.
/// @throws std::invalid_argument "bad placement 'TOKEN' at position P: why", P = the 0-based
///         index in the list (= the mesh dim), or "too many placements" for more than 8
inline placement_vec parse_placements(std::string_view text) {
  placement_vec out{};
  if (io_detail::trim(text).empty()) return out;
  const auto tokens = io_detail::split(text, ',');
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    const placement p = io_detail::parse_placement_at(tokens[i], static_cast<int>(i));
    if (out.size() == max_mesh_dims)
      throw std::invalid_argument("bad placements '" + std::string(text) + "': at most " +
                                  std::to_string(max_mesh_dims) + " (one per mesh dim), got " +
                                  std::to_string(tokens.size()));
    out.push_back(p);
  }
  return out;
}

/// "2x4": 1 to 8 sizes >= 1 joined by 'x'; the number of ranks is at most 2^62.
/// @throws std::invalid_argument "bad mesh 'TEXT': why"
inline mesh_shape_vec parse_mesh(std::string_view text) {
  const auto mesh = io_detail::parse_sizes<max_mesh_dims>(text, 'x', "mesh", 1, "mesh dim");
  if (mesh.empty())
    throw std::invalid_argument("bad mesh '" + std::string(text) + "': needs 1 to " +
                                std::to_string(max_mesh_dims) +
                                " sizes joined by 'x', e.g. 2x4");
  index_t ranks = 1;
  for (index_t s : mesh) {
    if (ranks > max_text_extent / s)
      throw std::invalid_argument("bad mesh '" + std::string(text) +
                                  "': more than 2^62 ranks in all");
    ranks *= s;
  }
  return mesh;
}

/// "10,5": 0 to 8 sizes >= 0 joined by ','; "" is a 0-d tensor.
/// @throws std::invalid_argument "bad shape 'TEXT': why"
inline shape_vec parse_shape(std::string_view text) {
  return io_detail::parse_sizes<max_tensor_dims>(text, ',', "shape", 0, "tensor dim");
}

// ---------------------------------------------------------------------------
// Validation with messages
// ---------------------------------------------------------------------------

/// A sentence for a failed make_spec(mesh, raw, tensor_rank) that names the bad value:
///   "placement 'S(2)' on mesh dim 1: a shard dim is outside the tensor's dims (tensor has 2 dims)"
/// @pre !r.ok()
inline std::string spec_error_message(const spec_result& r, const mesh_shape_vec& mesh,
                                      const placement_vec& raw, int tensor_rank) {
  const std::string what = describe(r.error);
  const auto dims = [](int n, const char* word) {
    return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
  };
  switch (r.error) {
    case layout_error::none: return what;
    case layout_error::placement_count_mismatch:
      return "placements '" + format_placements(raw) + "' (" + dims(raw.size(), "placement") +
             ") do not fit mesh '" + format_mesh(mesh) + "' (" + dims(mesh.size(), "dim") +
             "): " + what;
    case layout_error::bad_mesh_shape:
      return "mesh '" + format_mesh(mesh) + "': " + what;
    case layout_error::too_many_tensor_dims:
      return "tensor rank " + std::to_string(tensor_rank) + ": " + what;
    case layout_error::shard_dim_out_of_range:
    case layout_error::mixed_partial_ops:
    case layout_error::inconsistent_shard_order:
      break;
  }
  if (r.where < 0 || r.where >= raw.size()) return what;
  std::string msg = "placement '" + format_placement(raw[r.where]) + "' on mesh dim " +
                    std::to_string(r.where) + ": " + what;
  if (r.error == layout_error::shard_dim_out_of_range) {
    msg += " (tensor has " + dims(tensor_rank, "dim") + ")";
  } else if (r.error == layout_error::mixed_partial_ops) {
    for (int m = 0; m < r.where; ++m)
      if (raw[m].is_partial() && raw[m].op != raw[r.where].op) {
        msg += " (mesh dim " + std::to_string(m) + " is '" + format_placement(raw[m]) + "')";
        break;
      }
  }
  return msg;
}

/// make_spec, throwing std::invalid_argument(spec_error_message(...)) on failure.
inline layout_spec checked_spec(const mesh_shape_vec& mesh, const placement_vec& raw,
                                int tensor_rank) {
  const spec_result r = make_spec(mesh, raw, tensor_rank);
  if (!r.ok()) throw std::invalid_argument(spec_error_message(r, mesh, raw, tensor_rank));
  return r.spec;
}

}  // namespace spmd
