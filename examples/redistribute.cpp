// The redistribute example of README.md and docs/redistribute.md, built and run by the test
// suite; the docs quote the marked regions (tests/docs/check_snippets.py keeps them equal).
#include <cstdio>
#include <string>
#include <vector>

// [docs:plan]
#include <spmd/plan.hpp>
#include <spmd/backends/sim/sim.hpp>

using M = spmd::mesh<2, 2>;
using E = spmd::extents<8, 8>;
using From = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::shard<0>>, E>;
using To = spmd::layout<M, spmd::placements<spmd::replicate, spmd::replicate>, E>;
using P = spmd::plan_of<From, To, float>;
static_assert(P::collectives() == 1);                // one all_gather over both mesh dims
static_assert(P::trace() == "S(0)[0]S(0)[1]->RR");   // DTensor's trace format
static_assert(P::step(0).mesh_dims == 0b11);
// [/docs:plan]

int main() {
  // [docs:run]
  std::vector<float> g(64);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i);
  auto x = spmd::sim::distribute_tensor<From>(g);
  spmd::sim::comm_counter counter;                   // like DTensor's CommDebugMode
  auto y = x.redistribute<To::placements_type>();    // runs P: exact boxes, no padding
  bool ok = y.full_tensor() == g && counter.count(spmd::step_kind::all_gather) == 1;
  // [/docs:run]
  ok = ok && counter.total() == 1;
  std::printf("%s: %s, %d collective(s), %lld bytes received in all\n", ok ? "PASS" : "FAIL",
              std::string(P::trace().view()).c_str(), static_cast<int>(counter.total()),
              static_cast<long long>(counter.bytes()));
  return ok ? 0 : 1;
}
