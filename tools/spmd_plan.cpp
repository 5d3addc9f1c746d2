// spmd-plan — inspect spmd layouts and redistribute plans from the command line, and run them.
//
//   spmd-plan layout --mesh 2x4 --shape 10,5 --placements 'S(0),S(0)' [--json] [--svg FILE]
//   spmd-plan plan   --mesh 2x2x2 --shape 8,8,8 --from 'S(0),S(1),S(2)' --to 'S(2),S(1),S(0)'
//                    [--dtype f32|f64|i32|i64|bf16] [--json] [--svg FILE] (the pictures: spmd/io/svg.hpp)
//   spmd-plan run    (the same options; --dtype f32|f64|i32|i64; --backend sim|mpi|cuda): G[i] = i
//                    distributed with --from, redistributed to --to in the simulation backend,
//                    under `mpirun -np N spmd-plan run --backend mpi` by N processes (the
//                    first prints), or with every rank on this machine's GPU; every rank's data
//   spmd-plan explain --mesh 2x4 --op matmul_t --input 'S(0),R:16,32' --input 'R,S(0):64,32'
//                    [--out PLACEMENTS] [--einsum TEXT] [--all] [--json]: an operator's sharding
//                    candidates, their costs and the choice (explain_command.cpp)
//   spmd-plan rand   --mesh 2x4 --shape 10,5 --placements 'S(0),R' --seed 42 [--offset 0]
//                    [--dist uniform|normal] [--dtype f32|f64|bf16|f16] [--json]: every rank's
//                    block of a random tensor and the generator's offset after the call
//                    (rand_command.cpp)
//   spmd-plan load   FILE --tensor NAME --mesh 2x4 --placements 'S(0),R' [--json] | FILE --list:
//                    what every rank would load of a safetensors checkpoint (load_command.cpp)
//   spmd-plan auto   --mesh 2x4 --graph STEP.json [--memory BYTES] [--fix 'w1=S(0),R;...'] [--json]:
//                    every tensor's placements chosen by the exact search, the predicted step,
//                    and the hand-written plans under the same model (auto_command.cpp)
//   spmd-plan pipeline --schedule gpipe|1f1b|interleaved|zb --stages 4 --microbatches 8
//                    [--virtual 2] [--svg FILE] [--json]: a pipeline schedule's table of slots
//                    by ranks, its bubble and peak (pipeline_command.cpp)
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
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <cstdio>
#include <span>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "spmd/core/layout_spec.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/plan.hpp"
#include "spmd/host/distribute.hpp"
#include "spmd/host/output_file.hpp"
#include "spmd/backends/sim/execute.hpp"
#ifdef SPMD_PLAN_CUDA
#include "spmd/backends/cuda/cuda.hpp"
#endif
#ifdef SPMD_PLAN_MPI
#include "spmd/backends/mpi/mpi.hpp"
#endif
#include "spmd/io/svg.hpp"
#include "spmd/io/visualize.hpp"

#include "auto_command.hpp"
#include "element_limit.hpp"
#include "explain_command.hpp"
#include "json_out.hpp"
#include "load_command.hpp"
#include "pipeline_command.hpp"
#include "rand_command.hpp"

namespace {

constexpr int exit_ok = 0;
constexpr int exit_internal = 1;
constexpr int exit_bad_input = 2;

using spmd_plan::json_list;
using spmd_plan::json_number;

// ---------------------------------------------------------------------------
// layout
// ---------------------------------------------------------------------------

struct layout_options {
  std::string mesh;
  std::string shape;
  std::string placements;
  std::string svg;
  bool json = false;
};

/// Writes `text` to `file` whole (host/output_file.hpp: a regular file replaced, a FIFO or
/// /dev/stdout written through), or throws std::invalid_argument naming the file (exit 2).
void write_file(const std::string& file, const std::string& text) {
  try {
    spmd::host::write_text(file, text);
  } catch (const spmd::host::file_error& e) {
    throw std::invalid_argument(std::string("--svg ") + e.what());
  }
}

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
  cmd->add_option("--svg", o.svg, "Also draw the layout into this SVG file (blocks coloured by rank)");
  return cmd;
}

