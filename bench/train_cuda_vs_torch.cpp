// bench/train_cuda_vs_torch — spmd's training step on the CUDA backend against PyTorch's on the
// same GPU, in the same run (issue 60).
//
//   meson compile -C build train_cuda_vs_torch && build/bench/train_cuda_vs_torch [--no-torch] [--steps N]
//
// Two models, both tools/train/gpt.hpp's (forward, backward, AdamW lr 1e-3, zero_grad, the loss
// read on the host at the end of each step):
//   tiny   spmd-train's: vocabulary 64, context 16, width 32, 4 heads, 2 blocks, batch 8
//   wide   bench/train_step's: vocabulary 512, context 128, width 512, 8 heads, 2 blocks, batch 8
// spmd runs each three ways: mesh 1 eager (every operator its launch), mesh 1 as one CUDA graph
// (spmd::cuda::step_graph: the first step eager, the second captured, then replays with each
// step's batch copied into the graph's), and mesh 2x4 (FSDP x TP, every rank on the one GPU)
// as a graph. PyTorch runs bench/torch_gpt.py --device cuda on the same parameters and batches
// (eager; and through torch.compile where it works), a child process answering a step at a
// time, the two sides alternating in runs of 20 steps. Each figure is the median wall time of a
// step, the host waiting for the device at its end, after warm-up steps; the device memory the
// graphs and the stream-ordered pool hold is printed after the first run and at the end (the
// same: no step allocates from the driver).
//
//   RESULT cuda_tiny_vs_torch=<spmd graph / torch eager> cuda_wide_vs_torch=<...>
// Targets (issue 60): tiny <= 0.1, wide <= 0.5; the 2x4 graph step <= 1.5x mesh 1's (printed
// beside). Python: $SPMD_BENCH_PYTHON, else python3; without an importable torch with CUDA (or
// with --no-torch) only spmd's figures are printed. bench/RESULTS.md has the figures.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpt.hpp"
#include "spmd/backends/cuda/cuda.hpp"
#include "spmd/runtime/copy_into.hpp"
#include "spmd/runtime/optim.hpp"
#include "synthetic.hpp"
#include "timing.hpp"
#include "torch_child.hpp"
#include "trainer.hpp"

namespace {

using namespace spmd_train;
namespace cu = spmd::cuda;
using wide_sizes = gpt_sizes<512, 128, 512, 8, 8>;
using tiny_sizes = gpt_sizes<>;
constexpr int run_length = 20;  // the sides alternate in runs of this many steps

template <class S>
model_spec spec_of() {
  return gpt_spec(S::vocab, S::context, S::width, S::heads, S::batch);
}

/// The graphs' own memory and the default pool's, reserved now (bytes): unchanged across
/// replays when no step allocates from the driver.
struct reserved_bytes {
  unsigned long long graphs = 0, pool = 0;
  static reserved_bytes now() {
    reserved_bytes r;
    int dev = 0;
    (void)cudaGetDevice(&dev);
    (void)cudaDeviceGetGraphMemAttribute(dev, cudaGraphMemAttrReservedMemCurrent, &r.graphs);
    cudaMemPool_t pool{};
    if (cudaDeviceGetDefaultMemPool(&pool, dev) == cudaSuccess)
      (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &r.pool);
    return r;
  }
};

/// spmd's gpt of sizes S on configuration Cfg (the CUDA backend) with AdamW, eager or as one graph.
template <class Cfg, class S>
class spmd_run {
 public:
  using Model = gpt_model<Cfg, S>;
  spmd_run(const inputs& in, bool graph)
      : in_(in), model_(Model::load(in)), opt_(make_opt(model_)), graph_(graph ? std::make_unique<cu::step_graph>() : nullptr) {}

  /// One step on batch s: (ms, loss).
  std::pair<double, double> step(std::int64_t s) {
    const auto t0 = bench::clock_type::now();
    double loss = 0;
    if (!graph_ || !ran_) {
      const long before = cu::op_launches().load();
      model_.step_on(Model::batch_at(in_, s), [&](auto&& l) {
        kept_.keep(l);  // (with a graph: the tensor it will copy its loss into, made outside it)
        l.backward();
        return 0;
      });
      opt_.step();
      opt_.zero_grad();
      launches_ = cu::op_launches().load() - before;
      ran_ = graph_ != nullptr;
      loss = kept_.read();
    } else if (!graph_->captured()) {
      batch_.emplace(Model::batch_at(in_, s));
      graph_->capture([&] {
        model_.step_on(*batch_, [&](auto&& l) {
          kept_.keep(l);
          l.backward();
          return 0;
        });
        opt_.step();
        opt_.zero_grad();
      });
      graph_->wait();
      loss = kept_.read();
    } else {
      const auto fresh = Model::batch_at(in_, s);
      spmd::runtime::copy_into(batch_->first, fresh.first);
      spmd::runtime::copy_into(batch_->second, fresh.second);
      graph_->replay();
      graph_->wait();
      loss = kept_.read();
    }
    return {bench::seconds_since(t0) * 1e3, loss};
  }
  /// Operator launches of the eager step; the graph's nodes (0: no graph).
  long eager_launches() const { return launches_; }
  std::size_t graph_nodes() const { return graph_ && graph_->captured() ? graph_->nodes() : 0; }

