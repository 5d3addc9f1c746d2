// bench/step_kernels — the widened step kernel's choices, measured on the same tables, kernel
// time only (buffers allocated once), against the floor of bytes each step must move: the
// table as the backend finishes it (16-byte units; a transposing step of tile_big items or
// more by shared-memory tiles, another copy step in 32 or 64 bytes per item; ops of one size
// found by division; a small step's table as a kernel parameter: "inline"), read from device
// memory at every size ("arrays"), without the spread copies, without the direct look-up, and
// S(0)->S(1) without the tiles and with them at every size ("tiled": where tile_big should
// lie); the copy steps also spread at every size (spread_k items a thread), a small step's
// items over 8 and over 32 blocks at least ("8+ blocks", "32+ blocks": inline_spread_blocks
// is to follow them), and distribute_device_tensor's S(0) slicing step each way.
// (Earlier versions of this benchmark also built variants of the kernel body here: the logs
// in bench/results/step_kernels_h200_28*.txt and bench/RESULTS.md say what they measured.)
//
//   meson compile -C build step_kernels && build/bench/step_kernels [MiB]   (default 256)
//   build/bench/step_kernels --kib K   the same tables at K KiB, where launches, not bytes, cost:
//       each kernel's latency as 20 launches replayed from one CUDA graph, less 20 empty ones,
//       and the host's time per launch (its parameters copied: an inline table's 3 KiB more)
//   either with a last argument `case`: only the cases whose name starts with it (to profile
//       one kernel: ncu -c 1 ...)
//
// Cases on mesh 8, f32, a global tensor of MiB with 64 columns (bench/redistribute_cuda's):
// S(0)->R, S(0)->S(1), P->R, P->S(0).
// Floor: bench/redistribute_cuda's (read + write bytes over the device-to-device copy rate
// measured first). Time: CUDA events around 20 launches after 3, the best of 3 rounds.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/plan.hpp"
#include "launch_floor.hpp"
#include "spmd/backends/cuda/block_jobs.hpp"

namespace {

using spmd::index_t;
namespace cu = spmd::cuda;

void* device_alloc(std::size_t bytes) {
  void* p = nullptr;
  cu::check(cudaMalloc(&p, std::max<std::size_t>(bytes, 256)), "cudaMalloc");
  return p;
}

/// Milliseconds per call of f: 20 calls between events after 3, the best of 3 rounds.
template <class F>
double ms_per(F&& f) {
  cudaEvent_t a{}, b{};
  cu::check(cudaEventCreate(&a), "cudaEventCreate");
  cu::check(cudaEventCreate(&b), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) f();
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    cu::check(cudaEventRecord(a, nullptr), "cudaEventRecord");
    for (int i = 0; i < 20; ++i) f();
    cu::check(cudaEventRecord(b, nullptr), "cudaEventRecord");
    cu::check(cudaEventSynchronize(b), "cudaEventSynchronize");
    float ms = 0;
    cu::check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
    best = std::min(best, static_cast<double>(ms) / 20);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return best;
}

/// Host microseconds per call of f(stream): 200 calls on a stream timed on the host, the best of
/// 5 rounds, each round ended by a synchronisation outside the timed span — what a launch
/// costs the caller (its parameters copied into the launch included), not the device.
template <class F>
double host_us_per(F&& f) {
  cudaStream_t s{};
  cu::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  for (int i = 0; i < 20; ++i) f(s);
  cu::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 200; ++i) f(s);
    const auto t1 = std::chrono::steady_clock::now();
    cu::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / 200);
  }
  cudaStreamDestroy(s);
  return best;
}

/// Microseconds per launch of f, 20 launches captured in one CUDA graph and replayed (ms_per
/// over the replays): a small kernel's latency plus the graph's gap between two nodes.
template <class F>
double graph_us_per(F&& f) {
  cudaStream_t s{};
  cu::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaGraph_t g{};
  cudaGraphExec_t e{};
  cu::check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int i = 0; i < 20; ++i) f(s);
  cu::check(cudaStreamEndCapture(s, &g), "cudaStreamEndCapture");
  cu::check(cudaGraphInstantiate(&e, g, 0), "cudaGraphInstantiate");
  const double ms = ms_per([&] { cu::check(cudaGraphLaunch(e, nullptr), "cudaGraphLaunch"); });
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  return ms * 1e3 / 20;
}

