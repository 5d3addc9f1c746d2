// train-gpt: the gpt model of spmd-train (tools/train/gpt.hpp: 2 blocks, width 32, 4 heads,
// vocabulary 64, context 16) trained on a 2×4 mesh — FSDP over dp, Megatron over tp — on a
// tiny generated language: each sequence counts up from a random start with a stride of 1, 2
// or 3, modulo 64. The model can learn it: after the first token of a sequence every next
// token follows from the two before it. It prints the loss falling and, at the end, how many
// next tokens it predicts right.
//
//   train-gpt [--steps 200] [--lr 0.003]            the simulation: 8 ranks in this process
//   mpirun -np 8 train-gpt --backend mpi             one process per rank (the first prints)
//
// The whole training loop is below: the model's step (forward, then backward), AdamW over
// every parameter, zero_grad. `spmd-train` is the same loop with files, options and checks.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "gpt.hpp"
#include "synthetic.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/optim.hpp"
#ifdef SPMD_DEMO_MPI
#include "spmd/backends/mpi/mpi.hpp"
#endif

namespace {

using namespace spmd_train;

struct options {
  int steps = 200;
  double lr = 3e-3;
  std::string backend = "sim";
};

template <class B>
int train(const options& o, bool prints) {
  using Model = gpt_model<config<2, 4, B, dp_kind::fsdp, float>>;  // mesh 2×4 (dp, tp)
  const model_spec spec = gpt_spec();
  const inputs in = counting_inputs(spec, o.steps);
  Model model = Model::load(in);
  auto opt = std::apply([&](auto&... p) { return spmd::runtime::adamw({.lr = o.lr}, p...); }, model.params());
  if (prints)
    std::printf("train-gpt: the gpt model on a 2x4 mesh (FSDP x TP, %s), %d steps of AdamW (lr %g)\n\n",
                o.backend.c_str(), o.steps, o.lr);
  double first = 0, last = 0;
  for (int s = 0; s < o.steps; ++s) {
    double loss = 0;
    model.step(in, s, [&](auto&& l) {
      loss = l.full_tensor()[0];
      l.backward();
      return 0;
    });
    opt.step();
    opt.zero_grad();
    if (s == 0) first = loss;
    last = loss;
    if (prints && (s % 20 == 0 || s + 1 == o.steps)) std::printf("  step %4d  loss %.4f\n", s + 1, loss);
  }
  if (prints)
    std::printf("\nloss %.4f -> %.4f (ln 64 = %.4f is a uniform guess)\n", first, last, std::log(64.0));
  return last < first ? 0 : 1;
}

void usage() {
  std::printf(
      "usage: train-gpt [--steps N] [--lr LR] [--backend sim|mpi]\n"
      "  Trains spmd-train's gpt model on a 2x4 mesh (FSDP over dp, Megatron over tp) on a generated\n"
      "  counting language and prints the loss falling. --backend mpi runs under mpirun -np 8.\n"
      "  Defaults: --steps 200 --lr 0.003 --backend sim.\n");
}

}  // namespace

int main(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "train-gpt: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a == "--steps") {
      o.steps = std::atoi(value().c_str());
    } else if (a == "--lr") {
      o.lr = std::atof(value().c_str());
    } else if (a == "--backend") {
      o.backend = value();
    } else {
      std::fprintf(stderr, "train-gpt: unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (o.steps < 1 || !(o.lr > 0)) {
    std::fprintf(stderr, "train-gpt: --steps must be at least 1 and --lr positive\n");
    return 2;
  }
  if (o.backend == "sim") return train<spmd::sim::backend>(o, true);
#ifdef SPMD_DEMO_MPI
  if (o.backend == "mpi") {
    spmd::mpi::environment env(argc, argv);
    if (env.size() != 8) {
      if (env.rank() == 0) std::fprintf(stderr, "train-gpt: --backend mpi runs 8 processes (mpirun -np 8)\n");
      return 2;
    }
    return train<spmd::mpi::backend>(o, env.rank() == 0);
  }
#endif
  std::fprintf(stderr, "train-gpt: --backend %s is not built here (sim%s)\n", o.backend.c_str(),
#ifdef SPMD_DEMO_MPI
               ", mpi"
#else
               ""
#endif
  );
  return 2;
}
