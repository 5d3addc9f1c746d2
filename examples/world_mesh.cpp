// examples/world_mesh.cpp — a program whose mesh comes from the launcher: the data-parallel
// size is the world size over the tensor-parallel 2, known when the program starts
// (docs/design.md, "Static and dynamic mesh sizes"). One binary for every job size:
//
//   mpirun -np 6 world-mesh --backend mpi      mesh 3x2, one process per rank
//   world-mesh --ranks 6                        the same on the simulation
//
// An odd world exits 2 naming both sizes. README.md quotes the marked region.
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#ifdef SPMD_DEMO_MPI
#include "spmd/backends/mpi/mpi.hpp"
#endif

namespace {

// [docs:world_mesh]
using Mesh = spmd::mesh<spmd::dyn, 2>::named<"dp", "tp">;  // dp: given at run time
using X = spmd::layout<Mesh, spmd::placements<spmd::shard<0>, spmd::shard<1>>, spmd::extents<12, 8>>;

template <class Backend>
bool run(spmd::index_t world, bool print) {
  spmd::bind_mesh<Mesh>(world);  // dp = world / 2; an odd world: std::invalid_argument
  using F = spmd::runtime::factories<Backend>;
  std::vector<float> g(96);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i);
  const auto x = F::template distribute_tensor<X>(g);
  // S(0) over dp gathered: the plan is made once, at run time, for this mesh's sizes
  const auto y = spmd::runtime::redistribute<spmd::placements<spmd::replicate, spmd::shard<1>>>(x);
  const auto z = spmd::runtime::relu(y) + y;  // placements chosen by the compiler
  // [/docs:world_mesh]
  std::vector<float> want(g.size());
  for (std::size_t i = 0; i < g.size(); ++i) want[i] = 2 * g[i];
  const bool ok = y.full_tensor() == g && z.full_tensor() == want;
  if (print)
    std::printf("%s: mesh %lldx%lld (dp x tp) from a world of %lld, plan %s\n", ok ? "PASS" : "FAIL",
                static_cast<long long>(Mesh::extent(0)), static_cast<long long>(Mesh::extent(1)),
                static_cast<long long>(world),
                std::string(spmd::dynamic_plan_of<X, typename decltype(y)::layout_type, float>::trace().view()).c_str());
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::string backend = "sim";
  long ranks = 4;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--backend" && i + 1 < argc) backend = argv[++i];
    else if (a == "--ranks" && i + 1 < argc) ranks = std::strtol(argv[++i], nullptr, 10);
    else {
      std::fprintf(stderr, "usage: world-mesh [--ranks N] [--backend sim|mpi]   (mpi: mpirun -np N world-mesh --backend mpi)\n");
      return 2;
    }
  }
  try {
#ifdef SPMD_DEMO_MPI
    if (backend == "mpi") {
      spmd::mpi::environment env(argc, argv);
      return run<spmd::mpi::backend>(env.size(), env.rank() == 0) ? 0 : 1;
    }
#endif
    if (backend == "sim") return run<spmd::sim::backend>(ranks, true) ? 0 : 1;
  } catch (const std::invalid_argument& e) {  // every process throws the same: each says it, none hangs
    std::fprintf(stderr, "world-mesh: %s\n", e.what());
    return 2;
  }
  std::fprintf(stderr, "world-mesh: unknown backend %s (sim%s)\n", backend.c_str(),
#ifdef SPMD_DEMO_MPI
               ", mpi"
#else
               "; this build has no MPI"
#endif
  );
  return 2;
}
