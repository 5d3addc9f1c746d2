// bench/redistribute_cuda — the CUDA backend's redistribute (every rank on one GPU) against
// the floor of the bytes it must move, measured in the same run.
//
//   meson compile -C build redistribute_cuda && build/bench/redistribute_cuda [--quick]
//       [--torch FILE]   (FILE: bench/localtensor_cuda.py's output on the same GPU)
//   SPMD_CUDA_SMALL_STEP_BLOCKS=N build/bench/redistribute_cuda --quick   small steps' launches
//       spread over N blocks at least (step_table.hpp: inline_spread_blocks)
//
// Cases on 8 ranks, f32, global tensors of size/256 rows of 64 columns, size = the global
// tensor's bytes (nccl-tests' size for all_gather and all_reduce), 4 KiB to 1 GiB:
//   mesh 8:    S(0) -> R,  S(0) -> S(1),  P -> R,  P -> S(0)
//   mesh 2x4:  the same placement on both mesh dims ((S(0),S(0)) -> (R,R), ...)
// Columns follow nccl-tests: size, count, type, redop, time (us), algbw, busbw (GB/s); then the
// floor (us) and floor/time, the time of the same redistribute replayed from a CUDA graph,
// and, with --torch, LocalTensor's time and LocalTensor / spmd.
//
// Floor: every rank's output must be written once and every input element read once (all
// ranks share the GPU's memory, so nothing crosses a link): S(0)->R reads G and writes 8G,
// S(0)->S(1) G and G, P->R 8G and 8G, P->S(0) 8G and G. Over the device-to-device copy
// bandwidth measured first (cudaMemcpyAsync of 1 GiB, read + write bytes per second).
// Time: CUDA events around a loop of redistributes after two warm-up calls; the median of
// 5 rounds. The launch floor is measured the same way first: an empty kernel, and an empty
// kernel with the step kernel's 2 KiB of parameters; the small-size lines say how many
// floors a 4 KiB redistribute takes. Last line:
//   RESULT cuda_large_ratio=<worst floor/time at >= 64 MiB> small_us=<worst us at 4 KiB>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "cuda_timing.hpp"
#include "launch_floor.hpp"
#include "spmd/backends/cuda/cuda.hpp"
#include "spmd/backends/cuda/step_table.hpp"

