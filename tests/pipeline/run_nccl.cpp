// tests/pipeline/run_nccl.cpp — the pipeline executor over NCCL (backends/nccl/pipeline.hpp),
// one GPU per process: under mpirun -np W (W GPUs, W = 1, 2 or 4) the world is cut into every
// pipeline rank count P that divides it (groups of W / P processes, the rows split over each
// group), every schedule, 1, 3 and 8 microbatches. Each process runs the same step in the
// simulation too (f32): its stages' gradients and the loss equal the simulation's within 1e-5
// (cuBLAS and the host's GEMM sum in other orders), and no stage off its rank has a gradient.
// Without a GPU it says so and exits 77; as a meson test it runs with one process (P = 1).
#include "spmd/backends/mpi/mpi_c.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "spmd/backends/nccl/nccl.hpp"
#include "spmd/backends/nccl/environment.hpp"
#include "spmd/backends/nccl/pipeline.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/pipeline.hpp"

#include "chain.hpp"

namespace {

namespace pp = spmd::pp;
using T = float;

double worst(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return INFINITY;
  double w = 0;
  for (std::size_t i = 0; i < a.size(); ++i) w = std::max(w, double(std::abs(a[i] - b[i])));
  return w;
}

/// One case: the number of failed checks on this process.
template <int G>
int one_case(pp::schedule_kind k, pp::shape dims, const spmd::nccl::pipeline_world& world) {
  using M = typename spmd::mesh<G>::template named<"dp">;
  const pp::built b = pp::build(k, dims);
  const chain::batch<T> data(dims.microbatches);
  chain::params<T, M, spmd::sim::backend> ps(dims.stages());
  chain::stages<T, M, spmd::sim::backend> ss{ps, data, dims.stages()};
  std::vector<int> all;
  for (int r = 0; r < dims.ranks; ++r) all.push_back(r);
  spmd::runtime::pipeline::in_process here;
  const double sim_loss = spmd::runtime::pipeline::run(b.table, dims, ss, here, all);
  const auto sim = chain::gradients(ps);
  spmd::nccl::communicator_scope in_group(world.group());
  chain::params<T, M, spmd::nccl::backend> pn(dims.stages());
  chain::stages<T, M, spmd::nccl::backend> sn{pn, data, dims.stages()};
  spmd::nccl::pipeline_link link{world};
  const int me = world.pipeline_rank();
  const double loss = spmd::runtime::pipeline::run(b.table, dims, sn, link, std::vector<int>{me});
  int failed = 0;
  auto say = [&](const std::string& what) {
    ++failed;
    std::printf("FAIL rank %d: %s %d ranks %d virtual %d microbatches: %s\n", spmd::mpi::environment::rank(),
                std::string(pp::name(k)).c_str(), dims.ranks, dims.virtual_stages, dims.microbatches, what.c_str());
  };
  if (dims.rank_of(dims.stages() - 1) == me && !(std::abs(loss - sim_loss) <= 1e-5))
    say("the loss is " + std::to_string(loss) + ", the simulation's " + std::to_string(sim_loss));
  const auto got = chain::gradients(pn);
  for (int s = 0; s < dims.stages(); ++s) {
    const bool mine = dims.rank_of(s) == me;
    if (mine && !(worst(got[std::size_t(s)], sim[std::size_t(s)]) <= 1e-5))
      say("stage " + std::to_string(s) + "'s gradient is not the simulation's");
    if (!mine && !got[std::size_t(s)].empty()) say("stage " + std::to_string(s) + " has a gradient off its rank");
  }
  return failed;
}

template <int G>
int all_cases(int ranks) {
  spmd::nccl::pipeline_world world(ranks);
  int failed = 0, cases = 0;
  for (pp::schedule_kind k : {pp::schedule_kind::gpipe, pp::schedule_kind::one_f_one_b, pp::schedule_kind::interleaved,
                              pp::schedule_kind::zero_bubble})
    for (int v = 1; v <= (k == pp::schedule_kind::interleaved ? 2 : 1); ++v)
      for (int m : {1, 3, 8}) {
        failed += one_case<G>(k, {ranks, v, m}, world);
        ++cases;
      }
  if (spmd::mpi::environment::rank() == 0) std::printf("%d pipeline ranks of %d processes: %d cases\n", ranks, G, cases);
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  if (!spmd::cuda::available()) {
    std::printf("SKIP pipeline executor on NCCL: no CUDA device on this machine\n");
    return 77;
  }
  spmd::nccl::environment env(argc, argv);
  const int w = spmd::mpi::environment::size();
  if (w != 1 && w != 2 && w != 4) {
    if (spmd::mpi::environment::rank() == 0) std::fprintf(stderr, "run under mpirun -np 1, 2 or 4 (one GPU each)\n");
    return 2;
  }
  int failed = 0;
  if (w == 1) failed += all_cases<1>(1);
  if (w == 2) failed += all_cases<2>(1) + all_cases<1>(2);
  if (w == 4) failed += all_cases<4>(1) + all_cases<2>(2) + all_cases<1>(4);
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (spmd::mpi::environment::rank() == 0) std::printf("%s: %d failed checks over all processes\n", total ? "FAILED" : "ok", total);
  return total ? 1 : 0;
}
