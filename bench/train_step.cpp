// bench/train_step — one training step (forward, backward, AdamW) of a wider gpt of
// spmd-train's form, sharded against one device:
//
//   train_step              runs both measurements below and prints the RESULT line
//   train_step --sim        the simulation: mesh 2x4 (FSDP x TP, 8 ranks in this process)
//                           against mesh 1, both with the same threads
//   train_step --one        one process doing the whole step (1 BLAS thread, 1 simulation thread)
//   mpirun -np 2 train_step --mpi   mesh 2 (FSDP) on MPI, one process per core (1 thread each)
//
// The model: vocabulary 512, context 128, width 512, 8 heads of 64, 2 blocks, batch 8
// (6.8 M parameters, 1,024 tokens a step: about 45 GFLOP forward and backward, so arithmetic
// dominates). Each figure is the median of 12 steps after 2 warm-up steps; in --sim the two
// runs' steps alternate.
//   RESULT train_sim_vs_one=<2x4 / 1, simulation> train_mpi_vs_one=<2 MPI processes / 1 process>
// Targets (issue 25): sim ≤ 1.3 (the same arithmetic plus the copies of the plans), MPI ≤ 0.65
// (ideal 0.5 on 2 cores). bench/RESULTS.md explains the gaps.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "gpt.hpp"
#include "spmd/backends/mpi/mpi.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/optim.hpp"
#include "synthetic.hpp"

namespace {

using namespace spmd_train;
using sizes = gpt_sizes<512, 128, 512, 8, 8>;
constexpr int warmup = 2, measured = 12;

model_spec spec() { return gpt_spec(sizes::vocab, sizes::context, sizes::width, sizes::heads, sizes::batch); }

template <class Model>
auto make_opt(Model& model) {
  return std::apply([](auto&... p) { return spmd::runtime::adamw({.lr = 1e-3}, p...); }, model.params());
}

/// The gpt on mesh D×T, backend B, with its optimizer, stepping through the inputs.
template <int D, int T, class B>
struct trainer {
  using Model = gpt_model<config<D, T, B, dp_kind::fsdp, float>, sizes>;
  explicit trainer(const inputs& in) : in_(in), model_(Model::load(in)), opt_(make_opt(model_)) {}

  /// Step s's time in ms (its loss checked to be a number).
  double step(int s) {
    if constexpr (requires { B::barrier(); }) B::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    const double loss = train_step(model_, opt_, in_, s);
    if constexpr (requires { B::barrier(); }) B::barrier();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!(loss > 0)) std::fprintf(stderr, "train_step: loss %g at step %d\n", loss, s);
    return t;
  }

  const inputs& in_;
  Model model_;
  decltype(make_opt(std::declval<Model&>())) opt_;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

/// The median step time (ms) of the gpt on mesh D×T, backend B.
template <int D, int T, class B>
double step_ms(const inputs& in) {
  trainer<D, T, B> t(in);
  std::vector<double> ms;
  for (int s = 0; s < warmup + measured; ++s) {
    const double m = t.step(s);
    if (s >= warmup) ms.push_back(m);
  }
  return median(ms);
}

void one_thread() {
  openblas_set_num_threads(1);
  setenv("SPMD_SIM_THREADS", "1", 1);
}

double run_child(const std::string& cmd, const char* key) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return -1;
  char line[512];
  double v = -1;
  while (std::fgets(line, sizeof line, p)) {
    std::fputs(line, stdout);
    const std::string l = line;
    if (l.rfind(key, 0) == 0) v = std::atof(l.c_str() + std::string(key).size());
  }
  return pclose(p) == 0 ? v : -1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  const inputs in = counting_inputs(spec(), warmup + measured);
  if (mode == "--sim") {
    // The two runs' steps alternate, so that a slow spell of a shared machine falls on both.
    trainer<1, 1, spmd::sim::backend> one_run(in);
    trainer<2, 4, spmd::sim::backend> mesh_run(in);
    std::vector<double> one_ms, mesh_ms;
    for (int s = 0; s < warmup + measured; ++s) {
      const double a = one_run.step(s), b = mesh_run.step(s);
      if (s >= warmup) one_ms.push_back(a), mesh_ms.push_back(b);
    }
    const double one = median(one_ms), mesh = median(mesh_ms);
    std::printf("sim: mesh 1 %.1f ms, mesh 2x4 %.1f ms per step\nsim_ratio %.3f\n", one, mesh, mesh / one);
    return 0;
  }
  if (mode == "--one") {
    one_thread();
    const double ms = step_ms<1, 1, spmd::sim::backend>(in);
    std::printf("one process, one thread: %.1f ms per step\none_ms %.3f\n", ms, ms);
    return 0;
  }
  if (mode == "--mpi") {
    one_thread();
    spmd::mpi::environment env(argc, argv);
    const double ms = step_ms<2, 1, spmd::mpi::backend>(in);
    if (env.rank() == 0) std::printf("mpi: mesh 2 (FSDP), 2 processes: %.1f ms per step\nmpi_ms %.3f\n", ms, ms);
    return 0;
  }
  const std::string self = argv[0];
  const double sim = run_child(self + " --sim", "sim_ratio ");
  const double one = run_child(self + " --one", "one_ms ");
  const double mpi = run_child(std::string(SPMD_MPIRUN) + " -np 2 " + self + " --mpi", "mpi_ms ");
  if (sim < 0 || one <= 0 || mpi < 0) {
    std::fprintf(stderr, "train_step: a measurement failed\n");
    return 1;
  }
  std::printf("RESULT train_sim_vs_one=%.3f train_mpi_vs_one=%.3f\n", sim, mpi / one);
  return 0;
}
