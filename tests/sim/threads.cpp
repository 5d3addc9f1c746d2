// Several threads at once: redistributes (static plans and the per-thread schedule cache of
// dynamic extents), operators, the buffer pool and comm_counter scopes. Each thread's results
// and counts must equal the same work done on one thread. Built in the normal suite and, by
// .ci/sanitize, under ThreadSanitizer, which fails on any data race.
//
// What makes it safe: plans and op resolutions are compile-time constants; the schedule
// cache for dynamic extents and the comm_counter stack are thread_local; the buffer pool's
// shared free list is behind a mutex (sim/buffer.hpp).
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdint>
#include <limits>
#include <span>
#include <stdexcept>
#include <thread>
#include <vector>

#include "spmd/core/atomic.hpp"
#include "spmd/runtime/autograd/shared.hpp"
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

// --- the simulation's own threads (spmd::sim::set_threads) ------------------------------
// Large steps and operators run on the simulation's worker threads. The results must be
// the same bits for every thread count: each case runs with 1, 2 and 3 threads and the
// locals of every rank are compared byte for byte (NaN payloads and signed zeros
// included). The sizes are chosen to pass the thresholds that start the threads (4 MiB per
// step, 64 Ki elements per operator).

namespace {

/// Every rank's local, as bytes.
template <class D>
std::vector<unsigned char> bytes_of(const D& x) {
  std::vector<unsigned char> b;
  for (index_t i = 0; i < x.locals().ranks(); ++i) {
    const auto* p = reinterpret_cast<const unsigned char*>(x.locals().data(i));
    b.insert(b.end(), p, p + x.locals().size(i) * static_cast<index_t>(sizeof(*x.locals().data(i))));
  }
  return b;
}

std::vector<std::vector<unsigned char>> large_work() {
  using M8 = mesh<8>;
  using P8 = layout<M8, placements<partial<>>, extents<dyn, dyn>>;
  using S8 = layout<M8, placements<shard<0>>, extents<dyn, dyn>>;
  using Ps = layout<mesh<2, 4>, placements<partial<reduce_op::max>, shard<1>>, extents<512, 256>>;
  using A = layout<M8, placements<shard<0>>, extents<dyn, dyn>>;
  using B = layout<M8, placements<replicate>, extents<dyn, dyn>>;
  const index_t n = 512;
  std::vector<float> g(static_cast<std::size_t>(n * n));
  for (std::size_t i = 0; i < g.size(); ++i)
    g[i] = static_cast<float>(static_cast<int>(i * 2654435761u % 2001) - 1000) * 0.37f;
  g[5] = std::numeric_limits<float>::quiet_NaN();
  g[77] = -0.0f;
  const extents<dyn, dyn> e{n, n};
  std::vector<std::vector<unsigned char>> out;
  const auto p = sim::distribute_tensor<P8>(g, P8{e});
  out.push_back(bytes_of(p.redistribute<placements<replicate>>()));      // P(sum) -> R
  out.push_back(bytes_of(p.redistribute<placements<shard<1>>>()));       // P(sum) -> S(1)
  const auto s = sim::distribute_tensor<S8>(g, S8{e});
  out.push_back(bytes_of(s.redistribute<placements<replicate>>()));      // all_gather
  out.push_back(bytes_of(s.redistribute<placements<shard<1>>>()));       // all_to_all
  out.push_back(bytes_of(s.redistribute<placements<partial<reduce_op::avg>>>()));  // fill
  const auto ps = sim::distribute_tensor<Ps>(std::span<const float>(g).first(512 * 256));
  out.push_back(bytes_of(ps.redistribute<placements<replicate, replicate>>()));  // static
  const auto a = sim::distribute_tensor<A>(g, A{e});
  const auto b = sim::distribute_tensor<B>(std::span<const float>(g).first(512 * 64),
                                           B{extents<dyn, dyn>{512, 64}});
  out.push_back(bytes_of(sim::matmul(a, b)));                               // per-rank gemm
  out.push_back(bytes_of(sim::relu(a) + a));
  return out;
}

}  // namespace

TEST_CASE("results are the same bits for every thread count", "[threads][pool]") {
  const int before = sim::threads();
#if defined(SPMD_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
  // On 1 thread the 8 ranks' products run in turn with BLAS on every core; on 2 and 3 they
  // run at once with BLAS on one thread each (runtime::detail::gemm_one_thread), which puts
  // OpenBLAS's setting back afterwards.
  const int blas_before = openblas_get_num_threads();
#endif
  sim::set_threads(1);
  const auto want = large_work();
  for (int t : {2, 3}) {
    sim::set_threads(t);
    CHECK(sim::threads() == t);
    const auto got = large_work();
    REQUIRE(got.size() == want.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
      INFO("threads " << t << ", case " << k);
      CHECK(got[k] == want[k]);
    }
#if defined(SPMD_HAVE_CBLAS) && defined(OPENBLAS_VERSION)
    CHECK(openblas_get_num_threads() == blas_before);
#endif
  }
  sim::set_threads(before);
}

