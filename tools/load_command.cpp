// tools/load_command.cpp — `spmd-plan load`: a safetensors checkpoint as spmd reads it.
//
//   spmd-plan load FILE --list [--json]              the tensors: name, dtype, shape, bytes
//   spmd-plan load FILE --tensor NAME --mesh 2x4 --placements 'S(0),R' [--json]
//       every rank's local as run prints it (rank, coord, local_shape, data), each read from
//       the memory-mapped file with only that rank's bytes (spmd/io/safetensors.hpp); Partial
//       placements hold the value on each group's first member and the identity elsewhere
//       (sum, product), as a checkpoint loads into them.
// A file that cannot be read, a missing tensor or a bad layout exits 2 with the reason.
#include "load_command.hpp"

#include <cstdint>
#include <iostream>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "spmd/host/distribute.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/io/safetensors.hpp"

#include "element_limit.hpp"
#include "json_out.hpp"

namespace {

/// The most elements (all ranks' locals together) load prints, as for run.
constexpr spmd::index_t max_load_elements = spmd::index_t{1} << 24;

int list(const load_options& o, const spmd::io::safetensors_file& f) {
  nlohmann::ordered_json j;
  j["file"] = o.file;
  auto tensors = nlohmann::ordered_json::array();
  std::string text;
  for (const spmd::io::tensor_entry& e : f.entries()) {
    nlohmann::ordered_json t;
    t["name"] = e.name;
    t["dtype"] = spmd::io::dtype_name(e.type);
    t["shape"] = e.shape;
    t["bytes"] = e.end - e.begin;
    text += e.name + " " + spmd::io::dtype_name(e.type) + " " + t["shape"].dump() + " " +
            std::to_string(e.end - e.begin) + " bytes\n";
    tensors.push_back(std::move(t));
  }
  j["tensors"] = std::move(tensors);
  std::cout << (o.json ? j.dump() + "\n" : text);
  return 0;
}

template <class T>
int show(const load_options& o, const spmd::io::safetensors_file& f, const spmd::io::tensor_entry& e) {
  spmd::shape_vec global{};
  for (const spmd::index_t x : e.shape) global.push_back(x);
  const spmd::layout_spec spec =
      spmd::checked_spec(spmd::parse_mesh(o.mesh), spmd::parse_placements(o.placements), global.size());
  spmd_tools::check_ranks("load", o.mesh, spec.mesh_size(), spmd_tools::max_data_ranks);
  if (spmd_tools::elements_within(global, spec.mesh_size(), max_load_elements) < 0)
    throw std::invalid_argument("tensor '" + o.tensor + "' on mesh '" + o.mesh + "' is too large to print (" +
                                std::to_string(e.elements()) + " elements on " + std::to_string(spec.mesh_size()) +
                                " ranks; at most " + std::to_string(max_load_elements) + " in all)");
  const spmd::reduce_op op = spmd::host::detail::partial_of(spec).op;
  nlohmann::ordered_json j;
  j["file"] = o.file;
  j["tensor"] = o.tensor;
  j["dtype"] = spmd::io::dtype_name(e.type);
  j["mesh"] = spmd_plan::json_list(spec.mesh);
  j["shape"] = spmd_plan::json_list(global);
  j["placements"] = spmd::placement_strings(spec);
  auto ranks = nlohmann::ordered_json::array();
  std::vector<T> local;
  for (spmd::index_t r = 0; r < spec.mesh_size(); ++r) {
    const spmd::local_box box = spmd::box_at(spec, global, spmd::unravel(spec.mesh, r));
    local.assign(static_cast<std::size_t>(spmd::host::shape_elems(box.shape)), T{});
    if (spmd::host::holds_identity(spec, r)) std::fill(local.begin(), local.end(), spmd::host::identity<T>(op));
    else f.read_box<T>(o.tensor, e.shape, box, local.data());
    ranks.push_back(spmd_plan::rank_json(r, spmd::unravel(spec.mesh, r), box.shape, local.data(),
                                         static_cast<spmd::index_t>(local.size())));
  }
  j["ranks"] = std::move(ranks);
  if (o.json) {
    std::cout << j.dump() << '\n';
    return 0;
  }
  std::string text = o.file + ": " + o.tensor + " " + spmd::io::dtype_name(e.type) + " " + j["shape"].dump() +
                     " on mesh " + spmd::format_mesh(spec.mesh) + ", placements " + spmd::format_placements(spec) + "\n";
  std::cout << text + spmd_plan::ranks_text(j["ranks"]);
  return 0;
}

}  // namespace

CLI::App* add_load_command(CLI::App& app, load_options& o) {
  CLI::App* cmd = app.add_subcommand(
      "load", "What every rank would load of a safetensors checkpoint under a layout (only its own "
              "bytes), or the file's tensors (--list)");
  cmd->add_option("file", o.file, "A safetensors file")->required();
  cmd->add_option("--tensor", o.tensor, "The tensor to load");
  cmd->add_option("--mesh", o.mesh, "Mesh shape: sizes >= 1 joined by 'x', e.g. 2x4");
  cmd->add_option("--placements", o.placements, "One placement per mesh dim (as for layout)");
  cmd->add_flag("--list", o.list, "List the tensors: name, dtype, shape, bytes");
  cmd->add_flag("--json", o.json, "Print one JSON object");
  return cmd;
}

int run_load(const load_options& o) {
  if (!o.list && (o.tensor.empty() || o.mesh.empty() || o.placements.empty()))
    throw std::invalid_argument("load needs --list, or --tensor, --mesh and --placements");
  try {
    const spmd::io::safetensors_file f(o.file);
    if (o.list) return list(o, f);
    const spmd::io::tensor_entry& e = f.at(o.tensor);
    switch (e.type) {
      case spmd::io::dtype::f32: return show<float>(o, f, e);
      case spmd::io::dtype::f64: return show<double>(o, f, e);
      case spmd::io::dtype::bf16: return show<spmd::bfloat16>(o, f, e);
      case spmd::io::dtype::f16: return show<spmd::float16>(o, f, e);
      case spmd::io::dtype::i32: return show<std::int32_t>(o, f, e);
      case spmd::io::dtype::i64: return show<std::int64_t>(o, f, e);
    }
  } catch (const spmd::io::checkpoint_error& err) {
    throw std::invalid_argument(err.what());  // a bad file is bad input: exit 2
  }
  return 1;
}
