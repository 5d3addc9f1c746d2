// bench/redistribute_sim — the simulation backend's redistribute against the memcpy floor.
//
//   meson compile -C build redistribute-sim-bench && build/bench/redistribute_sim [--quick]
//
// For S(0)->R, S(0)->S(1), P->R and P->S(0) on an 8-rank mesh and on a 2x4 mesh (both mesh
// dims carry the placement), f32 square tensors of 4 KiB to 256 MiB. Columns follow
// nccl-tests (size, time, algbw, busbw) plus the floor: the fewest bytes the simulation
// must move — (bytes it must read + bytes it must write) / 2, so one memcpy of b bytes
// counts b — over this machine's memcpy bandwidth, measured in the same run:
//   S(0) -> R     every rank writes the whole tensor and reads every shard: n*S
//   S(0) -> S(1)  every element lands in a new block: S
//   P -> R        read n partial tensors, write n results: n*S
//   P -> S(0)     read n partial tensors, write one tensor's worth of blocks: (n+1)/2*S
// The last line: RESULT large_ratio=<floor / achieved at 256 MiB, worst op>
//                       small_us=<median us per redistribute at 4 KiB, worst op>.
// Buffers: glibc is told to keep freed memory (no mmap/trim for large blocks), as a
// caching allocator would, so repeated redistributes do not measure page faults.
#include <malloc.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/plan.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/spmd.hpp"

namespace {

using spmd::dyn;
using spmd::extents;
using spmd::index_t;
using spmd::layout;
using spmd::partial;
using spmd::placements;
using spmd::replicate;
using spmd::shard;
using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t0) {
  return std::chrono::duration<double>(clock_type::now() - t0).count();
}

