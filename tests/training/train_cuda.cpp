// tests/training/train_cuda.cpp — spmd-train's gpt on the CUDA backend (every rank of 2x4 on
// one GPU, FSDP × TP, AdamW) against the simulation: 5 steps, every loss within 1e-4 relative
// (the GPU contracts multiply-adds and sums in other orders) and the parameters after within
// 1e-4. Then spmd-train's loop with --graph (the step captured as one CUDA graph and replayed)
// against the same loop eager: every loss and gradient norm equal bit for bit, on 2x4 and on
// one rank, with AdamW and clipping and with SGD. It keeps the models and the trainer compiling
// for the device backends where spmd-train's cuda instances are not built (meson option
// train_gpu); without a GPU it says so and exits 77.
#include <cmath>
#include <cstdio>
#include <tuple>
#include <vector>

#include "gpt.hpp"
#include "spmd/backends/cuda/cuda.hpp"
#include "trainer.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/optim.hpp"
#include "synthetic.hpp"

namespace {

using namespace spmd_train;

struct trained {
  std::vector<double> losses;
  std::vector<float> wq, lm_head;
};

template <class B>
trained train(const inputs& in, int steps) {
  using Model = gpt_model<config<2, 4, B, dp_kind::fsdp, float>>;
  Model model = Model::load(in);
  auto opt = std::apply([](auto&... p) { return spmd::runtime::adamw({.lr = 1e-2}, p...); }, model.params());
  trained r;
  for (int s = 0; s < steps; ++s) r.losses.push_back(train_step(model, opt, in, s));
  r.wq = nn::get<"wq">(nn::get<"attn">(nn::get<"blocks">(model.model)[0])).full_tensor();
  r.lm_head = nn::get<"lm_head">(model.model).full_tensor();
  return r;
}

/// spmd-train's loop (trainer.hpp) on the CUDA backend, eager and with --graph: the same losses
/// and norms, bit for bit.
template <class Cfg>
int graph_against_eager(const char* what, const inputs& in, train_options o) {
  using Model = gpt_model<Cfg>;
  o.graph = false;
  const train_result eager = spmd_train::train<Model>(o, in, gpt_spec());
  o.graph = true;
  const train_result graph = spmd_train::train<Model>(o, in, gpt_spec());
  int failures = 0;
  for (std::size_t s = 0; s < eager.losses.size(); ++s) {
    const bool same = graph.losses[s] == eager.losses[s] && graph.grad_norms[s] == eager.grad_norms[s];
    std::printf("%s step %zu (%s): loss %.9g norm %.9g, eager %.9g %.9g%s\n", what, s,
                s == 0 ? "eager" : s == 1 ? "captured" : "replayed", graph.losses[s], graph.grad_norms[s],
                eager.losses[s], eager.grad_norms[s], same ? "" : "  DIFFERENT");
    failures += !same;
  }
  failures += graph.losses.size() != eager.losses.size();
  return failures;
}

}  // namespace

int main() {
  if (!spmd::cuda::available()) {
    std::printf("SKIP train_cuda: no CUDA device on this machine (spmd-train's gpt on the CUDA backend needs a GPU)\n");
    return 77;
  }
  const inputs in = counting_inputs(gpt_spec(), 5);
  const trained gpu = train<spmd::cuda::backend>(in, 5);
  const trained sim = train<spmd::sim::backend>(in, 5);
  int failures = 0;
  for (std::size_t s = 0; s < sim.losses.size(); ++s) {
    const double d = std::abs(gpu.losses[s] - sim.losses[s]) / std::abs(sim.losses[s]);
    std::printf("step %zu: loss %.9g (cuda) %.9g (sim), relative difference %.2g\n", s, gpu.losses[s], sim.losses[s], d);
    failures += !(d <= 1e-4);
  }
  double worst = 0;
  for (std::size_t i = 0; i < sim.wq.size(); ++i) worst = std::max(worst, double(std::abs(gpu.wq[i] - sim.wq[i])));
  for (std::size_t i = 0; i < sim.lm_head.size(); ++i)
    worst = std::max(worst, double(std::abs(gpu.lm_head[i] - sim.lm_head[i])));
  std::printf("parameters after 5 steps: largest difference %.3g\n", worst);
  failures += !(worst <= 1e-4);

  // --graph: 6 steps (one eager, one captured, four replays), the batch changing every step.
  const inputs in6 = counting_inputs(gpt_spec(), 6);
  train_options o;
  o.model = "gpt";
  o.backend = "cuda";
  o.steps = 6;
  o.lr = 1e-2;
  o.clip = 0.5;
  o.json = true;  // no progress table
  failures += graph_against_eager<config<2, 4, spmd::cuda::backend, dp_kind::fsdp, float>>("2x4 adamw clip", in6, o);
  o.clip.reset();
  o.optimizer = "sgd";
  failures += graph_against_eager<config<1, 1, spmd::cuda::backend, dp_kind::fsdp, float>>("1 sgd", in6, o);
  std::printf("%s\n", failures ? "FAIL" : "ok");
  return failures ? 1 : 0;
}
