// spmd-plan — inspect spmd layouts from the command line.
//
//   spmd-plan layout --mesh 2x4 --shape 10,5 --placements 'S(0),S(0)' [--json]
//
// Exit codes: 0 success, 2 bad input (usage errors, unparsable or invalid layouts), 1 an
// unexpected internal failure. Errors go to stderr; stdout then stays empty.
//
// Each subcommand is a pair: add_<name>_command() declares its options on the CLI11 app,
// run_<name>() does the work once parsing succeeded. New subcommands (plan, run) follow suit.
#include <exception>
#include <iostream>
#include <stdexcept>
#include <string>
#include <utility>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "spmd/core/layout_spec.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/io/visualize.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_internal = 1;
constexpr int exit_bad_input = 2;

/// The most ranks `layout` lists (one line or JSON object each).
constexpr spmd::index_t max_listed_ranks = spmd::index_t{1} << 20;

template <int Cap>
nlohmann::ordered_json json_list(const spmd::svec<spmd::index_t, Cap>& v) {
  auto a = nlohmann::ordered_json::array();
  for (spmd::index_t x : v) a.push_back(x);
  return a;
}

// ---------------------------------------------------------------------------
// layout
// ---------------------------------------------------------------------------

struct layout_options {
  std::string mesh;
  std::string shape;
  std::string placements;
  bool json = false;
};

CLI::App* add_layout_command(CLI::App& app, layout_options& o) {
  CLI::App* cmd = app.add_subcommand(
      "layout", "Show which block of the global tensor each rank holds under a layout");
  cmd->add_option("--mesh", o.mesh, "Mesh shape: sizes >= 1 joined by 'x', e.g. 2x4")
      ->required();
  cmd->add_option("--shape", o.shape,
                  "Global tensor shape: sizes >= 0 joined by ',', e.g. 10,5 ('' = 0-d)")
      ->required();
  cmd->add_option("--placements", o.placements,
                  "One placement per mesh dim, joined by ',': R, S(d), S(d)[k], P, P(op) "
                  "with op in sum|avg|max|min|product")
      ->required();
  cmd->add_flag("--json", o.json, "Print one JSON object instead of the table and grid");
  return cmd;
}

int run_layout(const layout_options& o) {
  const spmd::mesh_shape_vec mesh = spmd::parse_mesh(o.mesh);
  const spmd::shape_vec shape = spmd::parse_shape(o.shape);
  const spmd::placement_vec raw = spmd::parse_placements(o.placements);
  const spmd::layout_spec spec = spmd::checked_spec(mesh, raw, shape.size());
  if (spec.mesh_size() > max_listed_ranks)
    throw std::invalid_argument("mesh '" + o.mesh + "' has " + std::to_string(spec.mesh_size()) +
                                " ranks; spmd-plan layout lists at most " +
                                std::to_string(max_listed_ranks));

  if (o.json) {
    nlohmann::ordered_json out;
    out["mesh"] = json_list(mesh);
    out["shape"] = json_list(shape);
    out["placements"] = spmd::placement_strings(spec);
    auto ranks = nlohmann::ordered_json::array();
    for (spmd::index_t rank = 0; rank < spec.mesh_size(); ++rank) {
      const spmd::coord_vec coord = spmd::unravel(spec.mesh, rank);
      const spmd::local_box box = spmd::box_at(spec, shape, coord);
      nlohmann::ordered_json r;
      r["rank"] = rank;
      r["coord"] = json_list(coord);
      r["local_shape"] = json_list(box.shape);
      r["offset"] = json_list(box.offset);
      ranks.push_back(std::move(r));
    }
    out["ranks"] = std::move(ranks);
    std::cout << out.dump() << '\n';
    return exit_ok;
  }

  // Build all of it first, so that a failure leaves stdout empty.
  std::string text = "mesh " + spmd::format_mesh(mesh) + " (" +
                     std::to_string(spec.mesh_size()) +
                     (spec.mesh_size() == 1 ? " rank" : " ranks") + "), shape " +
                     spmd::format_list(shape) + ", placements " +
                     spmd::format_placements(spec) + "\n\n" + spmd::layout_table(spec, shape);
  if (shape.size() <= 2) text += "\n" + spmd::visualize(spec, shape);
  std::cout << text;
  return exit_ok;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"spmd-plan: inspect spmd layouts (which rank holds which block of a tensor)",
               "spmd-plan"};
  // No require_subcommand(): an unknown word then is an "unexpected argument" naming it.
  layout_options layout_opts;
  CLI::App* layout_cmd = add_layout_command(app, layout_opts);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and friends exit 0 with their text on stdout; every usage error exits 2.
    if (e.get_exit_code() == 0) return app.exit(e);
    std::cerr << "spmd-plan: " << e.what() << "\nRun 'spmd-plan --help' for more information.\n";
    return exit_bad_input;
  }

  try {
    if (layout_cmd->parsed()) return run_layout(layout_opts);
    std::cerr << "spmd-plan: a subcommand is required (layout)\n"
                 "Run 'spmd-plan --help' for more information.\n";
    return exit_bad_input;
  } catch (const std::invalid_argument& e) {
    std::cerr << "spmd-plan: " << e.what() << '\n';
    return exit_bad_input;
  } catch (const std::exception& e) {
    std::cerr << "spmd-plan: internal error: " << e.what() << '\n';
    return exit_internal;
  }
}
