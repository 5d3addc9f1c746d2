// tests/backends/mpi_failure.cpp — one rank fails on purpose; the job must end with a
// message naming the rank and the error, never hang. Run by check_failure.py under mpirun.
//   mpi_failure from_local   rank 1 passes a local of the wrong shape
//   mpi_failure kernel       an operator's local kernel throws on rank 2
//   mpi_failure world        (run with fewer processes than the mesh) every rank refuses
//   mpi_failure collective   rank 1 passes all_reduce a tensor of another shape: every rank
//                            refuses before data moves
//   mpi_failure training     rank 3 fails inside an FSDP unit's forward, mid-step: the others
//                            wait in the next unit's collectives until the job ends
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/mpi/mpi.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/data_parallel/fully_shard.hpp"
#include "spmd/runtime/optim.hpp"
#include "spmd/runtime/ops/local_map.hpp"

int main(int argc, char** argv) {
  using namespace spmd;
  mpi::environment env(argc, argv);
  using M = mesh<2, 2>;
  using L = layout<M, placements<shard<0>, replicate>, extents<8, 4>>;
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "from_local") {
    const index_t rows = env.rank() == 1 ? 3 : 4;  // rank 1: wrong
    host::host_tensor<float> mine{{rows, 4}, std::vector<float>(static_cast<std::size_t>(rows * 4), 1.f)};
    const auto x = mpi::from_local<L>(mine);
    const auto y = mpi::redistribute<placements<replicate, replicate>>(x);  // others wait here
    return y.local().size() == 32 ? 0 : 1;
  }
  if (mode == "kernel") {
    const auto x = mpi::ones<float, L>();
    auto f = [](index_t rank, host::strided_view<float> out, host::strided_view<const float> in) {
      if (rank == 2) throw std::runtime_error("the kernel failed on purpose");
      std::memcpy(out.data(), in.data(), static_cast<std::size_t>(in.size()) * sizeof(float));
    };
    const auto y = runtime::local_map<L, runtime::in_placements<placements<shard<0>, replicate>>>(f, x);
    const auto z = mpi::redistribute<placements<replicate, replicate>>(y);
    return z.local().size() == 32 ? 0 : 1;
  }
  if (mode == "world") {  // a 2x4 mesh on fewer than 8 processes
    const auto x = mpi::ones<float, layout<mesh<2, 4>, placements<shard<0>, replicate>, extents<8, 4>>>();
    return x.local().size() > 0 ? 0 : 1;
  }
  if (mode == "collective") {
    const index_t rows = env.rank() == 1 ? 3 : 2;
    host::host_tensor<float> mine{{rows, 2}, std::vector<float>(static_cast<std::size_t>(rows * 2), 1.f)};
    const auto y = mpi::all_reduce<M>(mine, reduce_op::sum);
    return y.data.size() == 4 ? 0 : 1;
  }
  if (mode == "training") {
    using LW = layout<M, placements<shard<0>, replicate>, extents<4, 4>>;
    using LX = layout<M, placements<shard<0>, replicate>, extents<6, 4>>;
    auto w1 = runtime::requires_grad(mpi::full<float, LW>(0.5f), "w1");
    auto w2 = runtime::requires_grad(mpi::full<float, LW>(0.25f), "w2");
    runtime::adamw opt({.lr = 0.01}, w1, w2);
    auto up = runtime::fully_shard<0>(w1);
    auto down = runtime::fully_shard<0>(w2);
    const auto x = mpi::ones<float, LX>();
    for (int step = 0; step < 2; ++step) {
      auto h = up.forward([&](const auto& w) { return runtime::relu(runtime::linear(runtime::as_variable(x), w)); });
      auto y = down.forward([&](const auto& w) {
        if (step == 1 && env.rank() == 3) throw std::runtime_error("rank 3 failed mid-step on purpose");
        return runtime::linear(h, w);
      });
      runtime::mean<>(y * y).backward();
      opt.step();
      opt.zero_grad();
    }
    return 0;
  }
  return 3;
}
