// tools/explain_command.cpp — `spmd-plan explain`: for an operator on given input layouts,
// every candidate strategy the propagation engine considers, its layouts and cost, and the
// one chosen — the same choice the compiler makes for the same layouts (spmd/io/op_explain.hpp).
//
//   spmd-plan explain --mesh 2x4 --op matmul_t --input 'S(0),R:16,32' --input 'R,S(0):64,32'
//   spmd-plan explain --mesh 4 --einsum 'ij->i' --input 'S(1):8,8'       (any einsum rule)
#include "explain_command.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "op_catalog.hpp"
#include "spmd/io/op_explain.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/io/visualize.hpp"

namespace {

spmd::index_t element_bytes(const std::string& dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "f64" || dtype == "i64") return 8;
  if (dtype == "bf16") return 2;
  throw std::invalid_argument("bad dtype '" + dtype + "': expected f32, f64, i32, i64 or bf16");
}

double bytes_of(const spmd::shape_vec& s, spmd::index_t element) {
  double b = static_cast<double>(element);
  for (spmd::index_t e : s) b *= static_cast<double>(e);
  return b;
}

std::string cost_text(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", us);
  return buf;
}

}  // namespace

CLI::App* add_explain_command(CLI::App& app, explain_options& o) {
  CLI::App* cmd = app.add_subcommand(
      "explain", "Show the sharding strategies an operator chooses from, their costs, and the choice");
  cmd->add_option("--mesh", o.mesh, "Mesh shape: sizes >= 1 joined by 'x', e.g. 2x4")->required();
  std::string names;
  for (const catalog::op_entry& e : catalog::ops())
    names += std::string("\n  ") + e.name + ": " + e.summary;
  cmd->add_option("--op", o.op, "Operator, one of:" + names);
  cmd->add_option("--einsum", o.einsum,
                  "Instead of --op: a rule as einsum text, e.g. 'mk,kn->mn' (factors missing from "
                  "the output reduce with sum)");
  cmd->add_option("--input", o.inputs,
                  "An input as PLACEMENTS:SHAPE, e.g. 'S(0),R:16,32' (repeat, in order)")
      ->required();
  cmd->add_option("--out", o.out, "Forced output placements (out_sharding), e.g. 'R,R'");
  cmd->add_option("--dtype", o.dtype, "Element type for byte counts: f32, f64, i32, i64, bf16");
  cmd->add_flag("--all", o.all, "List invalid candidates too, with the reason");
  cmd->add_flag("--json", o.json, "Print one JSON object");
  return cmd;
}

