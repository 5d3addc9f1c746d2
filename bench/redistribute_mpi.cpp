// bench/redistribute_mpi — the MPI backend's redistribute against the raw MPI collective that
// moves the same bytes.
//
//   meson compile -C build redistribute_mpi && build/bench/redistribute_mpi [--quick]
//
// Run directly, it launches itself under mpirun with 2, 4 and 8 processes and ends with
//   RESULT mpi_vs_raw=<worst> mpi_vs_contiguous=<worst>
// over the process counts up to this machine's core count (the oversubscribed counts are
// printed, not counted): mpi_vs_raw is the worst spmd time / baseline time over every case and
// size >= 1 MiB, the baseline of S(0)->S(1) being the fair one below; mpi_vs_contiguous is
// S(0)->S(1) against the contiguous MPI_Alltoall. Under `mpirun -np N` it measures N processes
// only (its last line is the same RESULT for N).
//
// Cases on a 1-d mesh of N ranks, f32 tensors (size/1024 rows of 256 columns), size = the
// global tensor's bytes (nccl-tests' size for all_gather and all_reduce), 4 KiB to 256 MiB:
//   S(0) -> R      spmd all_gather      vs MPI_Allgather
//   S(0) -> S(1)   spmd all_to_all      vs the fair baseline, what a user would write by hand:
//                  the faster of (a) pack each destination's columns into one buffer,
//                  MPI_Alltoall into the output (whose blocks are contiguous: no unpack) and
//                  (b) MPI_Alltoallw with a vector type per destination (MPI packs); and,
//                  printed beside, MPI_Alltoall of contiguous blocks (no packing at all)
//   P -> R         spmd all_reduce      vs MPI_Allreduce (MPI_SUM)
//   P -> S(0)      spmd reduce_scatter  vs MPI_Reduce_scatter_block (MPI_SUM)
// Columns follow nccl-tests: size, count, type, redop, time (us), algbw, busbw (GB/s), with the
// busbw factors of nccl-tests (all_gather, reduce_scatter, all_to_all (n-1)/n, all_reduce
// 2(n-1)/n); then the baseline's time and the ratio (S(0)->S(1): also the pack+Alltoall,
// Alltoallw and contiguous times). Time: spmd and the baselines are measured in turns (15
// rounds each up to 4 MiB, 9 above), a round being the slowest rank's mean over its iterations after two warm-up
// runs; each time column is the median round, each ratio the median of the rounds' ratios
// (a round's spmd time over the same round's baseline: the faster of the two hand-written
// forms for S(0)->S(1)). Taking turns and pairing them keeps the drift of a shared,
// oversubscribed machine out of the ratio.
#include <malloc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <utility>
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
  double worst_ratio = 0, worst_contiguous = 0;
  if (me == 0)
    std::printf("# %d processes\n# %10s %12s %5s %5s %-11s %10s %8s %8s %10s %6s %10s %10s %10s %6s\n",
                n, "size", "count", "type", "redop", "case", "time(us)", "algbw", "busbw", "raw(us)",
                "ratio", "pack(us)", "a2aw(us)", "contig(us)", "vs_c");
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
      // S(0)->S(1) by hand. This rank's block is rows/n x cols; destination j takes its columns
      // [j*cols/n, (j+1)*cols/n), and receives them as rows [me*rows/n, ...) of its rows x cols/n
      // block: contiguous on the receiving side, strided on the sending side.
      const bool transposing = coll == "all_to_all";
      const index_t brows = rows / n, bcols = cols / n;
      std::vector<float> pack_buf(transposing ? static_cast<std::size_t>(block) : 0);
      auto run_pack = [&] {  // (a) pack, MPI_Alltoall into the output
        const float* x = in.data(me);
        float* o = pack_buf.data();
        for (int j = 0; j < n; ++j)
          for (index_t r = 0; r < brows; ++r, o += bcols)
            std::memcpy(o, x + r * cols + j * bcols, static_cast<std::size_t>(bcols) * sizeof(float));
        MPI_Alltoall(pack_buf.data(), int(block / n), MPI_FLOAT, dst.data(), int(block / n), MPI_FLOAT,
                     MPI_COMM_WORLD);
      };
      MPI_Datatype column_block = MPI_DATATYPE_NULL;  // (b) brows runs of bcols, stride cols
      std::vector<int> w_sc(n, 1), w_sd(n), w_rc(n, int(block / n)), w_rd(n);
      std::vector<MPI_Datatype> w_st(n), w_rt(n, MPI_FLOAT);
      if (transposing) {
        MPI_Type_vector(int(brows), int(bcols), int(cols), MPI_FLOAT, &column_block);
        MPI_Type_commit(&column_block);
        for (int j = 0; j < n; ++j) {
          w_st[j] = column_block;
          w_sd[j] = int(j * bcols * index_t(sizeof(float)));
          w_rd[j] = int(j * (block / n) * index_t(sizeof(float)));
        }
      }
      auto run_alltoallw = [&] {
        MPI_Alltoallw(in.data(me), w_sc.data(), w_sd.data(), w_st.data(), dst.data(), w_rc.data(),
                      w_rd.data(), w_rt.data(), MPI_COMM_WORLD);
      };
      if (transposing) {  // both baselines must give spmd's block, or the comparison is void
        const auto want = spmd::mpi::execute(p.value, global, in);
        for (auto [run, name] : {std::pair{std::function<void()>(run_pack), "pack + MPI_Alltoall"},
                                 std::pair{std::function<void()>(run_alltoallw), "MPI_Alltoallw"}}) {
          std::fill(dst.begin(), dst.end(), -1.f);
          run();
          if (want.size(me) != index_t(dst.size()) ||
              std::memcmp(want.data(me), dst.data(), dst.size() * sizeof(float)) != 0) {
            std::fprintf(stderr, "redistribute_mpi: rank %d: %s does not give spmd's S(1) block (%lld bytes)\n",
                         me, name, (long long)bytes);
            MPI_Abort(MPI_COMM_WORLD, 1);
          }
        }
      }
      // more rounds where a round is short (up to 4 MiB a call takes well under a millisecond)
      const int rounds = bytes <= (index_t{4} << 20) ? 15 : 9;
      const double budget = (quick ? 0.05 : 0.3) / rounds;
      std::vector<double> a, b, pa, pw;
      for (int k = 0; k < rounds; ++k) {
        a.push_back(time_us(run_spmd, budget));
        b.push_back(time_us(run_raw, budget));
        if (transposing) {
          pa.push_back(time_us(run_pack, budget));
          pw.push_back(time_us(run_alltoallw, budget));
        }
      }
      if (column_block != MPI_DATATYPE_NULL) MPI_Type_free(&column_block);
      auto median = [](std::vector<double>& v) {
        std::sort(v.begin(), v.end());
        return v.empty() ? 0.0 : v[v.size() / 2];
      };
      // The ratios are the medians of each round's ratio (spmd and its baselines ran next to
      // each other in a round), which the machine's drift between rounds does not move.
      std::vector<double> ratios, contiguous_ratios;
      for (int k = 0; k < rounds; ++k) {
        const std::size_t i = static_cast<std::size_t>(k);
        ratios.push_back(a[i] / (transposing ? std::min(pa[i], pw[i]) : b[i]));
        contiguous_ratios.push_back(a[i] / b[i]);
      }
      const double spmd_us = median(a), contiguous_us = median(b);
      const double pack_us = median(pa), alltoallw_us = median(pw);
      const double raw_us = transposing ? std::min(pack_us, alltoallw_us) : contiguous_us;
      const double ratio = median(ratios), contiguous_ratio = median(contiguous_ratios);
      if (bytes >= (index_t{1} << 20)) {
        worst_ratio = std::max(worst_ratio, ratio);
        if (transposing) worst_contiguous = std::max(worst_contiguous, contiguous_ratio);
      }
      const double algbw = double(bytes) / (spmd_us * 1e3);
      if (me == 0) {
        std::printf("  %10lld %12lld %5s %5s %-11s %10.1f %8.2f %8.2f %10.1f %6.2f", (long long)bytes,
                    (long long)total, "float", c.reduce ? "sum" : "none", c.name, spmd_us, algbw,
                    algbw * c.bus_factor(n), raw_us, ratio);
        if (transposing)
          std::printf(" %10.1f %10.1f %10.1f %6.2f", pack_us, alltoallw_us, contiguous_us, contiguous_ratio);
        std::printf("\n");
      }
    }
  }
  if (me == 0) std::printf("RESULT mpi_vs_raw=%.3f mpi_vs_contiguous=%.3f\n", worst_ratio, worst_contiguous);
  return 0;
}

