// LocalTensor tutorial, example 2: collectives on 3 ranks, done on every rank's shard at
// once. docs/tutorial.md quotes the marked regions.
#include <cstdio>
#include <vector>

#include <spmd/backends/sim/sim.hpp>

#include "tutorial_support.hpp"

using spmd::index_t;
using spmd::reduce_op;
using spmd::sim::host_tensor;
using spmd::sim::local_tensor;
using tutorial::expect;
using M = spmd::mesh<3>;

void all_reduce_sum() {
  // [docs:all_reduce]
  local_tensor<float, M> lt({{0, {{2, 2}, {1, 2, 3, 4}}},
                             {1, {{2, 2}, {5, 6, 7, 8}}},
                             {2, {{2, 2}, {9, 10, 11, 12}}}});
  spmd::sim::comm_counter comm;  // CommDebugMode's role
  auto summed = spmd::sim::all_reduce(lt, reduce_op::sum);
  host_tensor<float> result = summed.reconcile();  // every rank holds the sum
  // [/docs:all_reduce]
  expect(result.data == std::vector<float>{15, 18, 21, 24}, "sum: [[15, 18], [21, 24]]");
  expect(comm.count(spmd::step_kind::all_reduce) == 1, "one all_reduce counted");
}

void broadcast_from_rank() {
  // [docs:broadcast]
  local_tensor<float, M> lt({{0, {{3}, {10, 20, 30}}},
                             {1, {{3}, {40, 50, 60}}},
                             {2, {{3}, {70, 80, 90}}}});
  host_tensor<float> result = spmd::sim::broadcast(lt, /*src_rank=*/0).reconcile();
  // [/docs:broadcast]
  expect(result.data == std::vector<float>{10, 20, 30}, "every rank holds rank 0's [10, 20, 30]");
  expect(spmd::sim::broadcast(lt, 2).reconcile().data == std::vector<float>{70, 80, 90},
         "from rank 2: [70, 80, 90]");
}

void all_gather_tensors() {
  // [docs:all_gather]
  local_tensor<float, M> lt({{0, {{1, 2}, {1, 2}}}, {1, {{1, 2}, {3, 4}}}, {2, {{1, 2}, {5, 6}}}});
  // PyTorch fills a list of 3 tensors; spmd concatenates them along a dim (all_gather_into_tensor).
  host_tensor<float> gathered = spmd::sim::all_gather(lt, /*dim=*/0).reconcile();
  // [/docs:all_gather]
  expect(gathered.shape == std::vector<index_t>{3, 2}, "gathered shape [3, 2]");
  for (index_t r = 0; r < 3; ++r)
    expect(gathered.at({r, 0}) == lt.to_local(r).data[0] &&
               gathered.at({r, 1}) == lt.to_local(r).data[1],
           "row " + std::to_string(r) + " is rank " + std::to_string(r) + "'s tensor");
}

void reduce_scatter_tensors() {
  // [docs:reduce_scatter]
  local_tensor<float, M> lt({{0, {{3, 2}, {1, 2, 3, 4, 5, 6}}},
                             {1, {{3, 2}, {10, 20, 30, 40, 50, 60}}},
                             {2, {{3, 2}, {100, 200, 300, 400, 500, 600}}}});
  // Sum over the ranks, then rank r keeps row r (torch.chunk's piece r along dim 0).
  auto out = spmd::sim::reduce_scatter(lt, reduce_op::sum, /*dim=*/0);
  // [/docs:reduce_scatter]
  const std::vector<std::vector<float>> want{{111, 222}, {333, 444}, {555, 666}};
  for (index_t r = 0; r < 3; ++r)
    expect(out.to_local(r).shape == std::vector<index_t>{1, 2} &&
               out.to_local(r).data == want[static_cast<std::size_t>(r)],
           "rank " + std::to_string(r) + " holds row " + std::to_string(r) + " of the sum");
}

int main() {
  std::printf("all_reduce_sum\n");
  all_reduce_sum();
  std::printf("broadcast_from_rank\n");
  broadcast_from_rank();
  std::printf("all_gather_tensors\n");
  all_gather_tensors();
  std::printf("reduce_scatter_tensors\n");
  reduce_scatter_tensors();
  return tutorial::exit_code();
}