/// memcpy bandwidth in bytes/s (bytes copied per second), large warm buffers.
double memcpy_bandwidth() {
  const std::size_t bytes = std::size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  std::vector<double> rates;
  for (int i = 0; i < 7; ++i) {
    const auto t0 = clock_type::now();
    std::memcpy(b.data(), a.data(), bytes);
    rates.push_back(static_cast<double>(bytes) / seconds_since(t0));
    std::swap(a, b);
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

struct sample {
  double median_us;
};

/// Median time of f over repeated runs: enough runs to fill ~0.3 s, at least 5; tiny
/// calls are timed in batches so the clock's cost does not count.
template <class F>
sample time_it(F&& f) {
  f();  // warm: allocations, schedules
  const auto t0 = clock_type::now();
  f();
  const double once = std::max(seconds_since(t0), 1e-9);
  const int batch = once < 1e-4 ? static_cast<int>(1e-4 / once) + 1 : 1;
  const int runs = std::max(5, std::min(200, static_cast<int>(0.3 / (once * batch))));
  std::vector<double> us;
  for (int r = 0; r < runs; ++r) {
    const auto t = clock_type::now();
    for (int b = 0; b < batch; ++b) f();
    us.push_back(seconds_since(t) * 1e6 / batch);
  }
  std::sort(us.begin(), us.end());
  return {us[us.size() / 2]};
}

struct op_result {
  std::string name;
  double us_4k = 0;
  double ratio_large = 0;
};

enum class op { s0_r, s0_s1, p_r, p_s0 };

const char* op_name(op o) {
  switch (o) {
    case op::s0_r: return "S(0)->R";
    case op::s0_s1: return "S(0)->S(1)";
    case op::p_r: return "P->R";
    case op::p_s0: return "P->S(0)";
  }
  return "?";
}

/// Floor bytes (memcpy-equivalent) for a global tensor of `bytes` over n ranks.
double floor_bytes(op o, double bytes, double n) {
  switch (o) {
    case op::s0_r: return n * bytes;
    case op::s0_s1: return bytes;
    case op::p_r: return n * bytes;
    case op::p_s0: return (n + 1) / 2 * bytes;
  }
  return 0;
}

/// nccl-tests' bus-bandwidth factor of the collective each op is.
double bus_factor(op o, double n) {
  return o == op::p_r ? 2 * (n - 1) / n : (n - 1) / n;
}

/// Placements of each op on a mesh of D dims (the same placement on every mesh dim).
template <op O, int D>
struct op_placements;
template <op O>
struct op_placements<O, 1> {
  using src = std::conditional_t<O == op::p_r || O == op::p_s0, placements<partial<>>, placements<shard<0>>>;
  using dst = std::conditional_t<O == op::s0_r || O == op::p_r, placements<replicate>,
                                 std::conditional_t<O == op::s0_s1, placements<shard<1>>, placements<shard<0>>>>;
};
template <op O>
struct op_placements<O, 2> {
  using src = std::conditional_t<O == op::p_r || O == op::p_s0, placements<partial<>, partial<>>,
                                 placements<shard<0>, shard<0>>>;
  using dst = std::conditional_t<O == op::s0_r || O == op::p_r, placements<replicate, replicate>,
                                 std::conditional_t<O == op::s0_s1, placements<shard<1>, shard<1>>,
                                                    placements<shard<0>, shard<0>>>>;
};

/// Time one op at one size; Ext is extents<...> (static for the small case).
template <class Mesh, op O, class Ext>
double run_case(Ext ext, double memcpy_bw, bool print) {
  using P = op_placements<O, Mesh::ndim>;
  using Src = layout<Mesh, typename P::src, Ext>;
  using Dst = layout<Mesh, typename P::dst, Ext>;
  const index_t rows = ext.extent(0), cols = ext.extent(1);
  std::vector<float> global(static_cast<std::size_t>(rows * cols));
  for (std::size_t i = 0; i < global.size(); ++i) global[i] = static_cast<float>(i % 1024);
  const auto x = spmd::sim::distribute_tensor<Src>(global, Src{ext});
  const sample s = time_it([&] {
    auto y = x.template redistribute<typename P::dst>();
    asm volatile("" : : "r"(&y) : "memory");
  });
  const double bytes = static_cast<double>(global.size() * sizeof(float));
  const double n = static_cast<double>(Mesh::size);
  const double floor_us = floor_bytes(O, bytes, n) / memcpy_bw * 1e6;
  if (print) {
    const double algbw = bytes / (s.median_us * 1e-6) / 1e9;
    std::printf("%12.0f %10lld %6s %-11s %11.2f %9.3f %9.3f %11.2f %7.3f  %s\n", bytes,
                static_cast<long long>(rows * cols), "f32", op_name(O), s.median_us, algbw,
                algbw * bus_factor(O, n), floor_us, floor_us / s.median_us,
                std::string(spmd::plan_of<Src, Dst, float>::trace().view()).c_str());
  }
  return s.median_us;
}

template <class Mesh, op O>
op_result run_op(const char* mesh_name, double memcpy_bw, int max_log4) {
  op_result r{std::string(mesh_name) + " " + op_name(O)};
  // 4 KiB = 32x32 f32, with static extents: the compile-time path, as for small tensors.
  r.us_4k = run_case<Mesh, O>(extents<32, 32>{}, memcpy_bw, true);
  double us = 0, floor_us = 0;
  for (int k = 1; k <= max_log4; ++k) {  // 16 KiB ... 256 MiB, dynamic extents
    const index_t side = index_t{32} << k;
    us = run_case<Mesh, O>(extents<dyn, dyn>{side, side}, memcpy_bw, true);
    const double bytes = static_cast<double>(side * side) * sizeof(float);
    floor_us = floor_bytes(O, bytes, static_cast<double>(Mesh::size)) / memcpy_bw * 1e6;
  }
  r.ratio_large = floor_us / us;
  return r;
}

template <class Mesh>
void run_mesh(const char* mesh_name, double memcpy_bw, int max_log4, std::vector<op_result>& all) {
  std::printf("\n# mesh %s (%lld ranks)\n", mesh_name, static_cast<long long>(Mesh::size));
  std::printf("%12s %10s %6s %-11s %11s %9s %9s %11s %7s  %s\n", "size(B)", "count", "type", "op",
              "time(us)", "algbw", "busbw", "floor(us)", "ratio", "plan");
  all.push_back(run_op<Mesh, op::s0_r>(mesh_name, memcpy_bw, max_log4));
  all.push_back(run_op<Mesh, op::s0_s1>(mesh_name, memcpy_bw, max_log4));
  all.push_back(run_op<Mesh, op::p_r>(mesh_name, memcpy_bw, max_log4));
  all.push_back(run_op<Mesh, op::p_s0>(mesh_name, memcpy_bw, max_log4));
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const int max_log4 = quick ? 3 : 8;  // 256 MiB = 8192^2 f32 = 32 << 8
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, -1);

  const double bw = memcpy_bandwidth();
  std::printf("# spmd simulation backend: redistribute, f32, median of repeated runs\n");
  std::printf("# memcpy bandwidth (256 MiB, this run): %.2f GB/s\n", bw / 1e9);
  std::printf("# algbw = size / time, busbw = algbw x (n-1)/n (x 2(n-1)/n for P->R), as nccl-tests\n");
  std::printf("# floor = fewest bytes the simulation must move / memcpy bandwidth; ratio = floor / time\n");
  std::vector<op_result> all;
  run_mesh<spmd::mesh<8>>("8", bw, max_log4, all);
  run_mesh<spmd::mesh<2, 4>>("2x4", bw, max_log4, all);

  double worst_ratio = 1e9, worst_us = 0;
  std::string ratio_op, us_op;
  for (const op_result& r : all) {
    if (r.ratio_large < worst_ratio) worst_ratio = r.ratio_large, ratio_op = r.name;
    if (r.us_4k > worst_us) worst_us = r.us_4k, us_op = r.name;
  }
  std::printf("\n# worst ratio at the largest size: %s; slowest at 4 KiB: %s\n", ratio_op.c_str(),
              us_op.c_str());
  std::printf("RESULT large_ratio=%.3f small_us=%.3f%s\n", worst_ratio, worst_us,
              quick ? " (quick run: largest size 256 KiB)" : "");
  return 0;
}
