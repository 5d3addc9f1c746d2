// bench/redistribute_mpi — the MPI backend's redistribute against the raw MPI collective that
// moves the same bytes.
//
//   meson compile -C build redistribute_mpi && build/bench/redistribute_mpi [--quick]
//
// Run directly, it launches itself under mpirun with 2, 4 and 8 processes and ends with
//   RESULT mpi_vs_raw=<worst spmd time / raw time, over every case and size >= 1 MiB>
// Under `mpirun -np N` it measures N processes only (its last line is the same RESULT for N).
//
// Cases on a 1-d mesh of N ranks, f32 tensors (size/1024 rows of 256 columns), size = the
// global tensor's bytes (nccl-tests' size for all_gather and all_reduce), 4 KiB to 256 MiB:
//   S(0) -> R      spmd all_gather      vs MPI_Allgather
//   S(0) -> S(1)   spmd all_to_all      vs MPI_Alltoall (contiguous blocks: no packing)
//   P -> R         spmd all_reduce      vs MPI_Allreduce (MPI_SUM)
//   P -> S(0)      spmd reduce_scatter  vs MPI_Reduce_scatter_block (MPI_SUM)
// Columns follow nccl-tests: size, count, type, redop, time (us), algbw, busbw (GB/s), with the
// busbw factors of nccl-tests (all_gather, reduce_scatter, all_to_all (n-1)/n, all_reduce
// 2(n-1)/n); then the raw collective's time and the ratio. Time: spmd and the raw collective
// are measured in turns (7 rounds each), a round being the slowest rank's mean over its
// iterations after two warm-up runs; each column is the median round. Taking turns keeps
// the drift of a shared, oversubscribed machine out of the ratio.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/backends/mpi/mpi.hpp"
#include "spmd/plan.hpp"

