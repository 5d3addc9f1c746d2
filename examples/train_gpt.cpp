// train-gpt: GPT-2's architecture from the library (spmd::nn::gpt: 2 blocks, width 32, 4 heads,
// vocabulary 64, context 16; spmd-train's gpt) trained on a 2×4 mesh — FSDP over dp, Megatron
// over tp — on a tiny generated language: each sequence counts up from a random start with a
// stride of 1, 2 or 3, modulo 64. The model can learn it: after the first token of a sequence
// every next token follows from the two before it. It prints the loss falling and, at the
// end, how many next tokens of sequences it has not seen it predicts right.
//
//   train-gpt [--steps 200] [--lr 0.003]            the simulation: 8 ranks in this process
//   mpirun -np 8 train-gpt --backend mpi             one process per rank (the first prints)
//
// Exit codes: 0 the loss fell, 1 it did not (too few steps, too large a learning rate: said
// with the losses), 2 bad input (named), 3 the loss went non-finite (the step named).
//
// Only installed headers: the model, its parallelisation, the data, the loss and the loop are
// all below. `spmd-train` is the same loop with files, options and checks.
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/nn/gpt.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/optim.hpp"
#ifdef SPMD_DEMO_MPI
#include "spmd/backends/mpi/mpi.hpp"
#endif

namespace {

namespace nn = spmd::nn;
namespace rt = spmd::runtime;

constexpr spmd::index_t vocab = 64, context = 16, batch = 8;
using gpt = nn::gpt<vocab, context, 32, 4, 2>;
using Mesh = spmd::mesh<2, 4>::named<"dp", "tp">;
/// A batch of token ids (sequences, positions): the sequences split over dp, whole on tp.
using tokens_layout = spmd::layout<Mesh, spmd::placements<spmd::shard<0>, spmd::replicate>, spmd::extents<batch, context>>;

struct options {
  int steps = 200;
  double lr = 3e-3;
  std::string backend = "sim";
};

/// GPT-2's initial values: weights normal(0, 0.02), biases 0, the norms' weights 1.
gpt initial_model(std::mt19937& rng) {
  gpt host;
  std::normal_distribution<float> normal(0.f, 0.02f);
  nn::for_each_parameter(host, [&](std::string_view path, auto& t) {
    const bool norm_weight = path.find("ln") != std::string_view::npos && path.ends_with("weight");
    const bool bias = std::remove_cvref_t<decltype(t)>::extents_type::rank() == 1 && !norm_weight;
    for (float& v : t.data) v = norm_weight ? 1.f : bias ? 0.f : normal(rng);
  });
  return host;
}

/// `steps` batches of the counting language: tokens and their next tokens, each (batch, context).
struct batches {
  std::vector<std::int64_t> tokens, targets;
  std::vector<std::int64_t> step(const std::vector<std::int64_t>& all, int s) const {
    const auto n = static_cast<std::ptrdiff_t>(batch * context);
    return {all.begin() + s * n, all.begin() + (s + 1) * n};
  }
};
batches counting(std::mt19937& rng, int steps) {
  std::uniform_int_distribution<std::int64_t> start(0, vocab - 1), stride(1, 3);
  batches b;
  for (int s = 0; s < steps * batch; ++s) {
    const std::int64_t a = start(rng), d = stride(rng);
    for (std::int64_t t = 0; t < context; ++t) {
      b.tokens.push_back((a + d * t) % vocab);
      b.targets.push_back((a + d * (t + 1)) % vocab);
    }
  }
  return b;
}

template <class B>
int train(const options& o, bool prints) {
  // [docs:train-gpt]
  std::mt19937 rng(2024);
  const gpt host = initial_model(rng);
  const batches data = counting(rng, o.steps);
  auto model = nn::parallelize<Mesh, B, nn::tensor_parallel<"tp", nn::gpt_megatron>,
                               nn::fsdp<"dp", nn::gpt_fsdp_units>>(host);
  auto opt = std::apply([&](auto&... p) { return rt::adamw({.lr = o.lr}, p...); }, nn::parameters(model));
  const auto on_mesh = [](const std::vector<std::int64_t>& v) {
    return rt::factories<B>::template distribute_tensor<tokens_layout>(v);
  };
  // [/docs:train-gpt]
  if (prints)
    std::printf("train-gpt: the gpt model on a 2x4 mesh (FSDP x TP, %s), %d steps of AdamW (lr %g)\n\n",
                o.backend.c_str(), o.steps, o.lr);
  double first = 0, last = 0;
  for (int s = 0; s < o.steps; ++s) {
    // [docs:train-gpt-step]
    const auto logits = model(on_mesh(data.step(data.tokens, s)));  // the vocabulary split on tp
    auto loss = rt::vocab_parallel_cross_entropy<vocab>(logits, on_mesh(data.step(data.targets, s)));
    loss.backward();
    opt.step();
    opt.zero_grad();
    // [/docs:train-gpt-step]
    const double l = loss.value().full_tensor()[0];
    if (s == 0) first = l;
    last = l;
    if (prints && (s % 20 == 0 || s + 1 == o.steps || !std::isfinite(l)))
      std::printf("  step %4d  loss %.4f\n", s + 1, l);
    if (!std::isfinite(l)) {
      if (prints)
        std::fprintf(stderr, "train-gpt: the loss went non-finite at step %d (--lr %g is too large?)\n", s + 1, o.lr);
      return 3;
    }
  }
  // Next tokens of sequences it has not seen (another seed): the argmax of each position's
  // logits against its target. After a sequence's first token, each next one follows from
  // the two before it: 15 of a sequence's 16 targets can be known.
  std::mt19937 other(7);
  const batches held_out = counting(other, 1);
  const std::vector<float> logits = model(on_mesh(held_out.tokens)).value().full_tensor();
  const std::size_t positions = held_out.targets.size();
  std::size_t right = 0;
  for (std::size_t p = 0; p < positions; ++p) {
    std::size_t best = 0;
    for (std::size_t v = 1; v < static_cast<std::size_t>(vocab); ++v)
      if (logits[p * vocab + v] > logits[p * vocab + best]) best = v;
    right += static_cast<std::int64_t>(best) == held_out.targets[p];
  }
  const bool fell = last < first;
  if (prints) {
    std::printf("\nloss %.4f -> %.4f (ln 64 = %.4f is a uniform guess)\n", first, last, std::log(64.0));
    std::printf("next tokens of %lld unseen sequences predicted right: %zu of %zu (%zu follow from the two tokens before; the first of each sequence is a guess)\n",
                static_cast<long long>(batch), right, positions, positions - static_cast<std::size_t>(batch));
    if (!fell)
      std::fprintf(stderr, "train-gpt: the loss did not fall in %d steps (%.4f -> %.4f): train more steps, or with a "
                           "smaller --lr than %g\n", o.steps, first, last, o.lr);
  }
  return fell ? 0 : 1;
}

void usage() {
  std::printf(
      "usage: train-gpt [--steps N] [--lr LR] [--backend sim|mpi]\n"
      "  Trains a gpt (spmd::nn::gpt, spmd-train's) on a 2x4 mesh (FSDP over dp, Megatron over tp) on a generated\n"
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