int run_explain(const explain_options& o) {
  if (o.op.empty() == o.einsum.empty())
    throw std::invalid_argument("give exactly one of --op and --einsum");
  const spmd::mesh_shape_vec mesh = spmd::parse_mesh(o.mesh);
  const spmd::index_t elem = element_bytes(o.dtype);

  spmd::ops::op_context c{};
  c.mesh = mesh;
  if (o.inputs.size() > static_cast<std::size_t>(spmd::ops::max_op_inputs))
    throw std::invalid_argument(std::to_string(o.inputs.size()) + " inputs given, at most " +
                                std::to_string(spmd::ops::max_op_inputs));
  for (const std::string& in : o.inputs) {
    const std::size_t colon = in.rfind(':');
    if (colon == std::string::npos)
      throw std::invalid_argument("input '" + in + "' needs PLACEMENTS:SHAPE, e.g. 'S(0),R:16,32'");
    const spmd::shape_vec shape = spmd::parse_shape(in.substr(colon + 1));
    c.in.push_back(spmd::checked_spec(mesh, spmd::parse_placements(in.substr(0, colon)), shape.size()));
    c.in_shape.push_back(shape);
    c.in_bytes.push_back(bytes_of(shape, elem));
  }

  spmd::ops::op_rule rule{};
  std::string name = o.op;
  if (!o.op.empty()) {
    const catalog::op_entry& e = catalog::find(o.op);
    if (static_cast<int>(o.inputs.size()) != e.inputs)
      throw std::invalid_argument("op '" + o.op + "' takes " + std::to_string(e.inputs) +
                                  " inputs, " + std::to_string(o.inputs.size()) + " given");
    if (c.in_shape[0].size() < e.min_rank)
      throw std::invalid_argument("op '" + o.op + "' (" + e.summary + ") needs a first input of at least " +
                                  std::to_string(e.min_rank) + " dims, got " +
                                  std::to_string(c.in_shape[0].size()));
    c.out_shape = e.out_shape(c.in_shape);  // throws, naming the extents, when they do not fit
    rule = e.rule(c);
  } else {
    name = "einsum " + o.einsum;
    rule = spmd::ops::einsum(o.einsum.c_str());
    if (!rule.ok) throw std::invalid_argument("einsum '" + o.einsum + "': " + rule.error);
    if (rule.inputs() != static_cast<int>(o.inputs.size()))
      throw std::invalid_argument("einsum '" + o.einsum + "' has " + std::to_string(rule.inputs()) +
                                  " inputs, " + std::to_string(o.inputs.size()) + " given");
    // Each factor's extent, from the inputs that have it; they must agree.
    spmd::index_t extent[spmd::ops::max_factors];
    for (spmd::index_t& e : extent) e = -1;
    for (int i = 0; i < rule.inputs(); ++i) {
      if (rule.in[i].size() != c.in_shape[i].size())
        throw std::invalid_argument("input " + std::to_string(i) + " has " +
                                    std::to_string(c.in_shape[i].size()) + " dims, the einsum gives it " +
                                    std::to_string(rule.in[i].size()));
      for (int d = 0; d < rule.in[i].size(); ++d) {
        const int f = rule.in[i][d];
        if (f < 0) continue;
        if (extent[f] >= 0 && extent[f] != c.in_shape[i][d])
          throw std::invalid_argument(std::string("factor '") + rule.factors[f].name + "' has extent " +
                                      std::to_string(extent[f]) + " and " + std::to_string(c.in_shape[i][d]));
        extent[f] = c.in_shape[i][d];
      }
    }
    for (std::int8_t f : rule.out) c.out_shape.push_back(f < 0 || extent[f] < 0 ? 1 : extent[f]);
  }
  c.out_bytes = bytes_of(c.out_shape, elem);

  spmd::placement_vec forced{};
  if (!o.out.empty()) {
    forced = spmd::parse_placements(o.out);
    spmd::checked_spec(mesh, forced, c.out_shape.size());  // throws with the reason
  }
  for (int i = 0; i < rule.inputs(); ++i)
    if (rule.in[i].size() != c.in[i].tensor_rank)
      throw std::invalid_argument("input " + std::to_string(i) + " has " +
                                  std::to_string(c.in[i].tensor_rank) + " dims, op '" + name +
                                  "' needs " + std::to_string(rule.in[i].size()));
  const spmd::io::explanation e = spmd::io::explain(rule, c, o.out.empty() ? nullptr : &forced);
  if (!e.result.ok()) throw std::invalid_argument(spmd::ops::describe(e.result.error));

  // Valid candidates by cost (the chosen first), then the invalid ones when --all.
  std::vector<const spmd::io::candidate_row*> rows;
  for (const auto& r : e.rows)
    if (r.valid || o.all) rows.push_back(&r);
  std::stable_sort(rows.begin(), rows.end(), [](const auto* a, const auto* b) {
    if (a->chosen != b->chosen) return a->chosen;
    if (a->valid != b->valid) return a->valid;
    return a->valid && a->cost_us < b->cost_us;
  });

  const spmd::io::candidate_row& chosen = e.rows[static_cast<std::size_t>(e.result.index)];
  if (o.json) {
    nlohmann::ordered_json j;
    j["op"] = name;
    j["mesh"] = spmd::format_mesh(mesh);
    j["out_shape"] = spmd::format_list(c.out_shape);
    j["chosen"] = e.result.index;
    j["rule"] = e.result.costed ? "cheapest" : "inputs as they are";
    j["output"] = o.out.empty() ? chosen.output : spmd::format_placements(forced);
    auto list = nlohmann::ordered_json::array();
    for (const auto* r : rows) {
      nlohmann::ordered_json k;
      k["index"] = r->index;
      k["choice"] = r->choice;
      k["inputs"] = r->inputs;
      k["output"] = r->output;
      k["valid"] = r->valid;
      if (r->valid) k["cost_us"] = r->cost_us;
      else k["why"] = r->why;
      k["chosen"] = r->chosen;
      list.push_back(std::move(k));
    }
    j["candidates"] = std::move(list);
    std::cout << j.dump() << '\n';
    return 0;
  }

  std::string text = name + " on mesh " + spmd::format_mesh(mesh) + ", output shape " +
                     spmd::format_list(c.out_shape) + "\n";
  text += "chosen: #" + std::to_string(e.result.index) + " " + chosen.choice + " -> " +
          (o.out.empty() ? chosen.output : spmd::format_placements(forced)) +
          (e.result.costed ? "  (the cheapest: no candidate takes the inputs as they are)\n"
                           : "  (takes the inputs as they are)\n");
  text += "candidates: " + std::to_string(e.rows.size()) + ", valid " +
          std::to_string(e.valid) + "; cost = planner cost of moving the inputs (us)\n\n";
  std::vector<std::vector<std::string>> table{{"", "#", "choice"}};
  for (int i = 0; i < rule.inputs(); ++i) table[0].push_back("in" + std::to_string(i));
  table[0].push_back("out");
  table[0].push_back("cost");
  for (const auto* r : rows) {
    std::vector<std::string> row{r->chosen ? "*" : "", std::to_string(r->index), r->choice};
    for (const std::string& s : r->inputs) row.push_back(s);
    row.push_back(r->output);
    row.push_back(r->valid ? cost_text(r->cost_us) : "invalid: " + r->why);
    table.push_back(std::move(row));
  }
  std::vector<bool> right(table[0].size(), false);
  right[1] = true;
  text += spmd::io_detail::render_table(table, right);
  std::cout << text;
  return 0;
}