namespace {

using spmd::index_t;
namespace host = spmd::host;

struct bench_case {
  const char* name;
  const char* coll;
  bool reduce;
  double bus_factor(int n) const {
    return std::string(coll) == "all_reduce" ? 2.0 * (n - 1) / n : double(n - 1) / n;
  }
};

template <class F>
double time_us(F&& f, double budget_s) {
  f();
  f();
  int iters = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  const double t0 = MPI_Wtime();
  double t = t0;
  do {
    f();
    ++iters;
    t = MPI_Wtime();
    double elapsed = t - t0, max_elapsed = 0;  // every rank stops together
    MPI_Allreduce(&elapsed, &max_elapsed, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (max_elapsed >= budget_s || iters >= 200) break;
  } while (true);
  double mine = (t - t0) / iters * 1e6, worst = 0;
  MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return worst;
}

spmd::placement_vec one(spmd::placement p) {
  spmd::placement_vec v;
  v.push_back(p);
  return v;
}

int measure(bool quick, const std::string& only) {
  const int n = spmd::mpi::environment::size(), me = spmd::mpi::environment::rank();
  const bench_case cases[] = {{"S(0)->R", "all_gather", false},
                              {"S(0)->S(1)", "all_to_all", false},
                              {"P->R", "all_reduce", true},
                              {"P->S(0)", "reduce_scatter", true}};
  spmd::mesh_shape_vec mesh;
  mesh.push_back(n);
  const spmd::placement R = spmd::make_replicate(), S0 = spmd::make_shard(0),
                        S1 = spmd::make_shard(1), P = spmd::make_partial(spmd::reduce_op::sum);
  const index_t max_bytes = quick ? (index_t{16} << 20) : (index_t{256} << 20);
  double worst_ratio = 0;
  if (me == 0)
    std::printf("# %d processes\n# %10s %12s %5s %5s %-11s %10s %8s %8s %10s %6s\n", n, "size",
                "count", "type", "redop", "case", "time(us)", "algbw", "busbw", "raw(us)", "ratio");
  for (const bench_case& c : cases) {
    if (!only.empty() && only != c.name) continue;
    for (index_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
      const index_t cols = 256, rows = bytes / 4 / cols;
      if (rows % n != 0 || (std::string(c.coll) == "all_to_all" && cols % n != 0)) continue;
      spmd::shape_vec global;
      global.push_back(rows);
      global.push_back(cols);
      const spmd::placement from = c.reduce ? P : S0;
      const spmd::placement to = std::string(c.coll) == "all_gather" || c.reduce
                                     ? (std::string(c.coll) == "reduce_scatter" ? S0 : R)
                                     : S1;
      const auto fs = spmd::make_spec(mesh, one(from), 2), ts = spmd::make_spec(mesh, one(to), 2);
      const auto p = spmd::make_plan(fs.spec, ts.spec, double(bytes));
      // Inputs: this rank's block (P: a whole tensor of partial values).
      host::local_set<float> in(n, spmd::host::held_range{me, me + 1});
      in.assign(me, spmd::box_at(fs.spec, global, spmd::unravel(mesh, me)).shape);
      for (index_t k = 0; k < in.size(me); ++k) in.data(me)[k] = float((k * 7 + me) % 13);
      auto run_spmd = [&] { (void)spmd::mpi::execute(p.value, global, in); };
      // The raw collective on contiguous buffers of the same sizes.
      const index_t total = rows * cols, block = total / n;
      std::vector<float> src(static_cast<std::size_t>(c.reduce ? total : block), 1.f);
      std::vector<float> dst(static_cast<std::size_t>(std::string(c.coll) == "all_gather" ||
                                                              std::string(c.coll) == "all_reduce"
                                                          ? total
                                                          : block));
      const std::string coll = c.coll;
      auto run_raw = [&] {
            if (coll == "all_gather")
              MPI_Allgather(src.data(), int(block), MPI_FLOAT, dst.data(), int(block), MPI_FLOAT,
                            MPI_COMM_WORLD);
            else if (coll == "all_to_all")
              MPI_Alltoall(src.data(), int(block / n), MPI_FLOAT, dst.data(), int(block / n),
                           MPI_FLOAT, MPI_COMM_WORLD);
            else if (coll == "all_reduce")
              MPI_Allreduce(src.data(), dst.data(), int(total), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            else
              MPI_Reduce_scatter_block(src.data(), dst.data(), int(block), MPI_FLOAT, MPI_SUM,
                                       MPI_COMM_WORLD);
      };
      constexpr int rounds = 7;
      const double budget = (quick ? 0.05 : 0.3) / rounds;
      std::vector<double> a, b;
      for (int k = 0; k < rounds; ++k) {
        a.push_back(time_us(run_spmd, budget));
        b.push_back(time_us(run_raw, budget));
      }
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      const double spmd_us = a[rounds / 2], raw_us = b[rounds / 2];
      const double ratio = spmd_us / raw_us;
      if (bytes >= (index_t{1} << 20)) worst_ratio = std::max(worst_ratio, ratio);
      const double algbw = double(bytes) / (spmd_us * 1e3);
      if (me == 0)
        std::printf("  %10lld %12lld %5s %5s %-11s %10.1f %8.2f %8.2f %10.1f %6.2f\n",
                    (long long)bytes, (long long)total, "float", c.reduce ? "sum" : "none", c.name,
                    spmd_us, algbw, algbw * c.bus_factor(n), raw_us, ratio);
    }
  }
  if (me == 0) std::printf("RESULT mpi_vs_raw=%.3f\n", worst_ratio);
  return 0;
}

/// Run directly: measure 2, 4 and 8 processes, each under mpirun, and report the worst.
int launch(const char* self, bool quick) {
  double worst = 0;
  for (int n : {2, 4, 8}) {
    const std::string cmd = std::string(SPMD_MPIRUN) + " -np " + std::to_string(n) + " " + self +
                            (quick ? " --quick" : "") + " --measure";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return 1;
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
      double r = 0;
      if (std::sscanf(line, "RESULT mpi_vs_raw=%lf", &r) == 1) {
        worst = std::max(worst, r);
        std::printf("# %d processes: mpi_vs_raw=%.3f\n", n, r);
      } else {
        std::fputs(line, stdout);
      }
    }
    if (pclose(p) != 0) {
      std::fprintf(stderr, "redistribute_mpi: '%s' failed\n", cmd.c_str());
      return 1;
    }
  }
  std::printf("RESULT mpi_vs_raw=%.3f\n", worst);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  mallopt(M_MMAP_THRESHOLD, 1 << 30);  // keep freed blocks: no page faults per iteration
  mallopt(M_TRIM_THRESHOLD, -1);
  bool quick = false, measure_only = false;
  std::string only;  // --case NAME: one case only (e.g. 'S(0)->S(1)'), under mpirun
  for (int i = 1; i < argc; ++i) {
    quick |= std::strcmp(argv[i], "--quick") == 0;
    measure_only |= std::strcmp(argv[i], "--measure") == 0;
    if (std::strcmp(argv[i], "--case") == 0 && i + 1 < argc) only = argv[++i];
  }
  if (!measure_only && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) return launch(argv[0], quick);
  spmd::mpi::environment env(argc, argv);
  return measure(quick, only);
}
