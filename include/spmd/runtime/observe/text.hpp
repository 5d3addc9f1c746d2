// spmd/runtime/observe/text.hpp — the words of a log line or a trace event: layouts in
// DTensor's trace notation (plan/trace.hpp), plan steps, operator names.
//
//   layout_text(spec, {8, 16}, "f32")   "f32[8, 16] S(0)R on mesh(2, 4)"
//   step_text(step, global, 4)          "all_gather mesh dims {0} 256 B/rank"
//   op_name<ops::matmul_t>()            "matmul_t"
#pragma once

#include <cctype>
#include <string>
#include <string_view>

#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/step.hpp"
#include "spmd/plan/trace.hpp"
#include "spmd/plan/traffic.hpp"

namespace spmd::observe {

inline std::string placements_text(const layout_spec& s) {
  plan_text t{};
  put_state(t, s);
  return std::string(t.view());
}

inline std::string shape_text(const shape_vec& s) {
  std::string t = "[";
  for (int d = 0; d < s.size(); ++d) t += (d ? ", " : "") + std::to_string(s[d]);
  return t + "]";
}

inline std::string mesh_text(const layout_spec& s) {
  std::string t = "mesh(";
  for (int d = 0; d < s.mesh.size(); ++d) t += (d ? ", " : "") + std::to_string(s.mesh[d]);
  return t + ")";
}

inline std::string layout_text(const layout_spec& s, const shape_vec& global, const char* element) {
  return std::string(element) + shape_text(global) + " " + placements_text(s) + " on " + mesh_text(s);
}

inline std::string dims_text(dim_mask m) {
  std::string t = "{";
  bool first = true;
  for (int d = 0; d < 32; ++d)
    if (m & (dim_mask{1} << d)) t += (first ? "" : ", ") + std::to_string(d), first = false;
  return t + "}";
}

/// A step: its kind (the reduction's op for reductions), the mesh dims it changes, and the
/// bytes the busiest rank receives (plan/traffic.hpp: the figures spmd-plan plan prints).
inline std::string step_text(const plan_step& s, const shape_vec& global, index_t element_bytes) {
  std::string t = step_kind_name(s.kind) ? step_kind_name(s.kind) : (s.kind == step_kind::partition ? "partition" : "fill");
  if (s.kind == step_kind::all_reduce || s.kind == step_kind::reduce_scatter) t += std::string("(") + reduce_op_name(s.op) + ")";
  t += " mesh dims " + dims_text(s.mesh_dims);
  if (is_collective(s.kind)) t += " " + std::to_string(traffic(s, global, element_bytes).max_rank_bytes) + " B/rank";
  return t;
}

/// The name of an op type: its own `name` when it has one, else the type's name without
/// namespaces ("matmul_t", "binary<add_fn>").
template <class Op>
std::string op_name() {
  if constexpr (requires { Op::name; }) {
    return Op::name;
  } else {
    std::string_view f = __PRETTY_FUNCTION__;  // "... op_name() [with Op = spmd::ops::x]"
    const std::size_t at = f.find("Op = ");
    if (at == std::string_view::npos) return "op";
    f.remove_prefix(at + 5);
    f = f.substr(0, f.find_first_of(";]"));
    std::string out;
    for (std::size_t i = 0; i < f.size();) {  // drop every "ns::" qualifier
      std::size_t j = i;
      while (j < f.size() && (std::isalnum(static_cast<unsigned char>(f[j])) || f[j] == '_')) ++j;
      if (j + 1 < f.size() && f[j] == ':' && f[j + 1] == ':') {
        i = j + 2;
        continue;
      }
      out.append(f.substr(i, j - i == 0 ? 1 : j - i));
      i = j - i == 0 ? i + 1 : j;
    }
    return out;
  }
}

}  // namespace spmd::observe
