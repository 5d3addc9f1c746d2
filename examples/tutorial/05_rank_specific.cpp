// LocalTensor tutorial, example 5: different work on different ranks — rank_map,
// tensor_map, leaving the mode, and running single-rank code once per rank.
// docs/tutorial.md quotes the marked regions.
#include <cstdio>
#include <type_traits>
#include <vector>

#include <spmd/backends/sim/sim.hpp>

#include "tutorial_support.hpp"

using spmd::index_t;
using spmd::sim::host_tensor;
using spmd::sim::local_tensor;
using tutorial::expect;
namespace sim = spmd::sim;
using M = spmd::mesh<4>;
constexpr sim::local_mode<M> mode;

void use_rank_map() {
  // [docs:rank_map]
  auto lt = mode.rank_map([](index_t rank) { return host_tensor<float>::full({2, 3}, float(rank)); });
  // [/docs:rank_map]
  for (index_t r = 0; r < 4; ++r)
    expect(lt.local(r)(0, 0) == float(r), "rank " + std::to_string(r) + " holds " +
                                              std::to_string(r) + " everywhere");
}

void use_tensor_map() {
  // [docs:tensor_map]
  auto lt = mode.rank_map([](index_t rank) { return host_tensor<float>::full({2, 2}, rank + 1.f); });
  // The rank as a compile-time constant (spmd::rank_c<R>) when the function asks for one.
  auto scaled = mode.tensor_map(lt, []<index_t R>(spmd::rank_c<R>, auto shard) {
    host_tensor<float> out{{2, 2}, {shard.data(), shard.data() + shard.size()}};
    for (float& v : out.data) v *= R + 1;
    return out;
  });
  // [/docs:tensor_map]
  for (index_t r = 0; r < 4; ++r)
    expect(scaled.local(r)(0, 0) == float((r + 1) * (r + 1)),
           "rank " + std::to_string(r) + ": (r + 1)^2 = " + std::to_string((r + 1) * (r + 1)));
}

void leave_the_mode() {
  // [docs:disable]
  auto inside = mode.ones<float>({2, 2});               // a local tensor, one shard per rank
  auto outside = host_tensor<float>::ones({2, 2});      // mode.disable(): one plain tensor
  static_assert(std::is_same_v<decltype(inside), local_tensor<float, M>>);
  static_assert(std::is_same_v<decltype(outside), host_tensor<float>>);
  // [/docs:disable]
  expect(inside.reconcile() == outside, "the same values, one per rank or just one");
}

void run_per_rank() {
  // [docs:per_rank]
  // Code written for one rank: its slice of the data.
  auto rank_slice = [](const host_tensor<float>& data, index_t rank) {
    const index_t chunk = data.numel() / 4;
    const auto first = data.data.begin() + rank * chunk;
    return host_tensor<float>{{chunk}, {first, first + chunk}};
  };
  const auto full_data = host_tensor<float>::arange({16});
  // Once per rank: mode.ranks() is each rank's id; plain arguments go to every call.
  local_tensor<float, M> result = sim::per_rank(rank_slice, full_data, mode.ranks());
  // [/docs:per_rank]
  const std::vector<std::vector<float>> want{
      {0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}};
  for (index_t r = 0; r < 4; ++r)
    expect(result.to_local(r).data == want[static_cast<std::size_t>(r)],
           "rank " + std::to_string(r) + " holds [" + std::to_string(4 * r) + ", " +
               std::to_string(4 * r + 4) + ")");
}

int main() {
  std::printf("use_rank_map\n");
  use_rank_map();
  std::printf("use_tensor_map\n");
  use_tensor_map();
  std::printf("leave_the_mode\n");
  leave_the_mode();
  std::printf("run_per_rank\n");
  run_per_rank();
  return tutorial::exit_code();
}
