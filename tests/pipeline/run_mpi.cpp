// tests/pipeline/run_mpi.cpp — the pipeline executor over MPI (backends/mpi/pipeline.hpp),
// under mpirun -np 4: the world cut into 1, 2 and 4 pipeline ranks (groups of 4, 2 and 1
// processes, the rows split over each group), every schedule, 1..8 microbatches. Each
// process runs the same step in the simulation too, and its stages' gradients and the loss
// must be the simulation's bit for bit. Every process reports; the exit code is the same on all.
#include "spmd/backends/mpi/mpi_c.hpp"

#include <cstdio>
#include <string>
#include <vector>

#include "spmd/backends/mpi/mpi.hpp"
#include "spmd/backends/mpi/pipeline.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/pipeline.hpp"

#include "chain.hpp"

namespace {

namespace pp = spmd::pp;
using T = double;

/// One case: returns the number of failed checks on this process.
template <int G>
int one_case(pp::schedule_kind k, pp::shape dims, const spmd::mpi::pipeline_world& world) {
  using M = typename spmd::mesh<G>::template named<"dp">;
  const pp::built b = pp::build(k, dims);
  const chain::batch<T> data(dims.microbatches);
  // the simulation: every pipeline rank in this process
  chain::params<T, M, spmd::sim::backend> ps(dims.stages());
  chain::stages<T, M, spmd::sim::backend> ss{ps, data, dims.stages()};
  std::vector<int> all;
  for (int r = 0; r < dims.ranks; ++r) all.push_back(r);
  spmd::runtime::pipeline::in_process here;
  const double sim_loss = spmd::runtime::pipeline::run(b.table, dims, ss, here, all);
  const auto sim = chain::gradients(ps);
  // MPI: this process's pipeline rank, its group's meshes
  spmd::mpi::communicator_scope in_group(world.group());
  chain::params<T, M, spmd::mpi::backend> pm(dims.stages());
  chain::stages<T, M, spmd::mpi::backend> sm{pm, data, dims.stages()};
  spmd::mpi::pipeline_link link{world};
  const int me = world.pipeline_rank();
  const double mpi_loss = spmd::runtime::pipeline::run(b.table, dims, sm, link, std::vector<int>{me});
  int failed = 0;
  auto say = [&](const std::string& what) {
    ++failed;
    std::printf("FAIL rank %d: %s %d ranks %d virtual %d microbatches: %s\n", spmd::mpi::environment::rank(),
                std::string(pp::name(k)).c_str(), dims.ranks, dims.virtual_stages, dims.microbatches, what.c_str());
  };
  const int last = dims.stages() - 1;
  if (dims.rank_of(last) == me && mpi_loss != sim_loss) say("the loss differs from the simulation's");
  const auto got = chain::gradients(pm);
  for (int s = 0; s < dims.stages(); ++s) {
    const bool mine = dims.rank_of(s) == me;
    if (mine && got[std::size_t(s)] != sim[std::size_t(s)]) say("stage " + std::to_string(s) + "'s gradient differs");
    if (!mine && !got[std::size_t(s)].empty()) say("stage " + std::to_string(s) + " has a gradient off its rank");
  }
  return failed;
}

template <int G>
int all_cases(int ranks) {
  spmd::mpi::pipeline_world world(ranks);
  int failed = 0, cases = 0;
  for (pp::schedule_kind k : {pp::schedule_kind::gpipe, pp::schedule_kind::one_f_one_b, pp::schedule_kind::interleaved,
                              pp::schedule_kind::zero_bubble})
    for (int v = 1; v <= (k == pp::schedule_kind::interleaved ? 2 : 1); ++v)
      for (int m = 1; m <= 8; ++m) {
        failed += one_case<G>(k, {ranks, v, m}, world);
        ++cases;
      }
  if (spmd::mpi::environment::rank() == 0)
    std::printf("%d pipeline ranks of %d processes: %d cases\n", ranks, G, cases);
  return failed;
}

}  // namespace

int main(int argc, char** argv) {
  spmd::mpi::environment env(argc, argv);
  if (spmd::mpi::environment::size() != 4) {
    if (spmd::mpi::environment::rank() == 0) std::fprintf(stderr, "run under mpirun -np 4\n");
    return 2;
  }
  int failed = all_cases<4>(1) + all_cases<2>(2) + all_cases<1>(4);
  int total = 0;
  MPI_Allreduce(&failed, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  if (spmd::mpi::environment::rank() == 0)
    std::printf("%s: %d failed checks over all processes\n", total ? "FAILED" : "ok", total);
  return total ? 1 : 0;
}
