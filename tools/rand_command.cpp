// tools/rand_command.cpp — `spmd-plan rand`: the locals every rank computes of rand / randn
// under a layout (each rank only its own block, spmd/host/random.hpp), in the form
// `run` prints, and the generator's offset after the call. The global tensor they assemble
// to is the same for every mesh and placement list (docs/random.md).
//
//   spmd-plan rand --mesh 2x4 --shape 10,5 --placements 'S(0),R' --seed 42 --json
//   {"mesh":[2,4],"shape":[10,5],"placements":["S(0)","R"],"dtype":"f32","dist":"uniform",
//    "seed":42,"start_offset":0,"ranks":[{"rank":0,"coord":[0,0],"local_shape":[5,5],
//    "data":[...]},...],"offset":52}
#include "rand_command.hpp"

#include <iostream>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "spmd/host/random.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/random/generator.hpp"

#include "element_limit.hpp"
#include "json_out.hpp"

namespace {

/// The most elements (all ranks' locals together) rand prints, as for run.
constexpr spmd::index_t max_rand_elements = spmd::index_t{1} << 24;

/// An unsigned 64-bit integer written in decimal digits; anything else is bad input.
std::uint64_t parse_u64(const std::string& text, const char* what) {
  const std::string msg = std::string("bad ") + what + " '" + text + "': an integer from 0 to 18446744073709551615";
  if (text.empty() || text.size() > 20 || text.find_first_not_of("0123456789") != std::string::npos)
    throw std::invalid_argument(msg);
  std::uint64_t v = 0;
  for (const char c : text) {
    const std::uint64_t d = static_cast<std::uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) throw std::invalid_argument(msg);
    v = v * 10 + d;
  }
  return v;
}

template <class T>
int rand_as(const rand_options& o, const spmd::layout_spec& spec, const spmd::shape_vec& shape,
            spmd::random::distribution dist, std::uint64_t seed, std::uint64_t offset) {
  spmd::generator g(seed);
  g.set_offset(offset);
  std::uint64_t n = 1;
  for (const spmd::index_t e : shape) n *= static_cast<std::uint64_t>(e);
  const spmd::generator_state s = g.take(spmd::random::words_for(dist, sizeof(T), n));
  const spmd::random::draw d{dist, s.seed, s.offset, 0.0, 1.0, 0};
  const spmd::host::local_set<T> locals =
      spmd::host::random_locals<T>(spec, shape, d, {0, spec.mesh_size()});

  nlohmann::ordered_json j;
  j["mesh"] = spmd_plan::json_list(spec.mesh);
  j["shape"] = spmd_plan::json_list(shape);
  j["placements"] = spmd::placement_strings(spec);
  j["dtype"] = o.dtype;
  j["dist"] = o.dist;
  j["seed"] = seed;
  j["start_offset"] = offset;
  auto ranks = nlohmann::ordered_json::array();
  for (spmd::index_t r = 0; r < spec.mesh_size(); ++r)
    ranks.push_back(spmd_plan::rank_json(r, spmd::unravel(spec.mesh, r), locals.shape(r), locals.data(r),
                                         locals.size(r)));
  j["ranks"] = std::move(ranks);
  j["offset"] = g.offset();
  if (o.json) {
    std::cout << j.dump() << '\n';
    return 0;
  }
  std::string text = "rand " + o.dist + " " + o.dtype + ", seed " + std::to_string(seed) +
                     ", offset " + std::to_string(offset) + ": mesh " + spmd::format_mesh(spec.mesh) +
                     ", shape " + spmd::format_list(shape) + ", placements " +
                     spmd::format_placements(spec) + "\n";
  text += spmd_plan::ranks_text(j["ranks"]);
  text += "offset after: " + std::to_string(g.offset()) + "\n";
  std::cout << text;
  return 0;
}

}  // namespace

CLI::App* add_rand_command(CLI::App& app, rand_options& o) {
  CLI::App* cmd = app.add_subcommand(
      "rand", "Every rank's block of a random tensor (rand or randn) under a layout, and the "
              "generator's offset after the call");
  cmd->add_option("--mesh", o.mesh, "Mesh shape: sizes >= 1 joined by 'x', e.g. 2x4")->required();
  cmd->add_option("--shape", o.shape, "Global tensor shape: sizes >= 0 joined by ','")->required();
  cmd->add_option("--placements", o.placements, "One placement per mesh dim (as for layout)")
      ->required();
  cmd->add_option("--seed", o.seed, "The generator's seed (an integer >= 0)")->required();
  cmd->add_option("--offset", o.offset,
                  "The generator's offset in 32-bit words before the call (a multiple of 4)");
  cmd->add_option("--dist", o.dist, "uniform (rand: U[0, 1)) or normal (randn: N(0, 1))");
  cmd->add_option("--dtype", o.dtype, "Element type: f32, f64, bf16, f16");
  cmd->add_flag("--json", o.json, "Print one JSON object");
  return cmd;
}

int run_rand(const rand_options& o) {
  spmd::random::distribution dist;
  if (o.dist == "uniform") dist = spmd::random::distribution::uniform;
  else if (o.dist == "normal") dist = spmd::random::distribution::normal;
  else throw std::invalid_argument("bad dist '" + o.dist + "': rand takes uniform or normal");
  const std::uint64_t seed = parse_u64(o.seed, "seed"), offset = parse_u64(o.offset, "offset");
  if (offset % 4 != 0)
    throw std::invalid_argument("bad offset " + std::to_string(offset) +
                                ": the generator's offset is a multiple of 4 (whole Philox blocks)");
  const spmd::mesh_shape_vec mesh = spmd::parse_mesh(o.mesh);
  const spmd::shape_vec shape = spmd::parse_shape(o.shape);
  const spmd::layout_spec spec = spmd::checked_spec(mesh, spmd::parse_placements(o.placements), shape.size());
  spmd_tools::check_ranks("rand", o.mesh, spec.mesh_size(), spmd_tools::max_data_ranks);
  if (spmd_tools::elements_within(shape, spec.mesh_size(), max_rand_elements) < 0)
    throw std::invalid_argument(spmd_tools::too_large("rand", o.shape, o.mesh, spec.mesh_size(), max_rand_elements));
  if (o.dtype == "f32") return rand_as<float>(o, spec, shape, dist, seed, offset);
  if (o.dtype == "f64") return rand_as<double>(o, spec, shape, dist, seed, offset);
  if (o.dtype == "bf16") return rand_as<spmd::bfloat16>(o, spec, shape, dist, seed, offset);
  if (o.dtype == "f16") return rand_as<spmd::float16>(o, spec, shape, dist, seed, offset);
  throw std::invalid_argument("bad dtype '" + o.dtype + "': rand takes f32, f64, bf16 or f16");
}
