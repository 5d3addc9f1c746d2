// tools/auto_command.cpp — `spmd-plan auto`: every tensor's placements chosen by the exact search
// (spmd/autoshard/search.hpp) for a training step given as a graph file, its predicted time,
// and the hand-written plans beside it, costed by the same model (docs/auto.md).
//
//   spmd-plan auto --mesh 2x4 --graph mlp.json [--memory BYTES] [--fix 'w1=S(0),R;b1=R,R'] [--cost FILE] [--json]
//
// The graph file:
//   {"tensors": {"x": [16, 32], "w1": [64, 32], ...},      shapes of the inputs and parameters
//    "params": ["w1", ...],                               the trained ones (the rest are data)
//    "ops": [{"op": "matmul_t", "in": ["x", "w1"], "out": "h"}, ...],   spmd-plan explain's ops
//    "loss": "y"}                                         where the backward starts
// The operators may be listed in any order that has no cycle; they run in dependency order.
#include "auto_command.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_out.hpp"
#include "op_catalog.hpp"
#include "spmd/autoshard/search.hpp"
#include "spmd/io/cost_file.hpp"
#include "spmd/io/placement_format.hpp"
#include "spmd/io/placement_text.hpp"

namespace {

namespace as = spmd::autoshard;
using json = nlohmann::ordered_json;

/// A graph read from a file: the search's graph and each tensor's name.
struct named_graph {
  as::graph g;
  std::vector<std::string> names;
  std::vector<std::string> op_names;  // per operator of g: the file's op name
};

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

spmd::shape_vec shape_from(const json& v, const std::string& name) {
  if (!v.is_array() || v.empty() || v.size() > static_cast<std::size_t>(spmd::max_tensor_dims))
    throw std::invalid_argument("tensor " + in_quotes(name) + ": give its shape as a list of 1 to 8 sizes, e.g. [16, 32]");
  spmd::shape_vec s{};
  for (const json& e : v) {
    if (!e.is_number_integer() || e.get<long long>() < 1)
      throw std::invalid_argument("tensor " + in_quotes(name) + ": its sizes must be whole numbers >= 1, got " + v.dump());
    s.push_back(e.get<spmd::index_t>());
  }
  return s;
}

named_graph read_graph(const std::string& path, const spmd::mesh_shape_vec& mesh) {
  // a regular file of sensible size (not a device or a FIFO, which would read forever)
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec))
    throw std::invalid_argument("--graph " + path + ": not a regular file that can be read");
  if (std::filesystem::file_size(path, ec) > (64u << 20))
    throw std::invalid_argument("--graph " + path + ": larger than 64 MiB; a step's graph is far smaller");
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--graph " + path + ": cannot be read");
  json doc;
  try {
    doc = json::parse(in);
  } catch (const json::parse_error& e) {
    throw std::invalid_argument("--graph " + path + ": not JSON (" + e.what() + ")");
  }
  const auto need = [&](const char* key, bool (json::*is)() const noexcept, const char* what) -> const json& {
    if (!doc.is_object() || !doc.contains(key) || !(doc[key].*is)())
      throw std::invalid_argument("--graph " + path + ": needs \"" + key + "\": " + what);
    return doc[key];
  };
  const json& tensors = need("tensors", &json::is_object, "the shapes of the inputs and parameters, {\"x\": [16, 32], ...}");
  const json& params = need("params", &json::is_array, "the names of the parameters, [\"w1\", ...]");
  const json& ops = need("ops", &json::is_array, "the operators, [{\"op\": \"matmul_t\", \"in\": [\"x\", \"w1\"], \"out\": \"h\"}, ...]");
  const json& loss = need("loss", &json::is_string, "the name of the tensor whose gradient starts the backward");

  named_graph ng{as::graph{mesh}, {}, {}};
  std::map<std::string, int> id;
  for (const auto& [name, shape] : tensors.items()) {
    id[name] = ng.g.add_tensor(shape_from(shape, name), as::tensor_kind::data);
    ng.names.push_back(name);
  }
  for (const json& p : params) {
    if (!p.is_string() || !id.count(p.get<std::string>()))
      throw std::invalid_argument("params: " + p.dump() + " is not a tensor of \"tensors\"");
    ng.g.tensors[static_cast<std::size_t>(id[p.get<std::string>()])].kind = as::tensor_kind::param;
  }
  // the operators: each's inputs and output, checked, then run in dependency order
  struct op_text {
    std::string op, out;
    std::vector<std::string> in;
  };
  std::vector<op_text> list;
  std::map<std::string, int> made_by;
  for (std::size_t k = 0; k < ops.size(); ++k) {
    const json& o = ops[k];
    const std::string where = "op " + std::to_string(k);
    if (!o.is_object() || !o.contains("op") || !o["op"].is_string() || !o.contains("in") || !o["in"].is_array() ||
        !o.contains("out") || !o["out"].is_string())
      throw std::invalid_argument(where + ": give {\"op\": NAME, \"in\": [TENSOR, ...], \"out\": TENSOR}, got " + o.dump());
    op_text t{o["op"].get<std::string>(), o["out"].get<std::string>(), {}};
    for (const json& i : o["in"]) {
      if (!i.is_string()) throw std::invalid_argument(where + ": its inputs are tensor names, got " + i.dump());
      t.in.push_back(i.get<std::string>());
    }
    if (id.count(t.out))
      throw std::invalid_argument(where + " (" + t.op + ") makes " + in_quotes(t.out) + ", which \"tensors\" already gives");
    if (made_by.count(t.out))
      throw std::invalid_argument(where + " (" + t.op + ") makes " + in_quotes(t.out) + ", which op " +
                                  std::to_string(made_by[t.out]) + " makes too");
    made_by[t.out] = static_cast<int>(k);
    list.push_back(t);
  }
  for (std::size_t k = 0; k < list.size(); ++k)
    for (const std::string& i : list[k].in)
      if (!id.count(i) && !made_by.count(i))
        throw std::invalid_argument("op " + std::to_string(k) + " (" + list[k].op + ") reads " + in_quotes(i) +
                                    ", which no op makes and \"tensors\" does not give (a tensor with no producer)");
  std::vector<bool> done(list.size(), false);
  for (std::size_t placed = 0; placed < list.size();) {
    bool progress = false;
    for (std::size_t k = 0; k < list.size(); ++k) {
      if (done[k]) continue;
      bool ready = true;
      for (const std::string& i : list[k].in) ready = ready && id.count(i);
      if (!ready) continue;
      const op_text& t = list[k];
      const std::string where = "op " + std::to_string(k) + " (" + t.op + ")";
      const catalog::op_entry& e = [&]() -> const catalog::op_entry& {
        try {
          return catalog::find(t.op);
        } catch (const std::invalid_argument& x) {
          std::string what = x.what();
          if (const std::size_t at = what.find(" (or give --einsum)"); at != std::string::npos) what.erase(at);
          throw std::invalid_argument("op " + std::to_string(k) + ": " + what);
        }
      }();
      if (static_cast<int>(t.in.size()) != e.inputs)
        throw std::invalid_argument(where + " takes " + std::to_string(e.inputs) + " inputs, " +
                                    std::to_string(t.in.size()) + " given");
      spmd::svec<int, spmd::ops::max_op_inputs> in{};
      spmd::svec<spmd::shape_vec, spmd::ops::max_op_inputs> shapes{};
      for (const std::string& i : t.in) {
        in.push_back(id[i]);
        shapes.push_back(ng.g.tensors[static_cast<std::size_t>(id[i])].shape);
      }
      if (shapes[0].size() < e.min_rank)
        throw std::invalid_argument(where + " (" + e.summary + ") needs a first input of at least " +
                                    std::to_string(e.min_rank) + " dims, " + in_quotes(t.in[0]) + " has " +
                                    std::to_string(shapes[0].size()));
      spmd::shape_vec out{};
      try {
        out = e.out_shape(shapes);
      } catch (const std::invalid_argument& x) {
        throw std::invalid_argument(where + ": the shapes do not fit: " + x.what());
      }
      const spmd::ops::op_rule rule = e.rule(ng.g.context_of(in, out, as::bytes_of(out)));
      id[t.out] = ng.g.add_op(rule, in, out);
      ng.names.push_back(t.out);
      ng.op_names.push_back(t.op);
      done[k] = true;
      ++placed;
      progress = true;
    }
    if (!progress) {
      std::string cycle;
      for (std::size_t k = 0; k < list.size(); ++k)
        if (!done[k]) cycle += (cycle.empty() ? "" : ", ") + std::string("op ") + std::to_string(k) + " (" + in_quotes(list[k].out) + ")";
      throw std::invalid_argument("the ops form a cycle: " + cycle +
                                  " cannot run, each waiting (directly or through the others) for one of their outputs");
    }
  }
  if (!id.count(loss.get<std::string>()))
    throw std::invalid_argument("loss " + in_quotes(loss.get<std::string>()) + " is not a tensor of the graph");
  ng.g.loss = id[loss.get<std::string>()];
  return ng;
}