 private:
  static auto make_opt(Model& model) {
    return std::apply([](auto&... p) { return spmd::runtime::adamw({.lr = 1e-3}, p...); }, model.params());
  }
  const inputs& in_;
  Model model_;
  decltype(make_opt(std::declval<Model&>())) opt_;
  std::unique_ptr<cu::step_graph> graph_;
  std::optional<decltype(Model::batch_at(std::declval<const inputs&>(), 0))> batch_;
  trainer_detail::kept_scalar kept_;
  bool ran_ = false;
  long launches_ = 0;
};

struct figures {
  double eager = 0, graph = 0, graph_2x4 = 0, torch = 0, torch_compiled = 0;  // ms; 0: not run
};

/// Median ms of `measured` steps after `warmup`, `step(s)` giving (ms, loss); prints the first loss.
template <class F>
double time_steps(const char* who, int warmup, int measured, F&& step) {
  std::vector<double> ms;
  for (int s = 0; s < warmup + measured; ++s) {
    const auto [t, loss] = step(s);
    if (s == 0) std::printf("  %-28s first loss %.7f\n", who, loss);
    if (s >= warmup) ms.push_back(t);
  }
  return bench::median(ms);
}

template <class S>
figures compare(const char* name, int warmup, int measured, bool with_torch) {
  const auto spec = spec_of<S>();
  const int steps = warmup + measured;
  const inputs in = counting_inputs(spec, steps);
  std::printf("%s gpt:\n", name);
  figures f;
  {
    spmd_run<config<1, 1, cu::backend, dp_kind::fsdp, float>, S> eager(in, false), graph(in, true);
    spmd_run<config<2, 4, cu::backend, dp_kind::fsdp, float>, S> graph_2x4(in, true);
    // The sides alternate in runs, so that a slow spell of the machine falls on each.
    std::vector<double> e, g, g8;
    reserved_bytes after_first{};
    for (int s0 = 0; s0 < steps; s0 += run_length) {
      if (s0 == run_length) after_first = reserved_bytes::now();  // the graphs captured, the pools warm
      const int s1 = std::min(steps, s0 + run_length);
      for (auto [run, out] : {std::pair{0, &e}, std::pair{1, &g}, std::pair{2, &g8}})
        for (int s = s0; s < s1; ++s) {
          const auto [ms, loss] = run == 0 ? eager.step(s) : run == 1 ? graph.step(s) : graph_2x4.step(s);
          if (s == 0)
            std::printf("  %-28s first loss %.7f\n",
                        run == 0 ? "spmd mesh 1 eager" : run == 1 ? "spmd mesh 1 graph" : "spmd 2x4 graph", loss);
          if (s >= warmup) out->push_back(ms);
        }
    }
    const reserved_bytes at_end = reserved_bytes::now();
    std::printf("  reserved device memory from step %d on: graphs %llu -> %llu bytes, default pool %llu -> %llu bytes\n",
                run_length, after_first.graphs, at_end.graphs, after_first.pool, at_end.pool);
    f.eager = bench::median(e);
    f.graph = bench::median(g);
    f.graph_2x4 = bench::median(g8);
    std::printf("  spmd mesh 1 eager %.3f ms (%ld operator launches a step), graph %.3f ms (%zu nodes, one launch), "
                "2x4 graph %.3f ms (%zu nodes): 2x4 / mesh 1 %.2f\n",
                f.eager, eager.eager_launches(), f.graph, graph.graph_nodes(), f.graph_2x4, graph_2x4.graph_nodes(),
                f.graph_2x4 / f.graph);
  }
  if (with_torch) {
    for (const bool compiled : {false, true}) {
      std::vector<std::string> args{"--device", "cuda"};
      if (compiled) args.push_back("--compile");
      bench::torch_run torch(spec, in, steps, args);
      if (!torch.ok()) {
        std::printf("  PyTorch%s did not start (torch with CUDA importable by $SPMD_BENCH_PYTHON or python3?)\n",
                    compiled ? " with torch.compile" : "");
        continue;
      }
      const double ms = time_steps(compiled ? "PyTorch torch.compile" : "PyTorch eager", compiled ? warmup + 10 : warmup,
                                   measured, [&](int s) { return torch.step(s); });
      (compiled ? f.torch_compiled : f.torch) = ms;
      std::printf("  PyTorch %s %.3f ms: spmd graph / it %.3f\n", compiled ? "torch.compile" : "eager", ms, f.graph / ms);
    }
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  bool with_torch = true;
  int measured = 100;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--no-torch") with_torch = false;
    else if (a == "--steps" && i + 1 < argc) measured = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "train_cuda_vs_torch: unknown argument %s (--no-torch, --steps N)\n", a.c_str());
      return 2;
    }
  }
  if (measured < 1) {
    std::fprintf(stderr, "train_cuda_vs_torch: --steps must be at least 1\n");
    return 2;
  }
  if (!cu::available()) {
    std::printf("train_cuda_vs_torch: no CUDA device here; nothing measured\n");
    return 0;
  }
  cudaDeviceProp prop{};
  (void)cudaGetDeviceProperties(&prop, 0);
  std::printf("device: %s\n", prop.name);
  const figures tiny = compare<tiny_sizes>("tiny", 20, measured, with_torch);
  const figures wide = compare<wide_sizes>("wide", 20, std::max(20, measured / 4), with_torch);
  if (tiny.torch > 0 && wide.torch > 0)
    std::printf("RESULT cuda_tiny_vs_torch=%.3f cuda_wide_vs_torch=%.3f\n", tiny.graph / tiny.torch, wide.graph / wide.torch);
  else
    std::printf("(no RESULT line: PyTorch was not run)\n");
  return 0;
}
