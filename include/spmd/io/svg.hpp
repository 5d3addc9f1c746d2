// spmd/io/svg.hpp — pictures of layouts and plans, as SVG text (host only).
//
//   spmd::io::svg(spec, global)                    the global tensor, each block coloured by
//   spmd::io::svg(layout)                          the rank that holds it (the lowest, when
//                                                  several do) and labelled with its ranks and
//                                                  local shape; Partial blocks say "P(op)"
//   spmd::io::svg(plan, src, dst, global, bytes)   one panel per step: the state before and
//   spmd::io::svg<Dst, T>(src_layout)              after, the step's kind, mesh dims and bytes
//
// 1-d tensors are a row, 2-d a grid, 3-d a row of 2-d slices along dim 0 (more dims: an
// std::invalid_argument). The cuts of every rank's block
// along a dim split it into segments, each drawn at least `min_cell` pixels wide and wider
// in proportion to its length, so that uneven shards look uneven and no block is too small
// for its label. Ranks with an empty block are listed under the picture.
//
// Colours: the Okabe–Ito palette (Okabe and Ito, "Color Universal Design", 2008), which
// readers with every common colour-vision deficiency tell apart, with grey in place of
// black so that the black labels stay legible; rank r gets colour r mod 8, and the label
// names the ranks exactly. Each block is a <rect> with data-ranks, data-offset and
// data-shape attributes (tests/io/test_svg.py renders the picture and checks the pixel at
// every block's centre against the owner table of `spmd-plan layout --json`).
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/trace.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/plan/typed_plan.hpp"