/// --fix 'NAME=PLACEMENTS;...'
as::pins parse_fix(const std::string& text, const named_graph& ng) {
  as::pins p;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ';')) {
    if (item.find_first_not_of(" \t") == std::string::npos) continue;
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) throw std::invalid_argument("--fix " + in_quotes(item) + ": give NAME=PLACEMENTS, e.g. 'w1=S(0),R'");
    std::string name = item.substr(0, eq);
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    int t = -1;
    for (std::size_t k = 0; k < ng.names.size(); ++k)
      if (ng.names[k] == name) t = static_cast<int>(k);
    if (t < 0) throw std::invalid_argument("--fix: " + in_quotes(name) + " is not a tensor of the graph");
    const spmd::placement_vec pl = spmd::parse_placements(item.substr(eq + 1));
    p.pin(t, spmd::checked_spec(ng.g.mesh, pl, ng.g.tensors[static_cast<std::size_t>(t)].shape.size()), ng.g.tensors.size());
  }
  return p;
}

/// The hand-written plans: each pins the parameters' layouts at rest and the data's (the
/// activations are left to the search). Megatron's roles: the parameters of matmul_t (and
/// matmul) products alternate column- and row-parallel in the order the products run; a 1-d
/// parameter added right after a product follows it (split with a column-parallel one,
/// replicated after a row-parallel one); any other parameter is replicated.
struct baseline {
  std::string name;
  as::pins pins;
};

