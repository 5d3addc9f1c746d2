// train-gpt: the gpt model of spmd-train (tools/train/gpt.hpp: 2 blocks, width 32, 4 heads,
// vocabulary 64, context 16) trained on a 2×4 mesh — FSDP over dp, Megatron over tp — on a
// tiny generated language: each sequence counts up from a random start with a stride of 1, 2
// or 3, modulo 64. The model can learn it: after the first token of a sequence every next
// token follows from the two before it. It prints the loss falling and, at the end, how many
// next tokens of sequences it has not seen it predicts right.
//
//   train-gpt [--steps 200] [--lr 0.003]            the simulation: 8 ranks in this process
//   mpirun -np 8 train-gpt --backend mpi             one process per rank (the first prints)
//
// Exit codes: 0 the loss fell, 1 it did not (too few steps, too large a learning rate: said
// with the losses), 2 bad input (named), 3 the loss went non-finite (the step named).
//
// The whole training loop is below: the model's step (forward, then backward), AdamW over
// every parameter, zero_grad. `spmd-train` is the same loop with files, options and checks.
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
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
    if (prints && (s % 20 == 0 || s + 1 == o.steps || !std::isfinite(loss)))
      std::printf("  step %4d  loss %.4f\n", s + 1, loss);
    if (!std::isfinite(loss)) {
      if (prints)
        std::fprintf(stderr, "train-gpt: the loss went non-finite at step %d (--lr %g is too large?)\n", s + 1, o.lr);
      return 3;
    }
  }
  // Next tokens of sequences it has not seen (another seed): the argmax of each position's
  // logits against its target. After a sequence's first token, each next one follows from
  // the two before it: 15 of a sequence's 16 targets can be known.
  const inputs held_out = counting_inputs(spec, 1, 7);
  std::vector<float> logits;
  model.predict(held_out, 0, [&](auto&& l) {
    logits = l.full_tensor();
    return 0;
  });
  const std::size_t vocab = static_cast<std::size_t>(spec.vocab), positions = held_out.targets.size();
  std::size_t right = 0;
  for (std::size_t p = 0; p < positions; ++p) {
    std::size_t best = 0;
    for (std::size_t v = 1; v < vocab; ++v)
      if (logits[p * vocab + v] > logits[p * vocab + best]) best = v;
    right += static_cast<std::int64_t>(best) == held_out.targets[p];
  }
  const bool fell = last < first;
  if (prints) {
    std::printf("\nloss %.4f -> %.4f (ln 64 = %.4f is a uniform guess)\n", first, last, std::log(64.0));
    std::printf("next tokens of %lld unseen sequences predicted right: %zu of %zu (%zu follow from the two tokens before; the first of each sequence is a guess)\n",
                static_cast<long long>(spec.batch), right, positions,
                positions - static_cast<std::size_t>(spec.batch));
    if (!fell)
      std::fprintf(stderr, "train-gpt: the loss did not fall in %d steps (%.4f -> %.4f): train more steps, or with a "
                           "smaller --lr than %g\n", o.steps, first, last, o.lr);
  }
  return fell ? 0 : 1;
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
      const std::string v = value();
      char* end = nullptr;
      errno = 0;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || errno != 0 || n < 1 || n > std::numeric_limits<int>::max()) {
        std::fprintf(stderr, "train-gpt: --steps %s: give a whole number of steps, at least 1\n", v.c_str());
        return 2;
      }
      o.steps = static_cast<int>(n);
    } else if (a == "--lr") {
      const std::string v = value();
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x > 0) || !std::isfinite(x)) {
        std::fprintf(stderr, "train-gpt: --lr %s: give a positive number, e.g. 0.003\n", v.c_str());
        return 2;
      }
      o.lr = x;
    } else if (a == "--backend") {
      o.backend = value();
    } else {
      std::fprintf(stderr, "train-gpt: unknown argument %s (see --help)\n", a.c_str());
      return 2;
    }
  }
  if (o.backend == "sim") return train<spmd::sim::backend>(o, true);
#ifdef SPMD_DEMO_MPI
  if (o.backend == "mpi") {
    spmd::mpi::environment env(argc, argv);
    if (env.size() != 8) {
      if (env.rank() == 0)
        std::fprintf(stderr, "train-gpt: --backend mpi runs the 2x4 mesh in 8 processes, this job has %d: mpirun -np 8 "
                             "(with --oversubscribe on a machine with fewer cores)\n", env.size());
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
