// tests/plan/plan_speed.cpp — run-time planner speed: microseconds per make_plan over every
// pair of layouts of a rank-3 tensor over {R, S(0), S(1), S(2), P(sum), P(max)} per mesh
// dim, on 1-d, 2-d and 3-d meshes. A meson benchmark: `meson test -C build --benchmark
// --suite plan -v` prints the table (the figures in docs/redistribute.md come from here).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <spmd/plan.hpp>
#include <spmd/spmd.hpp>

namespace {

std::vector<spmd::layout_spec> layouts(const std::vector<long>& mesh) {
  const spmd::placement choices[] = {spmd::make_replicate(), spmd::make_shard(0), spmd::make_shard(1),
                                     spmd::make_shard(2), spmd::make_partial(spmd::reduce_op::sum),
                                     spmd::make_partial(spmd::reduce_op::max)};
  spmd::mesh_shape_vec m{};
  for (long s : mesh) m.push_back(s);
  std::vector<spmd::layout_spec> out;
  std::size_t total = 1;
  for (std::size_t i = 0; i < mesh.size(); ++i) total *= 6;
  for (std::size_t code = 0; code < total; ++code) {
    spmd::placement_vec p{};
    for (std::size_t d = 0, c = code; d < mesh.size(); ++d, c /= 6) p.push_back(choices[c % 6]);
    const spmd::spec_result r = spmd::make_spec(m, p, 3);
    if (r.ok()) out.push_back(r.spec);
  }
  return out;
}

}  // namespace

int main() {
  const std::vector<std::vector<long>> meshes = {{2}, {8}, {2, 2}, {2, 4}, {2, 2, 2}, {2, 3, 4}};
  const double bytes = 64.0 * 1024 * 1024;
  std::printf("| mesh | pairs | most states | mean states | most collectives | us per plan |\n");
  std::printf("|---|---|---|---|---|---|\n");
  int failures = 0;
  for (const auto& mesh : meshes) {
    const auto all = layouts(mesh);
    long pairs = 0, states = 0, most = 0, most_coll = 0;
    double checksum = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (const auto& a : all)
      for (const auto& b : all) {
        const spmd::plan_result r = spmd::make_plan(a, b, bytes);
        failures += !r.ok();
        ++pairs;
        states += r.states;
        most = std::max<long>(most, r.states);
        most_coll = std::max<long>(most_coll, r.value.collectives());
        checksum += r.value.cost_us;
      }
    const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
    std::string name;
    for (long s : mesh) name += (name.empty() ? "" : "x") + std::to_string(s);
    std::printf("| %s | %ld | %ld | %.1f | %ld | %.2f |\n", name.c_str(), pairs, most,
                static_cast<double>(states) / static_cast<double>(pairs), most_coll, us / static_cast<double>(pairs));
    if (checksum < 0) std::printf("impossible\n");
  }
  return failures == 0 ? 0 : 1;
}