std::vector<baseline> baselines(const named_graph& ng) {
  const as::graph& g = ng.g;
  const int dims = g.mesh.size();
  const std::size_t nt = g.tensors.size();
  // each parameter's tensor-parallel split: the tensor dim (or -1: replicated)
  std::vector<int> tp_dim(nt, -1);
  int products = 0;
  std::vector<int> role_of_tensor(nt, 0);  // +1 column-parallel output, -1 row-parallel, 0 none
  for (std::size_t j = 0; j < g.ops.size(); ++j) {
    const as::op_node& op = g.ops[j];
    const std::string& n = ng.op_names[j];
    if ((n == "matmul_t" || n == "matmul") && op.in.size() == 2 &&
        g.tensors[static_cast<std::size_t>(op.in[1])].kind == as::tensor_kind::param) {
      const bool column = products++ % 2 == 0;
      const bool t = n == "matmul_t";  // W (out, in) for matmul_t, (in, out) for matmul
      tp_dim[static_cast<std::size_t>(op.in[1])] = column ? (t ? 0 : 1) : (t ? 1 : 0);
      role_of_tensor[static_cast<std::size_t>(op.out)] = column ? 1 : -1;
    } else if (n == "add" && op.in.size() == 2) {
      const int a = op.in[0], b = op.in[1];
      if (g.tensors[static_cast<std::size_t>(b)].kind == as::tensor_kind::param &&
          g.tensors[static_cast<std::size_t>(b)].shape.size() == 1 && role_of_tensor[static_cast<std::size_t>(a)] == 1)
        tp_dim[static_cast<std::size_t>(b)] = 0;
    }
  }
  // A plan: placement(m, t) for every parameter and data tensor t on mesh dim m.
  const auto make = [&](const std::string& name, auto placement) {
    baseline b{name, {}};
    for (std::size_t t = 0; t < nt; ++t) {
      const as::tensor_node& tn = g.tensors[t];
      if (tn.kind == as::tensor_kind::activation) continue;
      spmd::placement_vec p{};
      for (int m = 0; m < dims; ++m) p.push_back(placement(m, t));
      const spmd::spec_result r = spmd::make_spec(g.mesh, p, tn.shape.size());
      if (r.ok()) b.pins.pin(static_cast<int>(t), r.spec, nt);
    }
    return b;
  };
  const auto is_param = [&](std::size_t t) { return g.tensors[t].kind == as::tensor_kind::param; };
  const auto tp = [&](std::size_t t) { return tp_dim[t] >= 0 ? spmd::make_shard(tp_dim[t]) : spmd::make_replicate(); };
  std::vector<baseline> out;
  // replicate: every tensor whole on every rank, activations included
  baseline rep{"replicate", {}};
  for (std::size_t t = 0; t < nt; ++t) {
    spmd::placement_vec p{};
    for (int m = 0; m < dims; ++m) p.push_back(spmd::make_replicate());
    rep.pins.pin(static_cast<int>(t), spmd::make_spec(g.mesh, p, g.tensors[t].shape.size()).spec, nt);
  }
  out.push_back(rep);
  // FSDP over every mesh dim: the parameters Shard(0) at rest, the batch (data dim 0) split
  out.push_back(make("fsdp", [&](int, std::size_t) { return spmd::make_shard(0); }));
  // Megatron over every mesh dim: the parameters split by their roles, the data whole
  out.push_back(make("megatron", [&](int, std::size_t t) { return is_param(t) ? tp(t) : spmd::make_replicate(); }));
  // FSDP on mesh dim 0, Megatron on the others
  if (dims >= 2)
    out.push_back(make("fsdp_tp", [&](int m, std::size_t t) {
      if (m == 0) return spmd::make_shard(0);
      return is_param(t) ? tp(t) : spmd::make_replicate();
    }));
  return out;
}

