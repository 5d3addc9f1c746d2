// spmd/io/op_explain.hpp — why an operator got its sharding: every candidate strategy with its
// layouts, validity and cost, in the order the propagation engine considers them. Host-only
// text for `spmd-plan explain` and for programs that want to print a choice.
//
//   auto rows = spmd::io::explain(rule, context);     // one row per candidate
//   rows[i].chosen, rows[i].cost_us, rows[i].why       // why: "" when valid
//
// The chosen row is exactly what resolve() returns (ops/propagate.hpp) — and therefore what the
// compiler picks for the same layouts and shapes. Costs are the planner's plan costs of the
// inputs' redistributions (and the output's, when forced); invalid candidates say why.
#pragma once

#include <string>
#include <vector>

#include "spmd/io/placement_text.hpp"
#include "spmd/ops/propagate.hpp"

namespace spmd::io {

struct candidate_row {
  index_t index = 0;
  std::string choice;               // per mesh dim: R, S(factor), or P#k (a partial rule)
  std::vector<std::string> inputs;  // each input's placements
  std::string output;
  bool valid = false;
  bool exact = false;               // no input moves
  std::string why;                  // invalid: the reason
  double cost_us = 0;
  bool chosen = false;
};

struct explanation {
  ops::resolution result{};
  std::vector<candidate_row> rows;  // every candidate, in enumeration order
  index_t valid = 0;                // valid candidates
};

/// "m|k" for a candidate's per-mesh-dim choices.
inline std::string choice_text(const ops::op_rule& rule, const ops::candidate& k) {
  std::string s;
  for (int m = 0; m < k.choice.size(); ++m) {
    if (m) s += '|';
    const int c = k.choice[m];
    if (c < 0) s += "R";
    else if (c < rule.factors.size()) s += std::string("S(") + rule.factors[c].name + ")";
    else s += "P#" + std::to_string(c - rule.factors.size());
  }
  return s;
}

inline explanation explain(const ops::op_rule& rule, const ops::op_context& c,
                           const placement_vec* forced = nullptr) {
  explanation e{};
  e.result = ops::resolve(rule, c, forced);
  if (!e.result.ok()) return e;
  const layout_spec* want = e.result.forced ? &e.result.forced_out : nullptr;
  const index_t n = ops::candidate_count(rule, c);
  for (index_t i = 0; i < n; ++i) {
    const ops::candidate k = ops::make_candidate(rule, c, i);
    candidate_row row{};
    row.index = i;
    row.choice = choice_text(rule, k);
    for (const layout_spec& s : k.in) row.inputs.push_back(format_placements(s));
    row.output = format_placements(k.out);
    row.valid = k.valid();
    row.exact = k.exact;
    if (!row.valid) row.why = ops::describe(k.error);
    else row.cost_us = ops::cost_candidate(k, c, want);
    row.chosen = i == e.result.index;
    e.valid += row.valid;
    e.rows.push_back(row);
  }
  return e;
}

}  // namespace spmd::io