namespace spmd::io {

/// Okabe–Ito, black replaced by grey (#999999): colour of rank r is palette[r % 8].
inline constexpr const char* svg_palette[8] = {"#E69F00", "#56B4E9", "#009E73", "#F0E442",
                                               "#0072B2", "#D55E00", "#CC79A7", "#999999"};

namespace svg_detail {

constexpr int min_cell = 64;    // the narrowest segment, in pixels
constexpr int max_cell = 160;   // the widest
constexpr int font = 11;        // label text size
constexpr int slice_gap = 24;   // between the slices of a 3-d tensor

inline std::string list_text(const std::vector<index_t>& v, const char* open = "[", const char* close = "]") {
  std::string t = open;
  for (std::size_t i = 0; i < v.size(); ++i) t += (i ? ", " : "") + std::to_string(v[i]);
  return t + close;
}

/// "r0-3,r6": ranks, runs of consecutive ones joined.
inline std::string ranks_text(const std::vector<index_t>& r) {
  std::string t;
  for (std::size_t i = 0; i < r.size();) {
    std::size_t j = i;
    while (j + 1 < r.size() && r[j + 1] == r[j] + 1) ++j;
    t += (t.empty() ? "r" : ",r") + std::to_string(r[i]);
    if (j > i) t += (j == i + 1 ? ",r" : "-") + std::to_string(r[j]);
    i = j + 1;
  }
  return t;
}

inline std::string escape(const std::string& s) {
  std::string t;
  for (char c : s) {
    if (c == '<') t += "&lt;";
    else if (c == '>') t += "&gt;";
    else if (c == '&') t += "&amp;";
    else if (c == '"') t += "&quot;";
    else t += c;
  }
  return t;
}

/// Pixel positions of the segment boundaries along one dim of length n, cut at `cuts`.
struct axis {
  std::vector<index_t> at;  // sorted element boundaries, 0 .. n
  std::vector<int> px;      // their pixel positions
  int pixel(index_t e) const {
    const auto it = std::lower_bound(at.begin(), at.end(), e);
    return px[static_cast<std::size_t>(it - at.begin())];
  }
  int size() const { return px.back(); }
};

inline axis make_axis(index_t n, std::vector<index_t> cuts) {
  cuts.push_back(0);
  cuts.push_back(n);
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  axis a;
  a.at = cuts;
  index_t longest = 1;
  for (std::size_t i = 1; i < cuts.size(); ++i) longest = std::max(longest, cuts[i] - cuts[i - 1]);
  a.px.push_back(0);
  for (std::size_t i = 1; i < cuts.size(); ++i) {
    const double share = static_cast<double>(cuts[i] - cuts[i - 1]) / static_cast<double>(longest);
    a.px.push_back(a.px.back() + min_cell + static_cast<int>(share * (max_cell - min_cell)));
  }
  return a;
}

struct block {
  std::vector<index_t> ranks;
  shape_vec offset{}, shape{};
};

/// Every distinct block of the layout with the ranks that hold it (ranks ascending), and
/// the ranks whose block is empty.
inline std::pair<std::vector<block>, std::vector<index_t>> blocks_of(const layout_spec& spec, const shape_vec& global) {
  std::map<std::pair<std::vector<index_t>, std::vector<index_t>>, std::size_t> seen;
  std::vector<block> out;
  std::vector<index_t> empty;
  for (index_t r = 0; r < spec.mesh_size(); ++r) {
    const local_box b = box_at(spec, global, unravel(spec.mesh, r));
    std::vector<index_t> off, shp;
    bool is_empty = false;
    for (int d = 0; d < b.shape.size(); ++d) {
      off.push_back(b.offset[d]);
      shp.push_back(b.shape[d]);
      is_empty = is_empty || b.shape[d] == 0;
    }
    if (is_empty) {
      empty.push_back(r);
      continue;
    }
    auto [it, fresh] = seen.try_emplace({off, shp}, out.size());
    if (fresh) out.push_back(block{{}, b.offset, b.shape});
    out[it->second].ranks.push_back(r);
  }
  return {out, empty};
}

inline std::string partial_text(const layout_spec& spec) {
  std::string t;
  for (const placement& p : spec.placements)
    if (p.is_partial()) {
      const std::string s = std::string("P(") + reduce_op_name(p.op) + ")";
      if (t.find(s) == std::string::npos) t += (t.empty() ? "" : " ") + s;
    }
  return t;
}

/// `s` cut to what fits in `width` pixels (a character is at most 0.7 em in the sans fonts
/// renderers pick), "~" marking the cut.
inline std::string fit(const std::string& s, int width) {
  const int fits = std::max(2, (width - 8) * 10 / (font * 7));
  return static_cast<int>(s.size()) <= fits ? s : s.substr(0, static_cast<std::size_t>(fits - 1)) + "~";
}

inline std::string text_at(int x, int y, const std::string& s, int size = font, const char* anchor = "start",
                           const char* weight = "normal") {
  return "<text x=\"" + std::to_string(x) + "\" y=\"" + std::to_string(y) + "\" font-size=\"" + std::to_string(size) +
         "\" font-family=\"DejaVu Sans, Arial, sans-serif\" text-anchor=\"" + anchor + "\" font-weight=\"" + weight +
         "\">" + escape(s) + "</text>\n";
}

/// The picture of one layout as an SVG group at (x, y); returns its width and height.
inline std::string layout_group(const layout_spec& spec, const shape_vec& global, int x0, int y0, int& w, int& h) {
  // (slices, rows, cols) of a tensor of up to 3 dims.
  const int nd = global.size();
  if (nd > 3)
    throw std::invalid_argument("spmd::io::svg: draws tensors of up to 3 dims; this one has " + std::to_string(nd));
  // Named members, not a structured binding: the lambda below reads the blocks, and clang 14
  // refuses a lambda that captures a structured binding.
  const auto drawn = blocks_of(spec, global);
  const std::vector<block>& blocks = drawn.first;
  const std::vector<index_t>& empty = drawn.second;
  const int dr = nd >= 2 ? nd - 2 : -1, dc = nd >= 1 ? nd - 1 : -1, ds = nd >= 3 ? nd - 3 : -1;
  auto cuts = [&](int d) {
    std::vector<index_t> c;
    if (d >= 0)
      for (const block& b : blocks) c.push_back(b.offset[d]), c.push_back(b.offset[d] + b.shape[d]);
    return c;
  };
  const axis ax_c = make_axis(dc >= 0 ? global[dc] : 1, cuts(dc));
  const axis ax_r = make_axis(dr >= 0 ? global[dr] : 1, cuts(dr));
  const index_t slices = ds >= 0 ? global[ds] : 1;
  // Slices along dim ds that start a new set of blocks are drawn; the others are the same.
  std::vector<index_t> slice_starts = {0};
  if (ds >= 0) {
    for (index_t c : cuts(ds))
      if (c > 0 && c < slices) slice_starts.push_back(c);
    std::sort(slice_starts.begin(), slice_starts.end());
    slice_starts.erase(std::unique(slice_starts.begin(), slice_starts.end()), slice_starts.end());
  }
  const int top = ds >= 0 ? font + 8 : 0;  // room for the slice captions
  std::string out;
  const std::string partial = partial_text(spec);
  int x = x0;
  for (std::size_t k = 0; k < slice_starts.size(); ++k) {
    const index_t s0 = slice_starts[k], s1 = k + 1 < slice_starts.size() ? slice_starts[k + 1] : slices;
    if (ds >= 0)
      out += text_at(x, y0 + font, "dim " + std::to_string(ds) + " " + std::to_string(s0) +
                                       (s1 - s0 > 1 ? ".." + std::to_string(s1 - 1) : std::string()));
    for (const block& b : blocks) {
      if (ds >= 0 && !(b.offset[ds] <= s0 && s0 < b.offset[ds] + b.shape[ds])) continue;
      const int bx = x + (dc >= 0 ? ax_c.pixel(b.offset[dc]) : 0);
      const int bw = (dc >= 0 ? ax_c.pixel(b.offset[dc] + b.shape[dc]) : ax_c.size()) - (bx - x);
      const int by = y0 + top + (dr >= 0 ? ax_r.pixel(b.offset[dr]) : 0);
      const int bh = (dr >= 0 ? ax_r.pixel(b.offset[dr] + b.shape[dr]) : ax_r.size()) - (by - y0 - top);
      const std::vector<index_t> off(b.offset.begin(), b.offset.end()), shp(b.shape.begin(), b.shape.end());
      const std::string label = ranks_text(b.ranks);
      out += "<rect x=\"" + std::to_string(bx) + "\" y=\"" + std::to_string(by) + "\" width=\"" + std::to_string(bw) +
             "\" height=\"" + std::to_string(bh) + "\" fill=\"" + svg_palette[b.ranks.front() % 8] +
             "\" stroke=\"#000000\" stroke-width=\"1\" data-ranks=\"" + list_text(b.ranks, "", "") +
             "\" data-offset=\"" + list_text(off, "", "") + "\" data-shape=\"" + list_text(shp, "", "") +
             "\"><title>" + escape(label + " " + list_text(shp) + " at " + list_text(off) + (partial.empty() ? "" : " " + partial)) +
             "</title></rect>\n";
      // Labels in the top part of the block (its centre stays the block's colour); long
      // rank lists are shortened to fit the width (the <title> has them all).
      out += text_at(bx + 3, by + font + 2, fit(label, bw));
      out += text_at(bx + 3, by + 2 * font + 4, fit(list_text(shp), bw));
      if (!partial.empty() && bh >= 3 * font + 16) out += text_at(bx + 3, by + bh - 4, partial, font, "start", "bold");
    }
    x += ax_c.size() + slice_gap;
  }
  w = std::max(x - x0 - slice_gap, 1);
  h = top + ax_r.size();
  if (!empty.empty()) {
    out += text_at(x0, y0 + h + font + 6, "empty: " + ranks_text(empty));
    h += font + 10;
  }
  return out;
}

inline std::string document(const std::string& body, int w, int h) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         std::to_string(w) + "\" height=\"" + std::to_string(h) + "\" viewBox=\"0 0 " + std::to_string(w) + " " +
         std::to_string(h) + "\">\n<rect x=\"0\" y=\"0\" width=\"" + std::to_string(w) + "\" height=\"" +
         std::to_string(h) + "\" fill=\"#FFFFFF\"/>\n" + body + "</svg>\n";
}

inline std::string state_text(const layout_spec& s) {
  plan_text t{};
  put_state(t, s);
  return std::string(t.view());
}

inline std::string mesh_text(const layout_spec& s) {
  std::string t;
  for (int d = 0; d < s.mesh.size(); ++d) t += (d ? "x" : "") + std::to_string(s.mesh[d]);
  return t;
}

}  // namespace svg_detail