int run_layout(const layout_options& o) {
  const spmd::mesh_shape_vec mesh = spmd::parse_mesh(o.mesh);
  const spmd::shape_vec shape = spmd::parse_shape(o.shape);
  const spmd::placement_vec raw = spmd::parse_placements(o.placements);
  const spmd::layout_spec spec = spmd::checked_spec(mesh, raw, shape.size());
  spmd_tools::check_ranks("layout", o.mesh, spec.mesh_size(), spmd_tools::max_listed_ranks);
  if (!o.svg.empty()) write_file(o.svg, spmd::io::svg(spec, shape));

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

// ---------------------------------------------------------------------------
// plan
// ---------------------------------------------------------------------------

struct plan_options {
  std::string mesh;
  std::string shape;
  std::string from;
  std::string to;
  std::string dtype = "f32";
  std::string backend = "sim";  // run only
  std::string svg;              // plan only
  bool json = false;
};

void add_transition_options(CLI::App* cmd, plan_options& o) {
  cmd->add_option("--mesh", o.mesh, "Mesh shape: sizes >= 1 joined by 'x', e.g. 2x4")->required();
  cmd->add_option("--shape", o.shape, "Global tensor shape: sizes >= 0 joined by ','")->required();
  cmd->add_option("--from", o.from, "Source placements (same grammar as layout --placements)")
      ->required();
  cmd->add_option("--to", o.to, "Target placements")->required();
  cmd->add_flag("--json", o.json, "Print one JSON object");
}

CLI::App* add_plan_command(CLI::App& app, plan_options& o) {
  CLI::App* cmd = app.add_subcommand(
      "plan", "Show the redistribute plan between two layouts: steps, bytes, counts, trace, cost");
  add_transition_options(cmd, o);
  cmd->add_option("--dtype", o.dtype, "Element type for byte counts: f32, f64, i32, i64, bf16");
  cmd->add_option("--svg", o.svg, "Also draw the plan into this SVG file (one panel per step)");
  return cmd;
}

spmd::index_t dtype_bytes(const std::string& dtype) {
  if (dtype == "f32" || dtype == "i32") return 4;
  if (dtype == "f64" || dtype == "i64") return 8;
  if (dtype == "bf16") return 2;
  throw std::invalid_argument("bad dtype '" + dtype + "': expected f32, f64, i32, i64 or bf16");
}

/// Source and target layouts of a transition, validated, and the best plan between them.
struct transition {
  spmd::layout_spec from, to;
  spmd::shape_vec shape;
  spmd::plan plan;
};

transition plan_transition(const plan_options& o, spmd::index_t element_bytes) {
  const spmd::mesh_shape_vec mesh = spmd::parse_mesh(o.mesh);
  const spmd::shape_vec shape = spmd::parse_shape(o.shape);
  transition t{spmd::checked_spec(mesh, spmd::parse_placements(o.from), shape.size()),
               spmd::checked_spec(mesh, spmd::parse_placements(o.to), shape.size()), shape, {}};
  double bytes = static_cast<double>(element_bytes);
  for (spmd::index_t e : shape) bytes *= static_cast<double>(e);
  const spmd::plan_result r = spmd::make_plan(t.from, t.to, bytes);
  if (!r.ok())
    throw std::invalid_argument("no plan from '" + o.from + "' to '" + o.to + "': " +
                                spmd::describe(r.error));
  t.plan = r.value;
  return t;
}

std::string state_text(const spmd::layout_spec& s) {
  spmd::plan_text t{};
  spmd::put_state(t, s);
  return std::string(t.view());
}

/// Tensor dims a step shards or unshards (sorted): e.g. [0, 2] for S(0) -> S(2).
nlohmann::ordered_json step_tensor_dims(const spmd::plan_step& s) {
  unsigned dims = 0;
  for (int m = 0; m < s.from.mesh.size(); ++m) {
    if (!spmd::in_mask(s.mesh_dims, m)) continue;
    for (const spmd::placement& p : {s.from.placements[m], s.to.placements[m]})
      if (p.is_shard()) dims |= 1u << p.dim;
  }
  auto a = nlohmann::ordered_json::array();
  for (int d = 0; d < spmd::max_tensor_dims; ++d)
    if (dims >> d & 1u) a.push_back(d);
  return a;
}

/// The fields `plan` prints and `run` repeats.
nlohmann::ordered_json plan_json(const transition& t, spmd::index_t element_bytes) {
  nlohmann::ordered_json out;
  auto steps = nlohmann::ordered_json::array();
  for (const spmd::plan_step& s : t.plan.steps) {
    nlohmann::ordered_json j;
    j["kind"] = spmd::step_kind_name(s.kind);
    auto mesh_dims = nlohmann::ordered_json::array();
    for (int m = 0; m < s.from.mesh.size(); ++m)
      if (spmd::in_mask(s.mesh_dims, m)) mesh_dims.push_back(m);
    j["mesh_dims"] = std::move(mesh_dims);
    j["tensor_dims"] = step_tensor_dims(s);
    j["from"] = state_text(s.from);
    j["to"] = state_text(s.to);
    j["bytes_per_rank"] = spmd::traffic(s, t.shape, element_bytes).max_rank_bytes;
    steps.push_back(std::move(j));
  }
  out["steps"] = std::move(steps);
  nlohmann::ordered_json counts;
  for (int k = 0; k < spmd::collective_kind_count; ++k) {
    const auto kind = static_cast<spmd::step_kind>(k);
    counts[spmd::step_kind_name(kind)] = t.plan.count(kind);
  }
  out["counts"] = std::move(counts);
  out["trace"] = std::string(spmd::trace(t.plan, t.from, t.to).view());
  out["cost"] = t.plan.cost_us;
  return out;
}

std::string plan_text_report(const transition& t, spmd::index_t element_bytes) {
  std::string text = "trace: " + std::string(spmd::trace(t.plan, t.from, t.to).view()) + "\n";
  char cost[64];
  std::snprintf(cost, sizeof cost, "%.3f", t.plan.cost_us);
  text += "cost:  " + std::string(cost) + " us (model: 6.6 us per collective + 0.6 us per hop + bytes at 88 GB/s)\n";
  text += "collectives: " + std::to_string(t.plan.collectives()) + "\n\n";
  std::vector<std::vector<std::string>> rows{{"step", "kind", "mesh dims", "from", "to", "bytes/rank"}};
  int i = 0;
  for (const spmd::plan_step& s : t.plan.steps) {
    std::string dims;
    for (int m = 0; m < s.from.mesh.size(); ++m)
      if (spmd::in_mask(s.mesh_dims, m)) dims += (dims.empty() ? "" : ",") + std::to_string(m);
    rows.push_back({std::to_string(i++), spmd::step_kind_name(s.kind), dims, state_text(s.from),
                    state_text(s.to),
                    std::to_string(spmd::traffic(s, t.shape, element_bytes).max_rank_bytes)});
  }
  if (t.plan.steps.empty()) return text + "no steps: the layouts hold the same blocks\n";
  return text + spmd::io_detail::render_table(rows, {true, false, false, false, false, true});
}

int run_plan(const plan_options& o) {
  const spmd::index_t element_bytes = dtype_bytes(o.dtype);
  const transition t = plan_transition(o, element_bytes);
  if (!o.svg.empty()) write_file(o.svg, spmd::io::svg(t.plan, t.from, t.to, t.shape, element_bytes));
  if (o.json)
    std::cout << plan_json(t, element_bytes).dump() << '\n';
  else
    std::cout << plan_text_report(t, element_bytes);
  return exit_ok;
}

// ---------------------------------------------------------------------------
// run
// ---------------------------------------------------------------------------

CLI::App* add_run_command(CLI::App& app, plan_options& o) {
  CLI::App* cmd = app.add_subcommand(
      "run", "Redistribute G[i] = i (row-major index) in the simulation backend (or with MPI, "
             "under mpirun) and print every rank's data");
  add_transition_options(cmd, o);
  cmd->add_option("--dtype", o.dtype, "Element type: f32, f64, i32, i64");
  cmd->add_option("--backend", o.backend,
                  "sim (every rank in this process), mpi (one process per rank: "
                  "mpirun -np <mesh size> spmd-plan run --backend mpi ...) or cuda (every rank "
                  "on this machine's GPU)");
  return cmd;
}

/// Ranks listed by `run` (each prints its data).
constexpr spmd::index_t max_run_elements = spmd::index_t{1} << 24;

/// What run prints: the plan's fields, then every rank's coord, local shape and data.
template <class T>
void print_run(const plan_options& o, const transition& t, spmd::index_t element_bytes,
               const spmd::host::local_set<T>& out) {
  nlohmann::ordered_json j = plan_json(t, element_bytes);
  auto ranks = nlohmann::ordered_json::array();
  for (spmd::index_t r = 0; r < t.to.mesh_size(); ++r)
    ranks.push_back(spmd_plan::rank_json(r, spmd::unravel(t.to.mesh, r), out.shape(r), out.data(r), out.size(r)));
  j["ranks"] = std::move(ranks);
  if (o.json) {
    std::cout << j.dump() << '\n';
    return;
  }
  std::cout << plan_text_report(t, element_bytes) + "\n" + spmd_plan::ranks_text(j["ranks"]);
}

/// run --backend mpi: this process runs its rank (its rank in MPI_COMM_WORLD = its mesh
/// index); the first process prints what --backend sim prints. Bad input was refused
/// before MPI starts; a wrong process count exits 2 on every process; a failure after
/// that ends the whole job (MPI_Abort), never leaving the other processes waiting.
template <class T>
int run_mpi(const plan_options& o, const transition& t, const std::vector<T>& global) {
#ifdef SPMD_PLAN_MPI
  static spmd::mpi::environment env;  // finalised at exit
  const spmd::index_t n = t.from.mesh_size();
  if (env.size() != n) {
    if (env.rank() == 0)
      std::cerr << "spmd-plan: run --backend mpi: the mesh " << o.mesh << " has " << n
                << " ranks but " << env.size() << " processes were started; launch with "
                << "mpirun -np " << n << '\n';
    return exit_bad_input;
  }
  try {
    const spmd::host::local_set<T> in =
        spmd::host::distribute<T>(std::span<const T>(global), t.from, t.shape, spmd::mpi::held_of(n));
    const spmd::host::local_set<T> out = spmd::mpi::execute<T>(t.plan, t.shape, in);
    const spmd::host::local_set<T> all = spmd::mpi::gather_locals(out, t.to, t.shape);
    if (env.rank() == 0) print_run(o, t, static_cast<spmd::index_t>(sizeof(T)), all);
    std::cout.flush();
  } catch (const std::exception& e) {
    spmd::mpi::end_job("spmd-plan: ", e.what(), exit_internal);
  }
  return exit_ok;
#else
  (void)t;
  (void)global;
  throw std::invalid_argument("backend '" + o.backend + "': this spmd-plan was built without MPI "
                              "(meson -Dmpi=enabled needs OpenMPI)");
#endif
}

/// run --backend cuda: every rank on this process's GPU; prints what --backend sim prints.
/// No GPU is bad input for this command (exit 2, saying so).
template <class T>
int run_cuda(const plan_options& o, const transition& t, const std::vector<T>& global) {
#ifdef SPMD_PLAN_CUDA
  try {
    spmd::cuda::require_device("spmd-plan: run --backend cuda");
  } catch (const spmd::cuda::no_device& e) {
    std::cerr << e.what() << '\n';
    return exit_bad_input;
  }
  const spmd::host::local_set<T> in =
      spmd::host::distribute<T>(std::span<const T>(global), t.from, t.shape);
  const spmd::host::local_set<T> out =
      spmd::cuda::download(spmd::cuda::execute<T>(t.plan, t.shape, spmd::cuda::upload(in)));
  print_run(o, t, static_cast<spmd::index_t>(sizeof(T)), out);
  return exit_ok;
#else
  (void)t;
  (void)global;
  throw std::invalid_argument("backend '" + o.backend + "': this spmd-plan was built without CUDA "
                              "(meson -Dcuda=enabled needs nvcc)");
#endif
}

template <class T>
int run_as(const plan_options& o) {
  const spmd::index_t element_bytes = sizeof(T);
  const transition t = plan_transition(o, element_bytes);
  spmd_tools::check_ranks("run", o.mesh, t.from.mesh_size(), spmd_tools::max_data_ranks);
  const spmd::index_t total = spmd_tools::elements_within(t.shape, t.from.mesh_size(), max_run_elements);
  if (total < 0)
    throw std::invalid_argument(
        spmd_tools::too_large("run", o.shape, o.mesh, t.from.mesh_size(), max_run_elements));
  std::vector<T> global(static_cast<std::size_t>(total));
  for (spmd::index_t i = 0; i < total; ++i) global[static_cast<std::size_t>(i)] = static_cast<T>(i);
  if (o.backend == "mpi") return run_mpi<T>(o, t, global);
  if (o.backend == "cuda") return run_cuda<T>(o, t, global);
  spmd::sim::local_set<T> in = spmd::sim::distribute<T>(std::span<const T>(global), t.from, t.shape);
  const spmd::sim::local_set<T> out = spmd::sim::execute<T>(t.plan, t.shape, std::move(in));
  print_run(o, t, element_bytes, out);
  return exit_ok;
}

int run_run(const plan_options& o) {
  if (o.backend != "sim" && o.backend != "mpi" && o.backend != "cuda")
    throw std::invalid_argument("bad backend '" + o.backend + "': run takes sim, mpi or cuda");
  if (o.dtype == "f32") return run_as<float>(o);
  if (o.dtype == "f64") return run_as<double>(o);
  if (o.dtype == "i32") return run_as<std::int32_t>(o);
  if (o.dtype == "i64") return run_as<std::int64_t>(o);
  throw std::invalid_argument("bad dtype '" + o.dtype + "': run takes f32, f64, i32 or i64");
}

}  // namespace

