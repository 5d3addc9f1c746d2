// Several threads at once: redistributes (static plans and the per-thread schedule cache of
// dynamic extents), operators, the buffer pool and comm_counter scopes. Each thread's results
// and counts must equal the same work done on one thread. Built in the normal suite and, by
// .ci/sanitize, under ThreadSanitizer, which fails on any data race.
//
// What makes it safe: plans and op resolutions are compile-time constants; the schedule
// cache for dynamic extents and the comm_counter stack are thread_local; the buffer pool's
// shared free list is behind a mutex (sim/buffer.hpp).
#include <catch2/catch.hpp>

#include <cstdint>
#include <thread>
#include <vector>

#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/matmul.hpp"
#include "spmd/runtime/ops/reduction.hpp"
#include "spmd/backends/sim/sim.hpp"

namespace {

using namespace spmd;
namespace sim = spmd::sim;

using M = mesh<2, 2>;
using X = layout<M, placements<shard<0>, shard<1>>, extents<6, 5>>;
using Xd = layout<M, placements<shard<0>, shard<1>>, extents<dyn, 5>>;  // cached schedules
using W = layout<M, placements<replicate, replicate>, extents<5, 3>>;

struct outcome {
  std::vector<float> gathered, partial_back, product, sums, dynamic;
  index_t collectives = 0, inner_collectives = 0, bytes = 0;
  bool operator==(const outcome&) const = default;
};

outcome work(int seed) {
  std::vector<float> g(30), w(15);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((static_cast<int>(i) * 7 + seed) % 11) - 5;
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>((static_cast<int>(i) + seed) % 5) - 2;
  outcome o;
  sim::comm_counter outer;
  const auto x = sim::distribute_tensor<X>(g);
  o.gathered = x.redistribute<placements<replicate, replicate>>().full_tensor();
  o.partial_back = x.redistribute<placements<partial<>, shard<0>>>()
                       .redistribute<placements<shard<1>, replicate>>()
                       .full_tensor();
  {
    sim::comm_counter inner;  // nested scope: sees only what runs inside it
    const auto y = sim::matmul(x, sim::distribute_tensor<W>(w));
    o.product = y.full_tensor();
    o.sums = sim::sum<1>(sim::relu(x) + x).full_tensor();
    o.inner_collectives = inner.total();
  }
  const auto xd = sim::distribute_tensor(g, Xd{extents<dyn, 5>(6)});
  o.dynamic = xd.template redistribute<placements<replicate, shard<0>>>().full_tensor();
  o.collectives = outer.total();
  o.bytes = outer.bytes();
  return o;
}

}  // namespace

TEST_CASE("redistributes, operators and counters from several threads at once", "[threads]") {
  constexpr int threads = 4, rounds = 25;
  std::vector<outcome> want;
  for (int t = 0; t < threads; ++t) want.push_back(work(t));
  REQUIRE(want[0].collectives > 0);
  REQUIRE(want[0].inner_collectives < want[0].collectives);

  std::vector<int> mismatches(threads, 0);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int r = 0; r < rounds; ++r)
        if (!(work(t) == want[static_cast<std::size_t>(t)])) ++mismatches[static_cast<std::size_t>(t)];
    });
  for (auto& th : pool) th.join();
  for (int t = 0; t < threads; ++t) {
    INFO("thread " << t);
    CHECK(mismatches[static_cast<std::size_t>(t)] == 0);
  }
}
