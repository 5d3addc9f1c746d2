// bench/auto_calibrate — measures the automatic sharding search's cost model on this machine
// (docs/auto.md) and writes it to a file `spmd-plan auto --cost` reads.
//
//   meson compile -C build auto_calibrate
//   mpirun -np 8 build/bench/auto_calibrate --mesh 2x4 [--out auto_cost.json]
//
// Per mesh dim m (of more than one rank), through the MPI backend's execution of the plans
// the search costs (spmd::mpi::execute, what redistribute runs):
//   alpha[m]  from P -> R over m of 256 bytes (one all_reduce): t / (2(n-1))
//   beta[m]   from S(0) -> R over m of 16 MiB (one all_gather): (t - (n-1)·alpha) / ((n-1)·B/n)
// and, every process at once as in training: flops_per_s from a 512³ sgemm per process,
// memory_bytes_per_s from a 64 MiB memcpy per process (the slowest process's). Each time is the
// median of 7 rounds, a round the slowest process's mean over its iterations. Prints
//   RESULT auto_calibrate alpha_us=<dim 0>,<dim 1>... gbps=<1/beta per dim> gflops=<rate> mem_gbps=<rate>
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#ifdef SPMD_HAVE_CBLAS
#include <cblas.h>
#endif

#include "spmd/backends/mpi/mpi.hpp"
#include "spmd/io/cost_file.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/plan.hpp"