spmd::placement_vec one(const spmd::placement& p) {
  spmd::placement_vec v{};
  v.push_back(p);
  return v;
}

struct tested {
  const char* name;
  spmd::placement from, to;
  double read_x, write_x;
  int table;  // 0: finished (tiles from tile_big items; a small step's table inline, as the
              // backend launches it); 1: widened only (16 bytes per item); 2: finished, ops
              // searched; 3: finished without tiles; 4: widened and spread (spread_k items a
              // thread, as spread_copies makes a large copy step); 5: finished with tiles at
              // any size; 6: finished, read from device memory even where it fits inline;
              // 7: finished, inline, a reduction's members loaded one at a time (batch 1);
              // 8, 9: finished, inline, its items spread over 8 or 32 blocks at least
              // (inline_threads; blocks of a warp or more), where it fits inline
};
const char* const table_names[] = {"", " 16B/item", " searched", " no tiles", " spread", " tiled", " arrays",
                                   " one load", " 8+ blocks", " 32+ blocks"};

/// A table packed into device memory (`mem`, for cudaFree) and its view there.
struct uploaded {
  void* mem;
  cu::step_view view;
};
uploaded upload(const cu::step_table& t) {
  std::vector<unsigned char> staged(cu::layout_of(t).bytes);
  cu::pack(t, staged.data());
  void* tab = device_alloc(staged.size());
  cu::check(cudaMemcpy(tab, staged.data(), staged.size(), cudaMemcpyHostToDevice), "cudaMemcpy");
  return {tab, cu::view_at(t, static_cast<const unsigned char*>(tab))};
}

/// Times the library's kernel on `v` and prints one line: with --kib its latency above an empty
/// kernel in a graph (`empty_us`), else its time against `floor_us`.
void report(const std::string& name, const cu::step_view& v, const cu::inline_table* in_param,
            const cu::rank_ptrs<cu::wide16>& ptrs, bool small, double empty_us, double floor_us,
            const std::string& blocks) {
  if (small) {
    auto launch = [&](cudaStream_t st) { cu::kernels::step_wide<float>(v, ptrs, st, in_param); };
    const double node = graph_us_per(launch);
    std::printf("  %-36s %10.2f %10.2f %10s %10.2f\n", name.c_str(), node, node - empty_us, blocks.c_str(),
                host_us_per(launch));
  } else {
    const double us = 1e3 * ms_per([&] { cu::kernels::step_wide<float>(v, ptrs, nullptr, in_param); });
    std::printf("  %-36s %10.1f %10.1f %7.3f\n", name.c_str(), us, floor_us, floor_us / us);
  }
}

/// What a finished table's kernel moves per thread, for the case's name.
std::string how(const cu::step_table& t, bool in_param) {
  if (t.tile_blocks > 0) return " (tiles)";
  if (in_param) return " (16B, inline)";
  return t.per_thread > 1 ? " (" + std::to_string(t.per_thread) + " x 16B)" : " (16B)";
}

}  // namespace

