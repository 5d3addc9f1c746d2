// bench/op_overhead — what a DTensor operator costs beyond its local compute.
//
//   meson compile -C build bench/op_overhead && build/bench/op_overhead [--quick]
//
// For add, matmul and sum on a 2x4 mesh (f32), from dispatch-bound sizes (a few elements per
// rank) to compute-bound ones, the same work two ways:
//   dtensor  the user API: spmd::sim::add(x, y), matmul(x, w), sum<1>(x) — inputs already in
//            the placements the compiler picks, so no communication: what remains is the cost
//            of the call itself;
//   raw      the same local kernel (sim::op_kernel<Op>::run) called on every rank's block,
//            output blocks allocated the same way (a local_set), no dtensor, no layout.
// Both loops create and destroy their outputs every call, as a framework op does. The
// figure is the time per call, the minimum over several samples of many calls each.
// Timings drift with the machine's load; instructions do not. The small cases are also run
// under valgrind's callgrind (when valgrind is installed): the program starts itself as
// `valgrind --tool=callgrind ... op_overhead --callgrind`, which runs each small case's two
// loops of `instr_calls` calls between CALLGRIND_ZERO_STATS and CALLGRIND_DUMP_STATS_AT, and
// the parent reads the instruction counts (Ir) of each dump.
// The last line: RESULT op_overhead_ratio=<worst dtensor / raw time over the small sizes>
//                       op_overhead_instr=<worst dtensor / raw instructions per call, small>
//                       dyn_instr=<worst instructions of the same call over a mesh whose sizes
//                                  are given at run time (mesh<dyn, dyn> bound to 2x4) / the
//                                  static mesh's, small> (issue 55: <= 1.05)
// (small: at most 1 Ki elements per rank block, where dispatch is all there is). The program
// is built at -O3 (op_overhead) and at -O2 (op_overhead_o2); op_overhead runs the other too,
// prints both tables, and its RESULT gives the worse level's figure for each.
#include <algorithm>
#include <cstdlib>
#include <map>
#include <sstream>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifndef SPMD_BENCH_OPT
#define SPMD_BENCH_OPT "the build's flags"
#endif

#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/matmul.hpp"
#include "spmd/runtime/ops/reduction.hpp"
#include "spmd/backends/sim/sim.hpp"

#include "callgrind.hpp"
#include "timing.hpp"

namespace {

using namespace spmd;
namespace sim = spmd::sim;
using Mesh = mesh<2, 4>;
using Dyn = mesh<dyn, dyn>;  // bound to 2x4 in main

/// Calls counted per path under callgrind (bench/callgrind.hpp).
constexpr int instr_calls = 200;
std::string current_case;

/// Minimum time per call of each of two functions, sampled alternately and in alternating
/// order (a b, b a, ...): whichever runs first in a pair pays for the other's allocator and
/// cache state, about 10% at the smallest sizes, so a fixed order would bias the ratio.
template <class A, class B>
std::pair<double, double> compare(A&& a, B&& b, int samples, double min_seconds) {
  if (bench::callgrind_mode) {
    bench::count_instructions(a, current_case + "|dtensor", 5, instr_calls);
    bench::count_instructions(b, current_case + "|raw", 5, instr_calls);
    return {0, 0};
  }
  double ta = 1e300, tb = 1e300;
  for (int s = 0; s < samples; ++s) {
    if (s % 2 == 0) {
      ta = std::min(ta, bench::ns_per_call(a, min_seconds));
      tb = std::min(tb, bench::ns_per_call(b, min_seconds));
    } else {
      tb = std::min(tb, bench::ns_per_call(b, min_seconds));
      ta = std::min(ta, bench::ns_per_call(a, min_seconds));
    }
  }
  return {ta, tb};
}

/// Every rank's output block shape, worked out once (a hand-written program knows them).
template <class OutLayout>
std::vector<shape_vec> block_shapes() {
  std::vector<shape_vec> v(static_cast<std::size_t>(Mesh::size));
  for (index_t i = 0; i < Mesh::size; ++i)
    for (index_t e : OutLayout{}.local_shape(Mesh::rank_at(i))) v[static_cast<std::size_t>(i)].push_back(e);
  return v;
}

sim::op_rank_info rank_info(index_t rank) {
  sim::op_rank_info info;
  info.rank = rank;
  return info;
}

/// The raw path: Op's local kernel on every rank's block of the inputs' locals.
template <class Op, class... In>
sim::local_set<float> raw_call(const Op& op, const std::vector<shape_vec>& shapes, const In&... in) {
  sim::local_set<float> out(Mesh::size);
  for (index_t i = 0; i < Mesh::size; ++i) {
    out.assign(i, shapes[static_cast<std::size_t>(i)]);
    sim::op_kernel<Op>::run(op, out.view(i), rank_info(Mesh::rank_at(i)), in.view(i)...);
  }
  return out;
}

std::vector<float> iota(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 97) * 0.01f;
  return v;
}

/// Under callgrind: the dtensor call over the dynamic mesh (its instructions against the
/// static mesh's: what a mesh given at run time costs after the first call).
template <class F>
void count_dyn(F&& f) {
  if (bench::callgrind_mode) bench::count_instructions(f, current_case + "|dyn", 5, instr_calls);
}

