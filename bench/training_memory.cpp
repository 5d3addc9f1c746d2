// bench/training_memory — what a rank holds to train under DDP and under FSDP (issue 24,
// item 6): parameters + gradients + AdamW's state, per rank, on 8 simulated ranks; FSDP's peak
// adds the unit whose parameters are gathered. The bound: FSDP ≤ DDP / dp + one unit's
// unsharded parameters.
//
//   meson compile -C build training_memory && build/bench/training_memory
#include <algorithm>
#include <cstdio>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/data_parallel/ddp.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"
#include "spmd/runtime/optim.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;

constexpr index_t dp = 8, width = 512, batch = 64;
using M = mesh<dp>;

std::vector<float> values(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  unsigned s = seed * 2654435761u + 7;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>(s >> 9) % 2001 - 1000) * 1e-5f;
  }
  return v;
}

struct measured {
  std::size_t steady = 0;  // after the step, gradients still held: the most of any rank
  std::size_t peak = 0;    // steady + the largest gathered unit (FSDP)
  std::size_t unit = 0;    // one unit's unsharded parameters (FSDP)
};

template <bool Fsdp>
measured run() {
  using P = std::conditional_t<Fsdp, placements<shard<0>>, placements<replicate>>;
  using LW = layout<M, P, extents<width, width>>;
  using LB = layout<M, P, extents<width>>;
  auto w1 = rt::requires_grad(sim::distribute_tensor<LW>(values(width * width, 1)), "w1");
  auto b1 = rt::requires_grad(sim::distribute_tensor<LB>(values(width, 2)), "b1");
  auto w2 = rt::requires_grad(sim::distribute_tensor<LW>(values(width * width, 3)), "w2");
  auto b2 = rt::requires_grad(sim::distribute_tensor<LB>(values(width, 4)), "b2");
  auto w3 = rt::requires_grad(sim::distribute_tensor<LW>(values(width * width, 5)), "w3");
  auto b3 = rt::requires_grad(sim::distribute_tensor<LB>(values(width, 6)), "b3");
  rt::adamw opt({.lr = 1e-3}, w1, b1, w2, b2, w3, b3);
  measured m;
  for (int step = 0; step < 2; ++step) {
    const auto x = sim::distribute_tensor<layout<M, placements<shard<0>>, extents<batch, width>>>(values(batch * width, 10 + step));
    std::size_t gathered = 0;
    if constexpr (Fsdp) {
      auto u1 = rt::fully_shard<0>(w1, b1), u2 = rt::fully_shard<0>(w2, b2), u3 = rt::fully_shard<0>(w3, b3);
      auto layer = [&](auto& unit, const auto& in) {
        return unit.forward([&](const auto& w, const auto& b) {
          for (index_t r = 0; r < dp; ++r) gathered = std::max(gathered, unit.gathered_bytes(r));
          return rt::relu(rt::linear(in, w, b));
        });
      };
      auto h = layer(u3, layer(u2, layer(u1, rt::as_variable(x))));
      rt::mean<>(h * h).backward();
      m.unit = gathered;
    } else {
      auto model = rt::ddp<0>(w1, b1, w2, b2, w3, b3);
      const auto [a1, c1, a2, c2, a3, c3] = model.params();
      auto h = rt::relu(rt::linear(rt::relu(rt::linear(rt::relu(rt::linear(rt::as_variable(x), a1, c1)), a2, c2)), a3, c3));
      rt::mean<>(h * h).backward();
    }
    opt.step();
    std::size_t most = 0;
    for (index_t r = 0; r < dp; ++r) most = std::max(most, opt.bytes_of_rank(r).total());
    m.steady = most;
    m.peak = most + gathered;
    opt.zero_grad();
  }
  return m;
}

}  // namespace

int main() {
  const measured ddp = run<false>();
  const measured fsdp = run<true>();
  const double mib = 1 << 20;
  std::printf("# 3 layers of %lld x %lld (+ bias), f32, AdamW, dp = %lld simulated ranks\n",
              static_cast<long long>(width), static_cast<long long>(width), static_cast<long long>(dp));
  std::printf("%-6s %16s %16s %18s\n", "", "steady MiB/rank", "peak MiB/rank", "one unit gathered");
  std::printf("%-6s %16.3f %16.3f %18s\n", "DDP", ddp.steady / mib, ddp.peak / mib, "-");
  std::printf("%-6s %16.3f %16.3f %18.3f\n", "FSDP", fsdp.steady / mib, fsdp.peak / mib, fsdp.unit / mib);
  const double bound = static_cast<double>(ddp.steady) / dp + static_cast<double>(fsdp.unit);
  std::printf("bound (DDP / dp + one unit): %.3f MiB; FSDP's peak is %s it\n", bound / mib,
              fsdp.peak <= bound ? "within" : "ABOVE");
  std::printf("RESULT fsdp_bytes_per_rank=%zu ddp_bytes_per_rank=%zu fsdp_peak_bytes=%zu fsdp_bound_bytes=%.0f\n",
              fsdp.steady, ddp.steady, fsdp.peak, bound);
  return fsdp.peak <= bound ? 0 : 1;
}