int main(int argc, char** argv) {
  const bool small = argc > 2 && std::string(argv[1]) == "--kib";
  const index_t kib = small ? std::atoll(argv[2]) : (argc > 1 ? std::atoll(argv[1]) : 256) * 1024;
  const int case_arg = small ? 3 : 2;
  const std::string only = argc > case_arg ? argv[case_arg] : "";
  auto wanted = [&](const std::string& name) { return name.rfind(only, 0) == 0; };
  if (kib <= 0 || argc > case_arg + 1) {
    std::fprintf(stderr, "usage: step_kernels [MiB] [case] | --kib K [case]\n");
    return 2;
  }
  int sms = 0, dev = 0;
  cu::check(cudaGetDevice(&dev), "cudaGetDevice");
  cu::check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), "cudaDeviceGetAttribute");
  cudaDeviceProp prop{};
  cu::check(cudaGetDeviceProperties(&prop, dev), "cudaGetDeviceProperties");
  const std::size_t big = std::size_t{1} << 30;
  void* x = device_alloc(big);
  void* y = device_alloc(big);
  const double copy_ms = ms_per([&] { cu::check(cudaMemcpyAsync(y, x, big, cudaMemcpyDeviceToDevice, nullptr), "cudaMemcpyAsync"); });
  const double bw = 2.0 * static_cast<double>(big) / (copy_ms * 1e-3);
  cudaFree(x);
  cudaFree(y);
  std::printf("# %s, %d SMs, device-to-device copy %.1f GB/s; global %lld KiB f32, 64 columns, mesh 8\n", prop.name,
              sms, bw / 1e9, static_cast<long long>(kib));
  const double empty_us = small ? graph_us_per([](cudaStream_t st) { bench::launch_empty(st); }) : 0;
  if (small)
    std::printf("# an empty kernel in the graph: %.2f us per node; launched, %.2f us of the host's time\n", empty_us,
                host_us_per([](cudaStream_t st) { bench::launch_empty(st); }));

  spmd::mesh_shape_vec mesh{};
  mesh.push_back(8);
  const index_t cols = 64, rows = kib * 1024 / 4 / cols;
  spmd::shape_vec global{};
  global.push_back(rows);
  global.push_back(cols);
  const spmd::placement P = spmd::make_partial(spmd::reduce_op::sum);
  const tested cases[] = {
      {"S(0)->R", spmd::make_shard(0), spmd::make_replicate(), 1, 8, 0},
      {"S(0)->S(1)", spmd::make_shard(0), spmd::make_shard(1), 1, 1, 0},
      {"S(0)->S(1)", spmd::make_shard(0), spmd::make_shard(1), 1, 1, 1},
      {"S(0)->S(1)", spmd::make_shard(0), spmd::make_shard(1), 1, 1, 2},
      {"S(0)->S(1)", spmd::make_shard(0), spmd::make_shard(1), 1, 1, 3},
      {"S(0)->S(1)", spmd::make_shard(0), spmd::make_shard(1), 1, 1, 4},
      {"S(0)->S(1)", spmd::make_shard(0), spmd::make_shard(1), 1, 1, 5},
      {"S(0)->R", spmd::make_shard(0), spmd::make_replicate(), 1, 8, 6},
      {"S(0)->R", spmd::make_shard(0), spmd::make_replicate(), 1, 8, 8},
      {"S(0)->R", spmd::make_shard(0), spmd::make_replicate(), 1, 8, 9},
      {"S(0)->S(1)", spmd::make_shard(0), spmd::make_shard(1), 1, 1, 6},
      {"P->R", P, spmd::make_replicate(), 8, 8, 0},
      {"P->R", P, spmd::make_replicate(), 8, 8, 2},
      {"P->R", P, spmd::make_replicate(), 8, 8, 6},
      {"P->R", P, spmd::make_replicate(), 8, 8, 7},
      {"P->R", P, spmd::make_replicate(), 8, 8, 8},
      {"P->R", P, spmd::make_replicate(), 8, 8, 9},
      {"P->S(0)", P, spmd::make_shard(0), 8, 1, 0},
      {"P->S(0)", P, spmd::make_shard(0), 8, 1, 2},
      {"P->S(0)", P, spmd::make_shard(0), 8, 1, 6},
      {"P->S(0)", P, spmd::make_shard(0), 8, 1, 7},
      {"P->S(0)", P, spmd::make_shard(0), 8, 1, 8},
      {"P->S(0)", P, spmd::make_shard(0), 8, 1, 9},
  };
  if (small)
    std::printf("# %-36s %10s %10s %10s %10s\n", "case (table, bytes per item)", "node(us)", "kernel(us)", "blocks",
                "host(us)");
  else std::printf("# %-36s %10s %10s %7s\n", "case (table, bytes per item)", "time(us)", "floor(us)", "ratio");
  for (const tested& c : cases) {
    if (!wanted(c.name)) continue;
    const auto a = spmd::make_spec(mesh, one(c.from), 2), b = spmd::make_spec(mesh, one(c.to), 2);
    const auto p = spmd::make_plan(a.spec, b.spec, 1e9);
    if (!a.ok() || !b.ok() || p.error != spmd::plan_error::none || p.value.steps.size() != 1) {
      std::printf("  %s: not a one-step plan here, left out\n", c.name);
      continue;
    }
    const spmd::plan_step& step = p.value.steps[0];
    const spmd::step_schedule s = spmd::build_schedule(step, global);
    cu::step_table t = cu::build_step_table(step, s, global);
    const cu::tiling tiles = c.table == 3 ? cu::tiling::never : c.table == 5 ? cu::tiling::always : cu::tiling::by_size;
    const bool wide = c.table == 1 || c.table == 4 ? cu::widen(t, 4) : cu::finish(t, 4, tiles);
    if (c.table == 4) {
      cu::mark_uniform(t);
      t.per_thread = cu::spread_k;
    }
    if (c.table == 2) t.uniform = 0;
    if (!wide) {
      std::printf("  %s: does not widen, left out\n", c.name);
      continue;
    }
    const bool in_param = c.table != 6 && cu::fits_inline(t);
    if ((c.table == 8 || c.table == 9) && !in_param) continue;  // the same as the finished row
    const uploaded up = upload(t);
    cu::inline_table packed = in_param ? cu::make_inline(t) : cu::inline_table{};
    if (c.table == 7) packed.batch = 1;
    if (c.table == 8 || c.table == 9) packed.threads = cu::inline_threads(t.items, c.table == 8 ? 8 : 32);
    cu::rank_ptrs<cu::wide16> ptrs{};
    std::vector<void*> owned;
    for (index_t r = 0; r < 8; ++r) {
      const spmd::local_box box = spmd::box_at(a.spec, global, spmd::unravel(mesh, r));
      const auto in_bytes = static_cast<std::size_t>(spmd::box_volume(box)) * 4;
      void* in = device_alloc(in_bytes);
      cu::check(cudaMemset(in, 0, in_bytes), "cudaMemset");
      owned.push_back(in);
      ptrs.in[r] = static_cast<const cu::wide16*>(in);
      if (s.ranks[static_cast<std::size_t>(r)].how == spmd::disposition::keep) {
        ptrs.out[r] = static_cast<cu::wide16*>(in);
      } else {
        void* out = device_alloc(static_cast<std::size_t>(s.ranks[static_cast<std::size_t>(r)].elems) * 4);
        owned.push_back(out);
        ptrs.out[r] = static_cast<cu::wide16*>(out);
      }
    }
    const double floor_us = (c.read_x + c.write_x) * static_cast<double>(kib) * 1024 / bw * 1e6;
    const index_t blocks = t.tile_blocks > 0 ? t.tile_blocks
                           : in_param        ? cu::inline_launch(packed).blocks
                                             : (t.items + 256 * t.per_thread - 1) / (256 * t.per_thread);
    report(std::string(c.name) + table_names[c.table] + how(t, in_param), up.view, in_param ? &packed : nullptr,
           ptrs, small, empty_us, floor_us, std::to_string(blocks));
    cu::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    for (void* q : owned) cudaFree(q);
    cudaFree(up.mem);
  }
  // distribute_device_tensor's slicing step for S(0) on mesh 8 (one contiguous block a rank):
  // finished, one item a thread, and spread. Floor: the global tensor read, the blocks written.
  if (wanted("distribute S(0)")) {
    const auto a = spmd::make_spec(mesh, one(spmd::make_shard(0)), 2);
    const std::size_t bytes = static_cast<std::size_t>(rows * cols) * 4;
    void* in = device_alloc(bytes);
    void* out = device_alloc(bytes);
    cu::check(cudaMemset(in, 0, bytes), "cudaMemset");
    for (int table : {0, 1, 4}) {
      cu::step_table t = cu::distribute_table(a.spec, global, {0, 8});
      const bool wide = table == 0 ? cu::finish(t, 4) : cu::widen(t, 4);
      cu::mark_uniform(t);
      if (!wide) continue;
      if (table == 4) t.per_thread = cu::spread_k;
      const uploaded up = upload(t);
      const bool in_param = table == 0 && cu::fits_inline(t);
      const cu::inline_table packed = in_param ? cu::make_inline(t) : cu::inline_table{};
      cu::rank_ptrs<cu::wide16> ptrs{};
      for (index_t r = 0; r < 8; ++r) {
        ptrs.in[r] = static_cast<const cu::wide16*>(in);
        ptrs.out[r] = static_cast<cu::wide16*>(out) + r * (static_cast<index_t>(bytes) / 16 / 8);
      }
      report(std::string("distribute S(0)") + table_names[table] + how(t, in_param), up.view,
             in_param ? &packed : nullptr, ptrs, small, empty_us, 2.0 * static_cast<double>(bytes) / bw * 1e6, "-");
      cu::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      cudaFree(up.mem);
    }
    cudaFree(in);
    cudaFree(out);
  }
  return 0;
}
