// LocalTensor tutorial, example 4: shards of different sizes per rank, per-rank integers,
// and a DTensor whose dim does not divide by the mesh. docs/tutorial.md quotes the marked
// regions.
#include <cstdio>
#include <map>

#include <spmd/backends/sim/sim.hpp>

#include "tutorial_support.hpp"

using spmd::index_t;
using spmd::sim::host_tensor;
using spmd::sim::local_int;
using spmd::sim::local_tensor;
using tutorial::expect;
namespace sim = spmd::sim;
using M = spmd::mesh<3>;

void create_uneven_shards() {
  // [docs:uneven]
  local_tensor<float, M> lt({{0, {{1, 4}, {1, 2, 3, 4}}},                     // 1 row
                             {1, {{2, 4}, {5, 6, 7, 8, 9, 10, 11, 12}}},      // 2 rows
                             {2, {{1, 4}, {13, 14, 15, 16}}}});               // 1 row
  local_int<M> rows = lt.size(0);  // a per-rank integer: {1, 2, 1}
  // [/docs:uneven]
  expect(rows == local_int<M>{1, 2, 1}, "size(0) is {1, 2, 1}: " + rows.text());
  expect(!rows.uniform().has_value(), "size(0) has no single value");
  expect(lt.size(1).reconcile() == 4, "size(1) is 4 on every rank");
}

void local_int_arithmetic() {
  // [docs:local_int]
  local_int<M> a({{0, 10}, {1, 20}, {2, 30}});  // by rank
  local_int<M> b({{0, 1}, {1, 2}, {2, 3}});
  local_int<M> sum = a + b;   // {11, 22, 33}
  local_int<M> prod = a * b;  // {10, 40, 90}
  // [/docs:local_int]
  expect(sum == local_int<M>{11, 22, 33}, "a + b = " + sum.text());
  expect(prod == local_int<M>{10, 40, 90}, "a * b = " + prod.text());
  expect(a < a + 1 && !(a == b), "comparisons hold on every rank, or not at all");
  bool threw = false;
  try {
    (void)(a < local_int<M>{20, 20, 20});  // true on rank 0, false on ranks 1 and 2
  } catch (const std::logic_error&) {
    threw = true;
  }
  expect(threw, "an ordering the ranks disagree on throws");
}

void dtensor_uneven_sharding() {
  // [docs:dtensor_uneven]
  using L = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<10, 4>>;
  // torch.chunk's split, worked out by the compiler: 4, 4 and 2 rows.
  static_assert(L{}.local_shape(0)[0] == 4 && L{}.local_shape(2)[0] == 2);

  const auto tensor = host_tensor<float>::arange({10, 4});
  auto dt = sim::distribute_tensor<L>(tensor.data);
  local_int<M> rows = sim::to_local_tensor(dt).size(0);
  bool matches = dt.full_tensor() == tensor.data;
  // [/docs:dtensor_uneven]
  expect(rows == local_int<M>{4, 4, 2}, "rows per rank: " + rows.text());
  index_t total = 0;
  for (index_t r = 0; r < 3; ++r) total += rows[r];
  expect(total == 10, "the rows add up to 10");
  expect(matches, "full_tensor() equals the input");
}

int main() {
  std::printf("create_uneven_shards\n");
  create_uneven_shards();
  std::printf("local_int_arithmetic\n");
  local_int_arithmetic();
  std::printf("dtensor_uneven_sharding\n");
  dtensor_uneven_sharding();
  return tutorial::exit_code();
}