namespace {

using spmd::dyn;
using spmd::index_t;
using spmd::extents;
using spmd::layout;
using spmd::placements;
using spmd::replicate;
using spmd::shard;
using P = spmd::partial<spmd::reduce_op::sum>;
namespace cu = spmd::cuda;

constexpr index_t cols = 64;

using bench::copy_bandwidth;
using bench::event_timer;

struct row {
  std::string mesh, name;
  double size = 0, us = 0, graph_us = 0, floor_us = 0;
};

/// Microseconds per replay of a CUDA graph holding what f puts on the current stream.
template <class F>
double graph_us(event_timer& t, F&& f) {
  cudaGraph_t graph{};
  cudaGraphExec_t exec{};
  cu::check(cudaStreamBeginCapture(cu::current_stream(), cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  f();
  cu::check(cudaStreamEndCapture(cu::current_stream(), &graph), "cudaStreamEndCapture");
  cu::check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
  const double us = t.us([&] { cu::check(cudaGraphLaunch(exec, cu::current_stream()), "cudaGraphLaunch"); });
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  return us;
}

/// Reads bench/localtensor_cuda.py's lines "<mesh> <case> <size bytes> <us>".
std::map<std::string, double> torch_times(const std::string& file) {
  std::map<std::string, double> m;
  std::ifstream in(file);
  std::string mesh, name;
  double size = 0, us = 0;
  while (in >> mesh >> name >> size >> us) m[mesh + " " + name + " " + std::to_string(static_cast<long long>(size))] = us;
  return m;
}

template <class Mesh, class Src, class Dst>
row run_case(const char* mesh, const char* name, index_t bytes, double read_x, double write_x, double bw) {
  using E = extents<dyn, dyn>;
  using LS = layout<Mesh, Src, E>;
  const index_t rows = bytes / static_cast<index_t>(sizeof(float)) / cols;
  std::vector<float> g(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 1000) * 0.5f;
  const auto x = cu::distribute_tensor<LS>(g, LS{E{rows, cols}});
  event_timer t;
  row r;
  r.mesh = mesh;
  r.name = name;
  r.size = static_cast<double>(bytes);
  r.us = t.us([&] { (void)cu::redistribute<Dst>(x); });
  r.floor_us = (read_x + write_x) * static_cast<double>(bytes) / bw * 1e6;
  // The same redistribute from a CUDA graph (its allocations and frees captured with it).
  r.graph_us = graph_us(t, [&] { (void)cu::redistribute<Dst>(x); });
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string torch_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--torch" && i + 1 < argc) torch_file = argv[++i];
    else {
      std::fprintf(stderr, "usage: redistribute_cuda [--quick] [--torch FILE]\n");
      return 2;
    }
  }
  try {
    cu::require_device("redistribute_cuda");
  } catch (const cu::no_device& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  cudaDeviceProp prop{};
  int dev = 0;
  cu::check(cudaGetDevice(&dev), "cudaGetDevice");
  cu::check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  // A stream of our own (the default per-thread stream would do as well).
  cudaStream_t s{};
  cu::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cu::stream_scope scope(s);
  const double bw = copy_bandwidth();
  std::printf("# %s, device-to-device copy %.1f GB/s (read + write)\n", prop.name, bw / 1e9);
  std::printf("# small steps over %lld blocks at least (SPMD_CUDA_SMALL_STEP_BLOCKS; the library's default %lld)\n",
              static_cast<long long>(cu::small_step_blocks()), static_cast<long long>(cu::inline_spread_blocks));
  double launch_us = 0, launch_params_us = 0;
  {
    event_timer t;
    launch_us = t.us([&] { bench::launch_empty(s); });
    const cu::step_view v{};
    const cu::rank_ptrs<cu::wide16> p{};
    launch_params_us = t.us([&] { bench::launch_empty_step_params(v, p, s); });
    static const bench::param_bytes<6144> p6{};
    static const bench::param_bytes<16384> p16{};
    const double p6_us = t.us([&] { bench::launch_empty_bytes(p6, s); });
    const double p16_us = t.us([&] { bench::launch_empty_bytes(p16, s); });
    // The pool's allocation and free as a redistribute uses them (a block, on the stream).
    const double alloc_us = t.us([&] { cu::device_block b(8 * 4096); });
    std::printf("# launch floor: empty kernel %.2f us; with the step kernel's 2 KiB of parameters %.2f us, "
                "with 6 KiB %.2f us, 16 KiB %.2f us; cudaMallocAsync + cudaFreeAsync of 32 KiB %.2f us\n",
                launch_us, launch_params_us, p6_us, p16_us, alloc_us);
    // The same floor for a graph replay: a graph of one empty kernel, and one that also holds
    // an allocation and a free node as a captured redistribute does.
    const double graph_empty_us = graph_us(t, [&] { bench::launch_empty(s); });
    const double graph_alloc_us = graph_us(t, [&] {
      cu::device_block b(8 * 4096);
      bench::launch_empty(s);
    });
    std::printf("# graph floor: one empty kernel %.2f us; with an allocation and a free node %.2f us\n",
                graph_empty_us, graph_alloc_us);
  }
  const std::map<std::string, double> torch = torch_file.empty() ? std::map<std::string, double>{} : torch_times(torch_file);

  std::vector<row> rows;
  const index_t max_bytes = quick ? index_t{64} << 20 : index_t{1} << 30;
  for (index_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    using M8 = spmd::mesh<8>;
    using M24 = spmd::mesh<2, 4>;
    rows.push_back(run_case<M8, placements<shard<0>>, placements<replicate>>("8", "S(0)->R", bytes, 1, 8, bw));
    rows.push_back(run_case<M8, placements<shard<0>>, placements<shard<1>>>("8", "S(0)->S(1)", bytes, 1, 1, bw));
    rows.push_back(run_case<M8, placements<P>, placements<replicate>>("8", "P->R", bytes, 8, 8, bw));
    rows.push_back(run_case<M8, placements<P>, placements<shard<0>>>("8", "P->S(0)", bytes, 8, 1, bw));
    rows.push_back(run_case<M24, placements<shard<0>, shard<0>>, placements<replicate, replicate>>("2x4", "S(0)->R", bytes, 1, 8, bw));
    rows.push_back(run_case<M24, placements<shard<0>, shard<0>>, placements<shard<1>, shard<1>>>("2x4", "S(0)->S(1)", bytes, 1, 1, bw));
    rows.push_back(run_case<M24, placements<P, P>, placements<replicate, replicate>>("2x4", "P->R", bytes, 8, 8, bw));
    rows.push_back(run_case<M24, placements<P, P>, placements<shard<0>, shard<0>>>("2x4", "P->S(0)", bytes, 8, 1, bw));
  }
  std::printf("# %4s %-11s %12s %12s %5s %5s %11s %8s %8s %11s %7s %11s %11s %8s\n", "mesh", "case", "size", "count",
              "type", "redop", "time(us)", "algbw", "busbw", "floor(us)", "ratio", "graph(us)", "torch(us)", "torch/x");
  double worst_large = 1e30, worst_small = 0, worst_small_graph = 0;
  for (const row& r : rows) {
    const bool red = r.name[0] == 'P';
    const double n = 8, algbw = r.size / (r.us * 1e-6) / 1e9;
    const double bus = algbw * (r.name == "P->R" ? 2.0 * (n - 1) / n : (n - 1) / n);
    const double ratio = r.floor_us / r.us;
    const std::string key = r.mesh + " " + r.name + " " + std::to_string(static_cast<long long>(r.size));
    const auto it = torch.find(key);
    std::printf("  %4s %-11s %12.0f %12.0f %5s %5s %11.2f %8.2f %8.2f %11.2f %7.3f %11.2f", r.mesh.c_str(),
                r.name.c_str(), r.size, r.size / 4, "float", red ? "sum" : "none", r.us, algbw, bus, r.floor_us, ratio,
                r.graph_us);
    if (it != torch.end()) std::printf(" %11.1f %8.1f\n", it->second, it->second / r.us);
    else std::printf(" %11s %8s\n", "-", "-");
    if (r.size >= 64.0 * (1 << 20)) worst_large = std::min(worst_large, ratio);
    if (r.size == 4096) {
      worst_small = std::max(worst_small, r.us);
      worst_small_graph = std::max(worst_small_graph, r.graph_us);
    }
  }
  std::printf("# at 4 KiB: worst %.2f us eager (%.2f empty-kernel launches), %.2f us through a CUDA graph\n",
              worst_small, worst_small / launch_us, worst_small_graph);
  std::printf("RESULT cuda_large_ratio=%.3f small_us=%.2f\n", worst_large, worst_small);
  return 0;
}