TEST_CASE("parallel_for: every task once, exceptions rethrown, nesting and bad counts",
          "[threads][pool]") {
  const int before = sim::threads();
  sim::set_threads(3);
  std::vector<std::atomic<int>> hits(1000);
  sim::parallel_for(1000, [&](index_t i) { hits[static_cast<std::size_t>(i)].fetch_add(1); });
  int wrong = 0;
  for (auto& h : hits) wrong += h.load() != 1;
  CHECK(wrong == 0);
  std::atomic<int> inner{0};
  sim::parallel_for(4, [&](index_t) { sim::parallel_for(5, [&](index_t) { inner.fetch_add(1); }); });
  CHECK(inner.load() == 20);
  CHECK_THROWS_WITH(sim::parallel_for(10,
                                      [](index_t i) {
                                        if (i == 7) throw std::runtime_error("task 7 failed");
                                      }),
                    "task 7 failed");
  CHECK_THROWS_WITH(sim::set_threads(0),
                    "spmd::sim::set_threads: 0 is not a thread count from 1 to 1024");
  CHECK(sim::threads() == 3);
  sim::set_threads(before);
}

TEST_CASE("atomic_word: the std::atomic operations spmd uses, from several threads",
          "[threads][atomic]") {
  // Counts: four threads add, the total is exact (TSan checks the accesses are atomic).
  atomic_word<long> count{0};
  atomic_word<unsigned> bits{0};
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&, t] {
        for (int i = 0; i < 10000; ++i) count.fetch_add(1, order::relaxed);
        bits.fetch_or(1u << t, order::acq_rel);
      });
    for (auto& t : ts) t.join();
  }
  CHECK(count.load() == 40000);
  CHECK(bits.load(order::acquire) == 0xfu);
  CHECK(bits.fetch_and(~2u) == 0xfu);
  CHECK(bits.load() == 0xdu);
  CHECK(count.fetch_sub(40000, order::acq_rel) == 40000);
  CHECK(count.exchange(7) == 0);
  // compare-exchange: success replaces; failure leaves the word and reports what it found.
  long expected = 7;
  CHECK(count.compare_exchange_strong(expected, 9, order::acq_rel));
  CHECK(count.load() == 9);
  expected = 7;
  CHECK_FALSE(count.compare_exchange_strong(expected, 11, order::release));
  CHECK(expected == 9);
  CHECK(count.load() == 9);
  // A pointer word, and one race that exactly one thread wins (the buffer's first share).
  int a = 0, b = 0;
  atomic_word<int*> p{nullptr};
  atomic_word<int> winners{0};
  {
    std::vector<std::thread> ts;
    for (int t = 0; t < 4; ++t)
      ts.emplace_back([&] {
        int* none = nullptr;
        if (p.compare_exchange_strong(none, &a, order::acq_rel)) winners.fetch_add(1);
      });
    for (auto& t : ts) t.join();
  }
  CHECK(winners.load() == 1);
  CHECK(p.exchange(&b, order::relaxed) == &a);
  CHECK(p.load() == &b);
}

TEST_CASE("the tape's handles: copied and dropped on several threads, destroyed once",
          "[threads][atomic]") {
  // Each thread writes its own slot of the shared object, then drops its handles; the last
  // drop, on whichever thread, runs the destructor, which must see every write (TSan checks
  // the count's ordering; a plain count would race).
  struct obj : runtime::counted {
    int slots[4] = {};
    int* sum;
    explicit obj(int* s) : sum(s) {}
    ~obj() override { *sum = slots[0] + slots[1] + slots[2] + slots[3]; }
  };
  for (int round = 0; round < 20; ++round) {
    int sum = -1;
    {
      std::vector<std::thread> ts;
      runtime::counted_ref<obj> first = runtime::make_counted<obj>(&sum);
      for (int t = 0; t < 4; ++t)
        ts.emplace_back([h = first, t] {
          std::vector<runtime::counted_ref<obj>> copies(100, h);
          h->slots[t] = t + 1;
          copies.clear();
        });
      first.reset();  // the threads' handles keep it alive
      for (auto& t : ts) t.join();
    }
    CHECK(sum == 10);
  }
}

// Run by the test `threads-bad-env` with SPMD_SIM_THREADS=abc (hidden otherwise): the pool
// refuses the setting with a message naming it.
TEST_CASE("a bad SPMD_SIM_THREADS is refused, naming the value", "[.env]") {
  CHECK_THROWS_WITH(sim::threads(),
                    "spmd::sim: SPMD_SIM_THREADS=abc is not a thread count from 1 to 1024");
}
