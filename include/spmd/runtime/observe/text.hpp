// spmd/runtime/observe/text.hpp — the words of a log line or a trace event: layouts in
// DTensor's trace notation (plan/trace.hpp), plan steps, operator names.
//
//   layout_text(spec, {8, 16}, "f32")   "f32[8, 16] S(0)R on mesh(2, 4)"
//   step_text(step, global, 4)          "all_gather over mesh dims 0,1, 256 B/rank"
//   op_name<ops::matmul_t>()            "matmul_t"
#pragma once

#include <string>
#include <string_view>
#include <utility>

#include "spmd/core/fixed_text.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/step.hpp"
#include "spmd/plan/trace.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/host/text_out.hpp"

namespace spmd::observe {

[[gnu::cold]] inline std::string placements_text(const layout_spec& s) {
  plan_text t{};
  put_state(t, s);
  return std::string(t.view());
}

using host::shape_text;  // "[8, 16]"

[[gnu::cold]] inline std::string mesh_text(const layout_spec& s) {
  host::text_out t;
  t << "mesh(";
  for (int d = 0; d < s.mesh.size(); ++d) t << (d ? ", " : "") << s.mesh[d];
  return std::move(t << ')').str();
}

[[gnu::cold]] inline std::string layout_text(const layout_spec& s, const shape_vec& global, const char* element) {
  host::text_out t;
  t << element << shape_text(global) << ' ' << placements_text(s) << " on " << mesh_text(s);
  return std::move(t).str();
}

[[gnu::cold]] inline std::string dims_text(dim_mask m) {
  host::text_out t;
  t << '{';
  bool first = true;
  for (int d = 0; d < 32; ++d)
    if (m & (dim_mask{1} << d)) t << (first ? "" : ", ") << d, first = false;
  return std::move(t << '}').str();
}

/// The name of a step's kind ("partition" and "fill" for the local ones).
inline const char* step_kind_text(step_kind k) {
  return step_kind_name(k) ? step_kind_name(k) : (k == step_kind::partition ? "partition" : "fill");
}

/// A step as spmd-plan plan's table shows it: its kind (the reduction's op for reductions),
/// the mesh dims it changes ("0,1"), and the bytes the busiest rank receives
/// (plan/traffic.hpp; 0 for a local step) — "all_reduce(sum) over mesh dims 0,1, 96 B/rank".
[[gnu::cold]] inline std::string step_text(const plan_step& s, const shape_vec& global, index_t element_bytes) {
  host::text_out t;
  t << step_kind_text(s.kind);
  if (s.kind == step_kind::all_reduce || s.kind == step_kind::reduce_scatter) t << '(' << reduce_op_name(s.op) << ')';
  t << " over mesh dims ";
  bool first = true;
  for (int d = 0; d < 32; ++d)
    if (s.mesh_dims & (dim_mask{1} << d)) t << (first ? "" : ",") << d, first = false;
  t << ", " << traffic(s, global, element_bytes).max_rank_bytes << " B/rank";
  return std::move(t).str();
}

namespace detail {
/// Characters of an op's name; a longer one (a type with long template arguments) is cut
/// there in the log line, not refused.
inline constexpr int op_name_chars = 256;
/// op_name's text, written by the compiler.
template <class Op>
constexpr fixed_text<op_name_chars> op_name_text() {
  fixed_text<op_name_chars> out;
  if constexpr (requires { Op::name; }) {
    out.put(std::string_view(Op::name));
  } else {
    std::string_view f = __PRETTY_FUNCTION__;  // "... op_name_text() [with Op = spmd::ops::x]"
    const std::size_t at = f.find("Op = ");
    if (at == std::string_view::npos) {
      out.put("op");
      return out;
    }
    f.remove_prefix(at + 5);
    f = f.substr(0, f.find_first_of(";]"));
    const auto word = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'; };
    for (std::size_t i = 0; i < f.size();) {  // drop every "ns::" qualifier
      std::size_t j = i;
      while (j < f.size() && word(f[j])) ++j;
      if (j + 1 < f.size() && f[j] == ':' && f[j + 1] == ':') {
        i = j + 2;
        continue;
      }
      out.put(f.substr(i, j - i == 0 ? 1 : j - i));
      i = j - i == 0 ? i + 1 : j;
    }
  }
  return out;
}
template <class Op>
inline constexpr fixed_text<op_name_chars> op_name_of = op_name_text<Op>();
}  // namespace detail

/// The name of an op type: its own `name` when it has one, else the type's name without
/// namespaces ("matmul_t", "binary<add_fn>"). A constant.
template <class Op>
constexpr std::string_view op_name() {
  return detail::op_name_of<Op>.view();
}

}  // namespace spmd::observe