std::string seconds(double s) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", s);
  return b;
}

}  // namespace

CLI::App* add_auto_command(CLI::App& app, auto_options& o) {
  CLI::App* cmd = app.add_subcommand(
      "auto", "Choose every tensor's placements for a training step (exact search under a cost model)");
  cmd->add_option("--mesh", o.mesh, "Mesh shape: sizes >= 1 joined by 'x', e.g. 2x4")->required();
  cmd->add_option("--graph", o.graph,
                  "The step as JSON: {\"tensors\": {NAME: SHAPE}, \"params\": [NAME], \"ops\": [{\"op\", \"in\", "
                  "\"out\"}], \"loss\": NAME}")
      ->required();
  cmd->add_option("--memory", o.memory, "Bytes a rank may hold (parameters, gradients, optimizer state, activations)");
  cmd->add_option("--fix", o.fix, "Pinned placements, 'NAME=PLACEMENTS;...', e.g. 'w1=S(0),R;b1=R,R'");
  cmd->add_option("--cost", o.cost,
                  "The cost model measured on this machine (bench/auto_calibrate writes it); default: docs/auto.md's");
  cmd->add_flag("--json", o.json, "Print one JSON object");
  return cmd;
}

int run_auto(const auto_options& o) {
  const spmd::mesh_shape_vec mesh = spmd::parse_mesh(o.mesh);
  const named_graph ng = read_graph(o.graph, mesh);
  as::cost_model cm = o.cost.empty() ? as::cost_model{} : spmd::io::load_cost_model(o.cost, mesh);
  if (o.memory) {
    if (!(*o.memory > 0) || !std::isfinite(*o.memory))
      throw std::invalid_argument("--memory " + seconds(*o.memory) + ": give a number of bytes > 0");
    cm.memory_budget = *o.memory;
  }
  const as::pins pins = parse_fix(o.fix, ng);
  const as::solution s = as::search(ng.g, cm, pins);
  if (s.error == as::search_error::over_budget) {
    char b[96];
    std::snprintf(b, sizeof b, "--memory %.0f: no assignment fits; the least memory a rank needs is %.0f bytes", *o.memory,
                  s.min_memory);
    throw std::invalid_argument(b);
  }
  if (!s.ok())
    throw std::invalid_argument(std::string(as::describe(s.error)) +
                                (s.bad_op >= 0 ? " (op making " + in_quotes(ng.names[static_cast<std::size_t>(ng.g.ops[static_cast<std::size_t>(s.bad_op)].out)]) + ")" : ""));
  as::cost_model open = cm;
  open.memory_budget = std::numeric_limits<double>::infinity();
  std::vector<std::pair<std::string, as::solution>> base;
  for (const baseline& b : baselines(ng)) base.emplace_back(b.name, as::search(ng.g, open, b.pins));

  if (o.json) {
    json j;
    j["mesh"] = spmd_plan::json_list(mesh);
    json t = json::object();
    for (std::size_t k = 0; k < ng.names.size(); ++k) t[ng.names[k]] = spmd::placement_strings(s.layouts[k]);
    j["tensors"] = t;
    j["compute_s"] = s.compute_s;
    j["comm_s"] = s.comm_s;
    j["step_s"] = s.step_s();
    j["memory_bytes"] = s.memory_bytes;
    json b = json::object();
    for (const auto& [name, r] : base) {
      if (!r.ok()) {
        b[name] = nullptr;
        continue;
      }
      json x;
      x["step_s"] = r.step_s();
      x["memory_bytes"] = r.memory_bytes;
      b[name] = x;
    }
    j["baselines"] = b;
    std::cout << j.dump() << '\n';
    return 0;
  }
  std::printf("mesh %s: a step takes %s s (compute %s s, communication %s s in %d collectives), %.0f bytes a rank\n",
              spmd::format_mesh(mesh).c_str(), seconds(s.step_s()).c_str(), seconds(s.compute_s).c_str(),
              seconds(s.comm_s).c_str(), s.collectives.total(), s.memory_bytes);
  std::printf("\n%-16s %-8s %-16s %s\n", "tensor", "kind", "shape", "placements");
  for (std::size_t k = 0; k < ng.names.size(); ++k) {
    const as::tensor_node& tn = ng.g.tensors[k];
    std::string shape;
    for (const spmd::index_t d : tn.shape) shape += (shape.empty() ? "" : ",") + std::to_string(d);
    const char* kind = tn.kind == as::tensor_kind::param ? "param" : tn.kind == as::tensor_kind::data ? "data" : "act";
    std::printf("%-16s %-8s %-16s %s\n", ng.names[k].c_str(), kind, shape.c_str(), spmd::format_placements(s.layouts[k]).c_str());
  }
  std::printf("\nhand-written plans under the same model (parameters and data pinned, the rest searched):\n");
  for (const auto& [name, r] : base) {
    if (!r.ok()) {
      std::printf("  %-10s does not apply (%s)\n", name.c_str(), as::describe(r.error));
      continue;
    }
    std::printf("  %-10s %s s (%.3gx the search's), %.0f bytes a rank\n", name.c_str(), seconds(r.step_s()).c_str(),
                r.step_s() / s.step_s(), r.memory_bytes);
  }
  return 0;
}