/// The whole tool; main() below, or a fuzz harness (tests/fuzz/cli.cpp, which defines
/// SPMD_PLAN_NO_MAIN), calls it. Exit codes: 0 ok, 2 bad input, 1 internal error.
int spmd_plan_main(int argc, char** argv) {
  CLI::App app{"spmd-plan: inspect spmd layouts and redistribute plans, and run them in the simulation backend",
               "spmd-plan"};
  // No require_subcommand(): an unknown word then is an "unexpected argument" naming it.
  layout_options layout_opts;
  CLI::App* layout_cmd = add_layout_command(app, layout_opts);
  plan_options plan_opts;
  CLI::App* plan_cmd = add_plan_command(app, plan_opts);
  plan_options run_opts;
  CLI::App* run_cmd = add_run_command(app, run_opts);
  explain_options explain_opts;
  CLI::App* explain_cmd = add_explain_command(app, explain_opts);
  rand_options rand_opts;
  CLI::App* rand_cmd = add_rand_command(app, rand_opts);
  load_options load_opts;
  CLI::App* load_cmd = add_load_command(app, load_opts);
  auto_options auto_opts;
  CLI::App* auto_cmd = add_auto_command(app, auto_opts);
  pipeline_options pipeline_opts;
  CLI::App* pipeline_cmd = add_pipeline_command(app, pipeline_opts);

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
    if (plan_cmd->parsed()) return run_plan(plan_opts);
    if (run_cmd->parsed()) return run_run(run_opts);
    if (explain_cmd->parsed()) return run_explain(explain_opts);
    if (rand_cmd->parsed()) return run_rand(rand_opts);
    if (load_cmd->parsed()) return run_load(load_opts);
    if (auto_cmd->parsed()) return run_auto(auto_opts);
    if (pipeline_cmd->parsed()) return run_pipeline(pipeline_opts);
    std::cerr << "spmd-plan: a subcommand is required (layout, plan, run, explain, rand, load, auto, "
                 "pipeline)\n"
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

#ifndef SPMD_PLAN_NO_MAIN
int main(int argc, char** argv) { return spmd_plan_main(argc, argv); }
#endif
