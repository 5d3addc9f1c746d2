// spmd/io/pipeline_svg.hpp — a pipeline schedule's table as an SVG picture (host only):
// ranks as rows, time slots as columns, each task a box as many slots wide as it lasts,
// labelled with its microbatch (and its stage where a rank holds several), and each transfer
// a line from the sender's box to the receiver's row in the same slot.
//
//   spmd::io::svg(pp::build(kind, dims).table, dims, title)
//
// Colours by kind, from the Okabe–Ito palette (svg.hpp says why): F sky blue, B bluish
// green, I blue, W orange; an idle slot is left white, so the bubble is the white. Every box
// is a <rect> with data-op, data-rank, data-slot, data-stage and data-microbatch attributes
// (tests/cli/test_pipeline.py counts them against the JSON).
#pragma once

#include <string>

#include "spmd/io/svg.hpp"
#include "spmd/plan/pipeline_schedule.hpp"

namespace spmd::io {

namespace pipeline_svg_detail {

constexpr int slot_w = 26, row_h = 30, left = 64, top = 48, pad = 16;

inline const char* colour(pp::work w) {
  switch (w) {
    case pp::work::forward: return "#56B4E9";
    case pp::work::backward: return "#009E73";
    case pp::work::backward_input: return "#0072B2";
    case pp::work::backward_weight: return "#E69F00";
    case pp::work::idle: break;
  }
  return "#FFFFFF";
}

inline std::string num(int v) { return std::to_string(v); }

}  // namespace pipeline_svg_detail

inline std::string svg(const pp::table& t, pp::shape dims, const std::string& title) {
  using namespace pipeline_svg_detail;
  const int width = left + t.slots * slot_w + pad, height = top + t.ranks * row_h + pad + 18;
  std::string body;
  body += "<text x=\"" + num(pad) + "\" y=\"20\" font-family=\"sans-serif\" font-size=\"13\">" +
          svg_detail::escape(title) + "</text>\n";
  // the grid: a thin frame per rank row, slot numbers every 5 slots
  for (int r = 0; r < t.ranks; ++r) {
    const int y = top + r * row_h;
    body += "<text x=\"" + num(pad) + "\" y=\"" + num(y + row_h / 2 + 4) +
            "\" font-family=\"sans-serif\" font-size=\"11\">rank " + num(r) + "</text>\n";
    body += "<rect x=\"" + num(left) + "\" y=\"" + num(y + 2) + "\" width=\"" + num(t.slots * slot_w) +
            "\" height=\"" + num(row_h - 4) + "\" fill=\"none\" stroke=\"#DDDDDD\"/>\n";
  }
  for (int s = 0; s < t.slots; s += 5)
    body += "<text x=\"" + num(left + s * slot_w + 2) + "\" y=\"" + num(top - 6) +
            "\" font-family=\"sans-serif\" font-size=\"9\" fill=\"#666666\">" + num(s) + "</text>\n";
  // the tasks
  for (int s = 0; s < t.slots; ++s)
    for (int r = 0; r < t.ranks; ++r) {
      const pp::cell& c = t(s, r);
      if (c.continues || c.work.kind == pp::work::idle) continue;
      const pp::task k = c.work;
      const int x = left + s * slot_w, y = top + r * row_h;
      std::string label = std::string(1, pp::letter(k.kind)) + num(k.microbatch);
      if (dims.virtual_stages > 1) label += "." + num(k.stage / dims.ranks);
      body += "<rect x=\"" + num(x + 1) + "\" y=\"" + num(y + 3) + "\" width=\"" +
              num(pp::duration(k.kind) * slot_w - 2) + "\" height=\"" + num(row_h - 6) + "\" fill=\"" +
              colour(k.kind) + "\" stroke=\"#333333\" stroke-width=\"0.5\" data-op=\"" +
              std::string(1, pp::letter(k.kind)) + "\" data-rank=\"" + num(r) + "\" data-slot=\"" + num(s) +
              "\" data-stage=\"" + num(k.stage) + "\" data-microbatch=\"" + num(k.microbatch) +
              "\"><title>" + label + " (stage " + num(k.stage) + ")</title></rect>\n";
      // white on the two darker fills (I, B), black on the others
      const bool dark = k.kind == pp::work::backward_input || k.kind == pp::work::backward;
      body += "<text x=\"" + num(x + 3) + "\" y=\"" + num(y + row_h / 2 + 4) +
              "\" font-family=\"sans-serif\" font-size=\"" + (label.size() > 3 ? "8" : "10") +
              "\" fill=\"" + (dark ? "#FFFFFF" : "#000000") + "\">" + label + "</text>\n";
    }
  // the transfers: sender's row to receiver's row at the end of the slot
  for (int s = 0; s < t.slots; ++s)
    for (int r = 0; r < t.ranks; ++r) {
      const pp::transfer& x = t(s, r).send;
      if (x.peer < 0) continue;
      const int xe = left + (s + 1) * slot_w - 2;
      body += "<line x1=\"" + num(xe) + "\" y1=\"" + num(top + r * row_h + row_h / 2) + "\" x2=\"" +
              num(xe) + "\" y2=\"" + num(top + x.peer * row_h + row_h / 2) + "\" stroke=\"" +
              (x.gradient ? "#D55E00" : "#555555") + "\" stroke-width=\"1\" opacity=\"0.6\"/>\n";
    }
  // the key
  const int ky = top + t.ranks * row_h + pad;
  int kx = left;
  for (pp::work w : {pp::work::forward, pp::work::backward, pp::work::backward_input, pp::work::backward_weight}) {
    body += "<rect x=\"" + num(kx) + "\" y=\"" + num(ky - 9) + "\" width=\"10\" height=\"10\" fill=\"" +
            colour(w) + "\"/><text x=\"" + num(kx + 14) + "\" y=\"" + num(ky) +
            "\" font-family=\"sans-serif\" font-size=\"10\">" + std::string(1, pp::letter(w)) + "</text>\n";
    kx += 36;
  }
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" +
         num(width) + "\" height=\"" + num(height) + "\" viewBox=\"0 0 " + num(width) + " " + num(height) +
         "\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n" + body + "</svg>\n";
}

}  // namespace spmd::io