struct row {
  std::string op;
  std::string shape;
  long per_rank;
  double dtensor_ns, raw_ns;
};

template <index_t R, index_t C>
void bench_add(std::vector<row>& rows, int samples, double secs) {
  using L = layout<Mesh, placements<shard<0>, shard<1>>, extents<R, C>>;
  const auto x = sim::distribute_tensor<L>(iota(R * C)), y = sim::distribute_tensor<L>(iota(R * C));
  using Op = ops::binary<ops::add_fn>;
  const auto shapes = block_shapes<L>();
  current_case = "add " + std::to_string(R) + "x" + std::to_string(C);
  auto [d, r] = compare([&] { auto z = sim::add(x, y); asm volatile("" : : "r"(&z) : "memory"); },
                        [&] {
                          auto z = raw_call(Op{}, shapes, x.locals(), y.locals());
                          asm volatile("" : : "r"(&z) : "memory");
                        },
                        samples, secs);
  if (bench::callgrind_mode) {
    using LD = layout<Dyn, placements<shard<0>, shard<1>>, extents<R, C>>;
    const auto xd = sim::distribute_tensor<LD>(iota(R * C)), yd = sim::distribute_tensor<LD>(iota(R * C));
    count_dyn([&] { auto z = sim::add(xd, yd); asm volatile("" : : "r"(&z) : "memory"); });
  }
  rows.push_back({"add", std::to_string(R) + "x" + std::to_string(C), (long)(R * C / Mesh::size), d, r});
}

template <index_t M, index_t K, index_t N>
void bench_matmul(std::vector<row>& rows, int samples, double secs) {
  using LX = layout<Mesh, placements<shard<0>, replicate>, extents<M, K>>;
  using LW = layout<Mesh, placements<replicate, shard<1>>, extents<K, N>>;
  using LY = layout<Mesh, placements<shard<0>, shard<1>>, extents<M, N>>;
  const auto x = sim::distribute_tensor<LX>(iota(M * K));
  const auto w = sim::distribute_tensor<LW>(iota(K * N));
  const auto shapes = block_shapes<LY>();
  current_case = "matmul " + std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N);
  auto [d, r] = compare([&] { auto z = sim::matmul(x, w); asm volatile("" : : "r"(&z) : "memory"); },
                        [&] {
                          auto z = raw_call(ops::matmul{}, shapes, x.locals(), w.locals());
                          asm volatile("" : : "r"(&z) : "memory");
                        },
                        samples, secs);
  if (bench::callgrind_mode) {
    const auto xd = sim::distribute_tensor<layout<Dyn, placements<shard<0>, replicate>, extents<M, K>>>(iota(M * K));
    const auto wd = sim::distribute_tensor<layout<Dyn, placements<replicate, shard<1>>, extents<K, N>>>(iota(K * N));
    count_dyn([&] { auto z = sim::matmul(xd, wd); asm volatile("" : : "r"(&z) : "memory"); });
  }
  rows.push_back({"matmul", std::to_string(M) + "x" + std::to_string(K) + "x" + std::to_string(N),
                  (long)(M * N / Mesh::size), d, r});
}