/// Run directly: measure 2, 4 and 8 processes, each under mpirun, and report the worst over the
/// counts this machine's cores hold (the oversubscribed ones are printed only).
int launch(const char* self, bool quick) {
  const int cores = std::max(1u, std::thread::hardware_concurrency());
  double worst = 0, worst_contiguous = 0;
  bool any = false;
  for (int n : {2, 4, 8}) {
    const std::string cmd = std::string(SPMD_MPIRUN) + " -np " + std::to_string(n) + " " + self +
                            (quick ? " --quick" : "") + " --measure";
    FILE* p = popen(cmd.c_str(), "r");
    if (!p) return 1;
    char line[512];
    while (std::fgets(line, sizeof line, p)) {
      double r = 0, c = 0;
      if (std::sscanf(line, "RESULT mpi_vs_raw=%lf mpi_vs_contiguous=%lf", &r, &c) == 2) {
        const bool counted = n <= cores;
        std::printf("# %d processes: mpi_vs_raw=%.3f mpi_vs_contiguous=%.3f%s\n", n, r, c,
                    counted ? "" : " (oversubscribed: not in the RESULT)");
        if (counted) {
          worst = std::max(worst, r);
          worst_contiguous = std::max(worst_contiguous, c);
          any = true;
        }
      } else {
        std::fputs(line, stdout);
      }
    }
    if (pclose(p) != 0) {
      std::fprintf(stderr, "redistribute_mpi: '%s' failed\n", cmd.c_str());
      return 1;
    }
  }
  if (!any) {
    std::fprintf(stderr, "redistribute_mpi: this machine has %d core(s); no count fits without oversubscribing\n", cores);
    return 1;
  }
  std::printf("RESULT mpi_vs_raw=%.3f mpi_vs_contiguous=%.3f\n", worst, worst_contiguous);
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
