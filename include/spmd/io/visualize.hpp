// spmd/io/visualize.hpp — which rank holds which block, as text (host only).
//
// Both functions walk the ranks of the mesh (rank = row-major mesh index) and ask box_at,
// the constexpr function the compile-time layouts use, for each rank's block.
#pragma once

#include <algorithm>
#include <cstddef>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/io/placement_text.hpp"

namespace spmd {

namespace io_detail {

/// Left-aligned columns two spaces apart, a row of dashes under the header (tabulate's
/// "simple" format); `right[c]` right-aligns column c. Lines carry no trailing spaces.
inline std::string render_table(const std::vector<std::vector<std::string>>& rows,
                                const std::vector<bool>& right = {}) {
  if (rows.empty()) return {};
  std::vector<std::size_t> width(rows.front().size(), 0);
  for (const auto& row : rows)
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  const auto line = [&](const std::vector<std::string>& row) {
    std::string s;
    for (std::size_t c = 0; c < row.size(); ++c) {
      if (c) s += "  ";
      const std::string pad(width[c] - row[c].size(), ' ');
      const bool r = c < right.size() && right[c];
      s += r ? pad + row[c] : row[c] + pad;
    }
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s + '\n';
  };
  std::string out = line(rows.front());
  std::vector<std::string> dashes;
  for (std::size_t w : width) dashes.emplace_back(w, '-');
  out += line(dashes);
  for (std::size_t i = 1; i < rows.size(); ++i) out += line(rows[i]);
  return out;
}

inline void check_shape(const layout_spec& spec, const shape_vec& global, const char* who) {
  if (global.size() != spec.tensor_rank)
    throw std::invalid_argument(std::string(who) + ": shape '" + format_shape(global) + "' has " +
                                std::to_string(global.size()) + " dims, the layout is for " +
                                std::to_string(spec.tensor_rank));
}

}  // namespace io_detail

/// One line per rank (row-major mesh index): rank, mesh coordinate, local shape and global
/// offset of its block, in aligned columns under a header line.
///   rank  coord   local_shape  offset
///   ----  ------  -----------  ------
///      0  [0, 0]  [2, 5]       [0, 0]
/// @throws std::invalid_argument when global.size() != spec.tensor_rank
inline std::string layout_table(const layout_spec& spec, const shape_vec& global) {
  io_detail::check_shape(spec, global, "layout_table");
  std::vector<std::vector<std::string>> rows{{"rank", "coord", "local_shape", "offset"}};
  for (index_t rank = 0; rank < spec.mesh_size(); ++rank) {
    const coord_vec coord = unravel(spec.mesh, rank);
    const local_box box = box_at(spec, global, coord);
    rows.push_back({std::to_string(rank), format_list(coord), format_list(box.shape),
                    format_list(box.offset)});
  }
  return io_detail::render_table(rows, {true, false, false, false});
}

/// DTensor's visualize_sharding for tensors of <= 2 dims: a grid whose rows are the distinct
/// row ranges and whose columns are the distinct column ranges of the ranks' blocks; each
/// cell lists, comma-separated, the ranks whose block is that box. A 1-d tensor is one row
/// ("Row 0-0") of column ranges, a 0-d tensor one cell ("Row 0-0", "Col 0-0"). Ranges are
/// inclusive, as DTensor prints them. Ranks with a zero-size block are left out; when every
/// block is empty the grid is a single line saying so.
///            Col 0-4
///   -------  -------
///   Row 0-1  0
///   Row 2-3  1
/// @throws std::invalid_argument when global.size() != spec.tensor_rank or exceeds 2
inline std::string visualize(const layout_spec& spec, const shape_vec& global) {
  io_detail::check_shape(spec, global, "visualize");
  if (global.size() > 2)
    throw std::invalid_argument("visualize: only tensors of at most 2 dims, shape '" +
                                format_shape(global) + "' has " + std::to_string(global.size()));
  using range = std::pair<index_t, index_t>;  // inclusive [first, last]
  std::map<range, std::size_t> row_index, col_index;
  struct block {
    range row, col;
    index_t rank;
  };
  std::vector<block> blocks;
  for (index_t rank = 0; rank < spec.mesh_size(); ++rank) {
    const local_box box = box_at(spec, global, unravel(spec.mesh, rank));
    bool empty = false;
    for (index_t extent : box.shape) empty = empty || extent == 0;
    if (empty) continue;
    const auto span = [&box](int d) { return range{box.offset[d], box.offset[d] + box.shape[d] - 1}; };
    block b{{0, 0}, {0, 0}, rank};
    if (global.size() == 1) b.col = span(0);
    if (global.size() == 2) {
      b.row = span(0);
      b.col = span(1);
    }
    row_index.emplace(b.row, 0);
    col_index.emplace(b.col, 0);
    blocks.push_back(b);
  }
  if (blocks.empty()) return "(every block is empty: no rank holds an element)\n";

  std::vector<std::vector<std::string>> rows(row_index.size() + 1,
                                             std::vector<std::string>(col_index.size() + 1));
  std::size_t i = 0;
  for (auto& [r, idx] : row_index) {
    idx = i++;
    rows[idx + 1][0] = "Row " + std::to_string(r.first) + "-" + std::to_string(r.second);
  }
  i = 0;
  for (auto& [c, idx] : col_index) {
    idx = i++;
    rows[0][idx + 1] = "Col " + std::to_string(c.first) + "-" + std::to_string(c.second);
  }
  for (const block& b : blocks) {
    std::string& cell = rows[row_index[b.row] + 1][col_index[b.col] + 1];
    if (!cell.empty()) cell += ", ";
    cell += std::to_string(b.rank);
  }
  return io_detail::render_table(rows);
}

}  // namespace spmd