template <index_t R, index_t C>
void bench_sum(std::vector<row>& rows, int samples, double secs) {
  using L = layout<Mesh, placements<shard<0>, shard<0>>, extents<R, C>>;  // rows over all 8
  using LO = layout<Mesh, placements<shard<0>, shard<0>>, extents<R>>;
  const auto x = sim::distribute_tensor<L>(iota(R * C));
  using Op = ops::reduction<ops::reduce_kind::sum, false, 1>;
  const auto shapes = block_shapes<LO>();
  current_case = "sum(dim 1) " + std::to_string(R) + "x" + std::to_string(C);
  auto [d, r] = compare([&] { auto z = sim::sum<1>(x); asm volatile("" : : "r"(&z) : "memory"); },
                        [&] {
                          auto z = raw_call(Op{}, shapes, x.locals());
                          asm volatile("" : : "r"(&z) : "memory");
                        },
                        samples, secs);
  if (bench::callgrind_mode) {
    const auto xd = sim::distribute_tensor<layout<Dyn, placements<shard<0>, shard<0>>, extents<R, C>>>(iota(R * C));
    count_dyn([&] { auto z = sim::sum<1>(xd); asm volatile("" : : "r"(&z) : "memory"); });
  }
  rows.push_back({"sum(dim 1)", std::to_string(R) + "x" + std::to_string(C), (long)(R * C / Mesh::size), d, r});
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  bench::callgrind_mode = argc > 1 && std::strcmp(argv[1], "--callgrind") == 0;
  const int samples = quick ? 4 : 10;
  const double secs = quick ? 0.02 : 0.05;
  bind_mesh<Dyn>(dims<2>{2, 4});
  std::vector<row> rows;
  // Per-rank blocks of 8, 64 and 1024 elements (small), then 16 Ki and 256 Ki.
  bench_add<8, 8>(rows, samples, secs);
  bench_add<16, 32>(rows, samples, secs);
  bench_add<64, 128>(rows, samples, secs);
  if (!bench::callgrind_mode) {
    bench_add<256, 512>(rows, samples, secs);
    bench_add<1024, 2048>(rows, samples, secs);
  }
  bench_matmul<4, 4, 16>(rows, samples, secs);
  bench_matmul<16, 16, 32>(rows, samples, secs);
  bench_matmul<64, 64, 128>(rows, samples, secs);
  if (!bench::callgrind_mode) bench_matmul<256, 256, 512>(rows, samples, secs);
  bench_sum<64, 1>(rows, samples, secs);
  bench_sum<64, 8>(rows, samples, secs);
  bench_sum<256, 32>(rows, samples, secs);
  if (bench::callgrind_mode) return 0;
  bench_sum<4096, 32>(rows, samples, secs);
  bench_sum<16384, 128>(rows, samples, secs);

  std::map<std::string, double> instr = bench::callgrind_counts(argv[0], "op_overhead", instr_calls);
  std::printf("# built with %s\n", SPMD_BENCH_OPT);
  std::printf("%-11s %-14s %10s %14s %14s %8s %12s %12s %8s %12s %8s\n", "op", "global shape", "per rank",
              "dtensor ns", "raw ns", "ratio", "dtensor Ir", "raw Ir", "Ir ratio", "dyn Ir", "dyn/dt");
  double worst_small = 0, worst_instr = 0, worst_dyn = 0;
  for (const row& r : rows) {
    const double ratio = r.dtensor_ns / r.raw_ns;
    const auto d = instr.find(r.op + " " + r.shape + "|dtensor");
    const auto w = instr.find(r.op + " " + r.shape + "|raw");
    const auto y = instr.find(r.op + " " + r.shape + "|dyn");
    std::printf("%-11s %-14s %10ld %14.1f %14.1f %8.3f", r.op.c_str(), r.shape.c_str(), r.per_rank,
                r.dtensor_ns, r.raw_ns, ratio);
    if (d != instr.end() && w != instr.end() && y != instr.end()) {
      std::printf(" %12.0f %12.0f %8.3f %12.0f %8.3f\n", d->second, w->second, d->second / w->second, y->second,
                  y->second / d->second);
      if (r.per_rank <= 1024) {
        worst_instr = std::max(worst_instr, d->second / w->second);
        worst_dyn = std::max(worst_dyn, y->second / d->second);
      }
    } else {
      std::printf(" %12s %12s %8s %12s %8s\n", "-", "-", "-", "-", "-");
    }
    if (r.per_rank <= 1024) worst_small = std::max(worst_small, ratio);
  }
  if (instr.empty())
    std::printf("# no instruction counts: valgrind is not installed or its run failed\n");
  std::printf("# %s: op_overhead_ratio=%.3f op_overhead_instr=%s dyn_instr=%s\n", SPMD_BENCH_OPT, worst_small,
              instr.empty() ? "n/a" : std::to_string(worst_instr).substr(0, 5).c_str(),
              instr.empty() ? "n/a" : std::to_string(worst_dyn).substr(0, 5).c_str());
#ifdef SPMD_BENCH_SIBLING
  // The same program built at the other optimisation level (bench/meson.build); the RESULT
  // line gives the worse of the two for each figure.
  const std::string cmd = std::string(SPMD_BENCH_SIBLING) + (quick ? " --quick" : "");
  FILE* p = popen(cmd.c_str(), "r");
  char line[512];
  double other_ratio = -1, other_instr = -1, other_dyn = -1;
  while (p && std::fgets(line, sizeof line, p)) {
    const std::string l = line;
    if (l.rfind("RESULT", 0) == 0) continue;  // its figures are in its "# -O2:" line
    std::fputs(line, stdout);
    const auto r = l.find("op_overhead_ratio="), i = l.find("op_overhead_instr="), y = l.find("dyn_instr=");
    if (l.rfind("# ", 0) == 0 && r != std::string::npos && i != std::string::npos && y != std::string::npos) {
      other_ratio = std::atof(l.c_str() + r + 18);
      if (l.compare(i + 18, 3, "n/a") != 0) other_instr = std::atof(l.c_str() + i + 18);
      if (l.compare(y + 10, 3, "n/a") != 0) other_dyn = std::atof(l.c_str() + y + 10);
    }
  }
  if (!p || pclose(p) != 0 || other_ratio < 0) {
    std::fprintf(stderr, "op_overhead: %s failed\n", SPMD_BENCH_SIBLING);
    return 1;
  }
  worst_small = std::max(worst_small, other_ratio);
  if (other_instr < 0) instr.clear();  // one level without counts: no figure
  worst_instr = std::max(worst_instr, other_instr);
  worst_dyn = std::max(worst_dyn, other_dyn);
#endif
  std::printf("RESULT op_overhead_ratio=%.3f op_overhead_instr=%s dyn_instr=%s\n", worst_small,
              instr.empty() ? "n/a" : std::to_string(worst_instr).substr(0, 5).c_str(),
              instr.empty() ? "n/a" : std::to_string(worst_dyn).substr(0, 5).c_str());
  return 0;
}
