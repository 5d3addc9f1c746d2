// spmd/io/cost_file.hpp — the automatic sharding search's cost model as a file: written by
// bench/auto_calibrate from what it measured on a machine, read by `spmd-plan auto --cost` and
// by programs (docs/auto.md).
//
//   {"mesh": [2, 4],
//    "links": [{"alpha_s": 1.2e-05, "beta_s_per_byte": 2.1e-10}, {...}],   one per mesh dim
//    "flops_per_s": 8.9e+10, "memory_bytes_per_s": 1.3e+10}
//
// Every field but "mesh" is optional (a missing one keeps autoshard::cost_model's default);
// an unknown field, a negative or non-finite number, or a mesh other than the one searched is
// refused with a message naming it.
#pragma once

#include <charconv>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

#include "spmd/autoshard/cost.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/host/output_file.hpp"
#include "spmd/io/json.hpp"

namespace spmd::io {

namespace cost_file_detail {

inline double number(const json::value& v, const std::string& path, const std::string& field) {
  double x = 0;
  const char* end = v.text.data() + v.text.size();
  const auto r = std::from_chars(v.text.data(), end, x);
  if (v.type != json::value::kind::number || r.ec != std::errc{} || r.ptr != end || !std::isfinite(x) || x < 0)
    throw std::invalid_argument(path + ": \"" + field + "\" should be a number >= 0, got " +
                                (v.type == json::value::kind::number ? v.text : std::string("something else")));
  return x;
}

inline std::string text_of(double x) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", x);
  return b;
}

}  // namespace cost_file_detail

/// The cost model in `path`, measured on `mesh` (a file of another mesh is refused: its links
/// are another machine's dims).
inline autoshard::cost_model load_cost_model(const std::string& path, const mesh_shape_vec& mesh) {
  using namespace cost_file_detail;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::invalid_argument(path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  json::value doc;
  try {
    doc = json::parse(ss.str());
  } catch (const json::error& e) {
    throw std::invalid_argument(path + ": not JSON (" + e.what() + ")");
  }
  if (!doc.is_object()) throw std::invalid_argument(path + ": should be a JSON object");
  autoshard::cost_model cm{};
  const json::value* m = doc.find("mesh");
  if (m == nullptr || !m->is_array()) throw std::invalid_argument(path + ": needs \"mesh\": the mesh it was measured on, e.g. [2, 4]");
  bool same = static_cast<int>(m->items.size()) == mesh.size();
  for (int d = 0; same && d < mesh.size(); ++d)
    same = m->items[static_cast<std::size_t>(d)].is_size() && static_cast<index_t>(m->items[static_cast<std::size_t>(d)].as_size()) == mesh[d];
  if (!same) {
    std::string seen;
    json::put(seen, *m);
    throw std::invalid_argument(path + ": measured on mesh " + seen + ", not the mesh searched");
  }
  for (const json::member& f : doc.members) {
    if (f.key == "mesh") continue;
    if (f.key == "flops_per_s") cm.flops_per_s = number(f.val, path, f.key);
    else if (f.key == "memory_bytes_per_s") cm.memory_bytes_per_s = number(f.val, path, f.key);
    else if (f.key == "links") {
      if (!f.val.is_array() || static_cast<int>(f.val.items.size()) != mesh.size())
        throw std::invalid_argument(path + ": \"links\" should list one {alpha_s, beta_s_per_byte} per mesh dim");
      for (const json::value& l : f.val.items) {
        autoshard::link k{};
        if (!l.is_object()) throw std::invalid_argument(path + ": a link should be {\"alpha_s\": ..., \"beta_s_per_byte\": ...}");
        for (const json::member& x : l.members) {
          if (x.key == "alpha_s") k.alpha_s = number(x.val, path, "links.alpha_s");
          else if (x.key == "beta_s_per_byte") k.beta_s_per_byte = number(x.val, path, "links.beta_s_per_byte");
          else throw std::invalid_argument(path + ": a link has no field \"" + x.key + "\"");
        }
        cm.links.push_back(k);
      }
    } else {
      throw std::invalid_argument(path + ": unknown field \"" + f.key +
                                  "\" (the fields are mesh, links, flops_per_s, memory_bytes_per_s)");
    }
    if (!(cm.flops_per_s > 0) || !(cm.memory_bytes_per_s > 0))
      throw std::invalid_argument(path + ": a rate must be > 0");
  }
  return cm;
}

/// Writes cm, measured on `mesh`, to `path` (replacing it whole or not at all).
inline void save_cost_model(const std::string& path, const autoshard::cost_model& cm, const mesh_shape_vec& mesh) {
  using namespace cost_file_detail;
  std::string out = "{\"mesh\": [";
  for (int d = 0; d < mesh.size(); ++d) out += (d ? ", " : "") + std::to_string(mesh[d]);
  out += "],\n \"links\": [";
  for (int d = 0; d < mesh.size(); ++d) {
    const autoshard::link l = cm.on(d);
    out += std::string(d ? ",\n           " : "") + "{\"alpha_s\": " + text_of(l.alpha_s) +
           ", \"beta_s_per_byte\": " + text_of(l.beta_s_per_byte) + "}";
  }
  out += "],\n \"flops_per_s\": " + text_of(cm.flops_per_s) + ",\n \"memory_bytes_per_s\": " +
         text_of(cm.memory_bytes_per_s) + "}\n";
  host::atomic_file f = host::atomic_file::create(path, static_cast<index_t>(out.size()));
  f.write(out.data(), out.size(), 0);
  f.commit();
}

}  // namespace spmd::io