/// The layout `spec` of a tensor of shape `global`, as an SVG document.
inline std::string svg(const layout_spec& spec, const shape_vec& global) {
  using namespace svg_detail;
  int w = 0, h = 0;
  const std::string title = "mesh " + mesh_text(spec) + ", shape " +
                            list_text(std::vector<index_t>(global.begin(), global.end())) + ", " + state_text(spec);
  const std::string body = layout_group(spec, global, 10, 10 + font + 12, w, h);
  return document(text_at(10, 10 + font, title, font + 1, "start", "bold") + body,
                  std::max(w, static_cast<int>(title.size()) * (font + 1) * 6 / 10) + 20, h + font + 32);
}

/// A typed layout (spmd::layout<...>) as an SVG document.
template <class L>
  requires requires(const L& l) { L::spec(); l.extents(); }
std::string svg(const L& layout) {
  return svg(L::spec(), layout.extents().to_vec());
}

/// Plan p from src to dst on a tensor of shape `global` of `element_bytes`-byte elements:
/// one panel per step (the state before and after, the step's kind, mesh dims and the bytes
/// the busiest rank receives), the source layout first.
inline std::string svg(const plan& p, const layout_spec& src, const layout_spec& dst, const shape_vec& global,
                       index_t element_bytes) {
  using namespace svg_detail;
  std::string body;
  int y = 10, width = 0;
  const std::string title = "plan " + std::string(spmd::trace(p, src, dst).view()) + " on mesh " + mesh_text(src) +
                            ", shape " + list_text(std::vector<index_t>(global.begin(), global.end())) + ": " +
                            std::to_string(p.steps.size()) + (p.steps.size() == 1 ? " step" : " steps");
  body += text_at(10, y + font, title, font + 1, "start", "bold");
  y += font + 16;
  if (p.steps.size() == 0) {
    int w = 0, h = 0;
    body += text_at(10, y + font, "no step: the blocks are already where they go");
    body += layout_group(src, global, 10, y + font + 10, w, h);
    return document(body, std::max(w + 20, static_cast<int>(title.size()) * 7 + 20), y + font + h + 30);
  }
  for (int i = 0; i < p.steps.size(); ++i) {
    const plan_step& s = p.steps[i];
    const layout_spec& from = i == 0 ? src : s.from;
    const layout_spec& to = i + 1 == p.steps.size() ? dst : s.to;
    std::string dims;
    for (int m = 0; m < src.mesh.size(); ++m)
      if (s.mesh_dims & (dim_mask{1} << m)) dims += (dims.empty() ? "" : ", ") + std::to_string(m);
    std::string head = "step " + std::to_string(i + 1) + ": " +
                       (step_kind_name(s.kind) ? step_kind_name(s.kind) : s.kind == step_kind::partition ? "partition" : "fill");
    if (s.kind == step_kind::all_reduce || s.kind == step_kind::reduce_scatter) head += std::string("(") + reduce_op_name(s.op) + ")";
    head += " over mesh dims {" + dims + "}, " + std::to_string(traffic(s, global, element_bytes).max_rank_bytes) +
            " B/rank: " + state_text(from) + " -> " + state_text(to);
    body += text_at(10, y + font, head, font + 1, "start", "bold");
    int w1 = 0, h1 = 0, w2 = 0, h2 = 0;
    const std::string before = layout_group(from, global, 10, y + font + 10, w1, h1);
    const std::string after = layout_group(to, global, 10 + w1 + 60, y + font + 10, w2, h2);
    body += "<g data-step=\"" + std::to_string(i + 1) + "\" data-side=\"before\">\n" + before + "</g>\n";
    body += text_at(10 + w1 + 30, y + font + 10 + std::max(h1, h2) / 2, "->", font + 6, "middle", "bold");
    body += "<g data-step=\"" + std::to_string(i + 1) + "\" data-side=\"after\">\n" + after + "</g>\n";
    width = std::max({width, 10 + w1 + 60 + w2 + 10, static_cast<int>(head.size()) * (font + 1) * 6 / 10 + 20});
    y += font + 10 + std::max(h1, h2) + 28;
  }
  return document(body, std::max(width, static_cast<int>(title.size()) * (font + 1) * 6 / 10 + 20), y);
}

/// The plan redistribute runs from layout Src to Dst for elements T (spmd::plan_of), on
/// src's extents: `spmd::io::svg<Dst, float>(x.layout())`.
template <class Dst, class T, class Src>
  requires requires(const Src& l) { Src::spec(); Dst::spec(); l.extents(); }
std::string svg(const Src& src) {
  return svg(plan_of<Src, Dst, T>::value(), Src::spec(), Dst::spec(), src.extents().to_vec(), index_t{sizeof(T)});
}

}  // namespace spmd::io
