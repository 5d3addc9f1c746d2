// Tutorial, example 7: random numbers on sharded tensors. DTensor's three guarantees (shards
// get distinct values, replicas equal ones, every rank's generator advances alike, all with no
// communication) and the one spmd adds: the global tensor is the same whatever the layout.
// docs/random.md quotes the marked regions.
#include <cstdio>
#include <cstring>
#include <vector>

#include <spmd/backends/sim/sim.hpp>

#include "tutorial_support.hpp"

using spmd::index_t;
using tutorial::expect;
namespace sim = spmd::sim;
using spmd::placements;
using spmd::replicate;
using spmd::shard;

using M = spmd::mesh<2, 4>;
using E = spmd::extents<8, 6>;
using Rows = spmd::layout<M, placements<shard<0>, replicate>, E>;  // 2 row blocks, 4 replicas each

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void shards_and_replicas() {
  // [docs:shards_and_replicas]
  spmd::manual_seed(2024);                      // every rank seeds alike
  sim::comm_counter comm;
  auto w = sim::randn<float, Rows>();           // rank (i, j) holds row block i
  bool replicas_equal = same_bits(w.to_local(0).data, w.to_local(3).data);   // (0,0), (0,3)
  bool shards_differ = !same_bits(w.to_local(0).data, w.to_local(4).data);   // (0,0), (1,0)
  // [/docs:shards_and_replicas]
  expect(replicas_equal, "replicas of a row block hold equal values");
  expect(shards_differ, "the two row blocks hold different values");
  expect(comm.total() == 0, "no collective ran");
}

void generator_advance() {
  // [docs:advance]
  spmd::generator g(7);                          // a user's generator; the default one stays
  (void)sim::rand<float, Rows>(g);
  std::uint64_t after_sharded = g.offset();      // 48 elements: 48 words
  spmd::generator h(7);
  (void)sim::rand<float, spmd::layout<spmd::mesh<1>, placements<replicate>, E>>(h);
  // [/docs:advance]
  expect(after_sharded == 48, "the offset advanced by 48 words");
  expect(h.offset() == after_sharded, "the same advance on one device");
}

void same_global_tensor() {
  // [docs:same_global]
  using Cols = spmd::layout<M, placements<shard<1>, shard<0>>, E>;   // 2 x 4 blocks
  using One = spmd::layout<spmd::mesh<1>, placements<replicate>, E>;
  spmd::generator a(99), b(99), c(99);
  std::vector<float> rows = sim::rand<float, Rows>(a).full_tensor();
  std::vector<float> cols = sim::rand<float, Cols>(b).full_tensor();
  std::vector<float> one = sim::rand<float, One>(c).full_tensor();
  // [/docs:same_global]
  expect(same_bits(rows, one) && same_bits(cols, one),
         "rows, columns and one device give the same 8 x 6 tensor, bit for bit");
}

void dropout_on_shards() {
  // [docs:dropout]
  spmd::generator g(5), h(5);
  auto x = sim::ones<float, Rows>();
  auto y = sim::dropout(x, 0.25, g);            // same layout; kept values are 1 / 0.75
  auto z = sim::dropout(sim::redistribute<placements<replicate, replicate>>(x), 0.25, h);
  // [/docs:dropout]
  expect(same_bits(y.full_tensor(), z.full_tensor()), "dropout masks the same elements under any layout");
  int kept = 0;
  for (float v : y.full_tensor()) kept += v != 0.0f;
  std::printf("  (%d of 48 kept)\n", kept);
  expect(kept > 0 && kept < 48, "some elements kept, some dropped");
}

int main() {
  std::printf("shards_and_replicas\n");
  shards_and_replicas();
  std::printf("generator_advance\n");
  generator_advance();
  std::printf("same_global_tensor\n");
  same_global_tensor();
  std::printf("dropout_on_shards\n");
  dropout_on_shards();
  return tutorial::exit_code();
}