namespace {

using spmd::index_t;

/// Seconds of f(): the median of 7 rounds, each the slowest process's mean over its iterations.
template <class F>
double seconds(F&& f, double budget_s = 0.05) {
  f();
  std::vector<double> rounds;
  for (int r = 0; r < 7; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    int iters = 0;
    double t = t0;
    for (;;) {
      f();
      ++iters;
      t = MPI_Wtime();
      double elapsed = t - t0, most = 0;
      MPI_Allreduce(&elapsed, &most, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      if (most >= budget_s || iters >= 1000) break;
    }
    double mine = (t - t0) / iters, worst = 0;
    MPI_Allreduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    rounds.push_back(worst);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

/// Seconds of redistributing a tensor of `global` floats from `from` to `to` on `mesh`, and the
/// plan's collective count (the calibration wants exactly one).
std::pair<double, int> redistribute_seconds(const spmd::mesh_shape_vec& mesh, const spmd::placement_vec& from,
                                            const spmd::placement_vec& to, const spmd::shape_vec& global) {
  const int me = spmd::mpi::environment::rank(), n = spmd::mpi::environment::size();
  const auto fs = spmd::make_spec(mesh, from, global.size()).spec, ts = spmd::make_spec(mesh, to, global.size()).spec;
  double bytes = 4;
  for (const index_t e : global) bytes *= static_cast<double>(e);
  const spmd::plan_result p = spmd::make_plan(fs, ts, bytes);
  spmd::host::local_set<float> in(n, spmd::host::held_range{me, me + 1});
  in.assign(me, spmd::box_at(fs, global, spmd::unravel(mesh, me)).shape);
  for (index_t k = 0; k < in.size(me); ++k) in.data(me)[k] = static_cast<float>(k % 17);
  const double t = seconds([&] { (void)spmd::mpi::execute(p.value, global, in); });
  return {t, p.value.collectives()};
}

}  // namespace

int main(int argc, char** argv) {
  spmd::mpi::environment env(argc, argv);
  const int me = env.rank(), size = env.size();
  std::string mesh_text = std::to_string(size), out = "auto_cost.json";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--mesh" || a == "--out") && i + 1 < argc) (a == "--mesh" ? mesh_text : out) = argv[++i];
    else {
      if (me == 0) std::fprintf(stderr, "auto_calibrate: unknown argument %s (--mesh AxB, --out FILE)\n", a.c_str());
      return 2;
    }
  }
  spmd::mesh_shape_vec mesh{};
  try {
    mesh = spmd::parse_mesh(mesh_text);
  } catch (const std::exception& e) {
    if (me == 0) std::fprintf(stderr, "auto_calibrate: --mesh %s: %s\n", mesh_text.c_str(), e.what());
    return 2;
  }
  index_t ranks = 1;
  for (const index_t s : mesh) ranks *= s;
  if (ranks != size) {
    if (me == 0)
      std::fprintf(stderr, "auto_calibrate: --mesh %s has %lld ranks, this job %d processes\n", mesh_text.c_str(),
                   static_cast<long long>(ranks), size);
    return 2;
  }
  spmd::autoshard::cost_model cm{};
  std::string alpha_text, gbps_text;
  for (int m = 0; m < mesh.size(); ++m) {
    spmd::autoshard::link l{};
    const double n = static_cast<double>(mesh[m]);
    if (mesh[m] > 1) {
      spmd::placement_vec partial{}, shard{}, whole{};
      for (int d = 0; d < mesh.size(); ++d) {
        partial.push_back(d == m ? spmd::make_partial(spmd::reduce_op::sum) : spmd::make_replicate());
        shard.push_back(d == m ? spmd::make_shard(0) : spmd::make_replicate());
        whole.push_back(spmd::make_replicate());
      }
      const auto [small, c1] = redistribute_seconds(mesh, partial, whole, spmd::shape_vec{{64}, 1});
      const index_t rows = 4096;  // 4096 x 1024 floats: 16 MiB
      const auto [large, c2] = redistribute_seconds(mesh, shard, whole, spmd::shape_vec{{rows, 1024}, 2});
      const double bytes = 4.0 * rows * 1024;
      l.alpha_s = small / (2 * (n - 1));
      l.beta_s_per_byte = std::max(0.0, (large - (n - 1) * l.alpha_s) / ((n - 1) * bytes / n));
      if (me == 0)
        std::printf("mesh dim %d (%g ranks): all_reduce of 256 B %.2f us (%d collective), all_gather of 16 MiB %.1f us "
                    "(%d collective): alpha %.3g us, %.3g GB/s\n",
                    m, n, small * 1e6, c1, large * 1e6, c2, l.alpha_s * 1e6, 1e-9 / l.beta_s_per_byte);
    }
    cm.links.push_back(l);
    char b[64];
    std::snprintf(b, sizeof b, "%s%.3g", m ? "," : "", l.alpha_s * 1e6);
    alpha_text += b;
    std::snprintf(b, sizeof b, "%s%.3g", m ? "," : "", 1e-9 / l.beta_s_per_byte);
    gbps_text += b;
  }
  // compute and memory, every process at once
  const int k = 512;
  std::vector<float> a(static_cast<std::size_t>(k) * k, 1.f), b(a), c(a);
#ifdef SPMD_HAVE_CBLAS
  const double gemm = seconds([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, k, k, k, 1.f, a.data(), k, b.data(), k, 0.f, c.data(), k);
  });
#else
  const double gemm = seconds([&] {
    for (int i = 0; i < k; ++i)
      for (int j = 0; j < k; ++j) {
        float s = 0;
        for (int q = 0; q < k; ++q) s += a[static_cast<std::size_t>(i * k + q)] * b[static_cast<std::size_t>(j * k + q)];
        c[static_cast<std::size_t>(i * k + j)] = s;
      }
  });
#endif
  cm.flops_per_s = 2.0 * k * k * k / gemm;
  const std::size_t mem = std::size_t{64} << 20;
  std::vector<char> src(mem, 1), dst(mem);
  const double copy = seconds([&] { std::memcpy(dst.data(), src.data(), mem); });
  cm.memory_bytes_per_s = static_cast<double>(mem) / copy;
  if (me == 0) {
    spmd::io::save_cost_model(out, cm, mesh);
    std::printf("sgemm %d^3: %.1f GFLOP/s a process; memcpy 64 MiB: %.1f GB/s a process; written to %s\n", k,
                cm.flops_per_s * 1e-9, cm.memory_bytes_per_s * 1e-9, out.c_str());
    std::printf("RESULT auto_calibrate alpha_us=%s gbps=%s gflops=%.3g mem_gbps=%.3g\n", alpha_text.c_str(),
                gbps_text.c_str(), cm.flops_per_s * 1e-9, cm.memory_bytes_per_s * 1e-9);
  }
  return 0;
}
