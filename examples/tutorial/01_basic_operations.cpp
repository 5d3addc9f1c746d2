// LocalTensor tutorial, example 1: creating a local tensor, per-rank arithmetic, reconcile,
// factories over a rank set, and per-rank access. docs/tutorial.md quotes the marked regions.
#include <cstdio>
#include <map>
#include <type_traits>

#include <spmd/backends/sim/sim.hpp>

#include "tutorial_support.hpp"

using spmd::index_t;
using spmd::sim::host_tensor;
using spmd::sim::local_tensor;
using tutorial::expect;

void create_local_tensor() {
  // [docs:create]
  const host_tensor<float> rank_0{{2, 2}, {1, 2, 3, 4}};
  const host_tensor<float> rank_1{{2, 2}, {5, 6, 7, 8}};
  // The rank set is part of the type: ranks {0, 1}.
  local_tensor<float, spmd::mesh<2>> lt({{0, rank_0}, {1, rank_1}});
  // [/docs:create]
  expect(lt.size(0) == 2 && lt.size(1) == 2, "shape [2, 2] on every rank");
  expect(lt.n_ranks == 2, "ranks {0, 1}");
  expect(lt.to_local(0) == rank_0 && lt.to_local(1) == rank_1, "each rank holds its tensor");
}

void arithmetic_operations() {
  // [docs:arithmetic]
  const host_tensor<float> input_0{{3}, {1, 2, 3}};
  const host_tensor<float> input_1{{3}, {4, 5, 6}};
  local_tensor<float, spmd::mesh<2>> lt({{0, input_0}, {1, input_1}});

  auto doubled = lt * 2.f;  // per rank
  auto added = lt + 10.f;
  // [/docs:arithmetic]
  expect(doubled.to_local(0).data == std::vector<float>{2, 4, 6}, "rank 0 doubled: [2, 4, 6]");
  expect(doubled.to_local(1).data == std::vector<float>{8, 10, 12},
         "rank 1 doubled: [8, 10, 12]");
  expect(added.to_local(0).data == std::vector<float>{11, 12, 13}, "rank 0 + 10: [11, 12, 13]");
}

void reconcile_identical_shards() {
  // [docs:reconcile]
  const host_tensor<float> value{{3}, {1, 2, 3}};
  local_tensor<float, spmd::mesh<3>> lt({{0, value}, {1, value}, {2, value}});

  host_tensor<float> result = lt.reconcile();  // throws, naming ranks and elements, if they differ
  // [/docs:reconcile]
  expect(result == value, "reconcile gives the value every rank holds");
  bool threw = false;
  try {
    (lt + local_tensor<float, spmd::mesh<3>>({{0, value}, {1, value}, {2, {{3}, {1, 2, 4}}}}))
        .reconcile();
  } catch (const std::logic_error& e) {
    threw = std::string(e.what()).find("rank 2") != std::string::npos;
  }
  expect(threw, "reconcile of differing shards throws, naming rank 2");
}

void use_local_mode() {
  // [docs:mode]
  // LocalTensorMode(4): the mode is a value whose factories make local tensors on 4 ranks.
  constexpr spmd::sim::local_mode<spmd::mesh<4>> mode;
  auto x = mode.ones<float>({2, 3});
  static_assert(std::is_same_v<decltype(x), local_tensor<float, spmd::mesh<4>>>);
  // [/docs:mode]
  expect(x.n_ranks == 4, "ones({2, 3}) under a 4-rank mode is a local tensor on 4 ranks");
  expect(x.reconcile() == host_tensor<float>::ones({2, 3}), "every rank holds ones(2, 3)");
}

void access_individual_shards() {
  // [docs:access]
  local_tensor<float, spmd::mesh<3>> lt(
      {{0, {{2}, {1, 2}}}, {1, {{2}, {3, 4}}}, {2, {{2}, {5, 6}}}});
  auto shard_0 = lt.local(0);           // a view of rank 0's shard
  host_tensor<float> shard_1 = lt.to_local(1);  // a copy of rank 1's
  // [/docs:access]
  expect(shard_0(0) == 1.f && shard_0(1) == 2.f, "rank 0's shard: [1, 2]");
  expect(shard_1.data == std::vector<float>{3, 4}, "rank 1's shard: [3, 4]");
}

int main() {
  std::printf("create_local_tensor\n");
  create_local_tensor();
  std::printf("arithmetic_operations\n");
  arithmetic_operations();
  std::printf("reconcile_identical_shards\n");
  reconcile_identical_shards();
  std::printf("use_local_mode\n");
  use_local_mode();
  std::printf("access_individual_shards\n");
  access_individual_shards();
  return tutorial::exit_code();
}
