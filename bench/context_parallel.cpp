// bench/context_parallel — one causal attention, forward and backward through the autograd
// layer, with its sequence split over cp ranks by both methods (docs/context_parallel.md), against
// the same on one device:
//
//   context_parallel [--lengths 1024,4096,16384]    the simulation, then mpirun -np 2 ... --mpi
//   context_parallel --sim [--lengths ...]          cp of 1, 2 and 4 in this process
//   mpirun -np 2 context_parallel --mpi [--lengths ...]   cp 2, one process per rank
//
// Batch 1, width 256 (4 heads of 64), f32; per length the median of 3 steps after a warm one.
// For each: the step's time, the bytes a rank receives, and the floors: compute, the busiest
// rank's multiply-adds (the kernels' own count: tiles of 128 queries, each against the keys up to
// its last one) over the machine's GEMM rate measured here; communication, its bytes over the
// rate of the same kind of transfer (MPI_Allgather or MPI_Sendrecv of one block under MPI, memcpy
// in the simulation, whose ring hands buffers over without copying).
//   all_gather  K and V gathered forward and again backward, dK and dV reduce-scattered:
//               6 (cp−1)/cp · L·W·4 bytes; 2 + 7 products (the split backward);
//   ring        K/V passed cp−1 times forward and backward, dK/dV cp times: (4 (cp−1) + 2 cp)/cp ·
//               L·W·4 bytes; 2 + 5 products (one pass per block, the saved log-sum-exp);
//   ring_head_tail  the same over a sequence in head-tail order: every rank the same work.
//   RESULT context_parallel backend=B method=M positions=L cp=C ms=<step>
//     one_device_ms=<cp 1> bytes_per_rank=<received> compute_floor_ms=<...> comm_floor_ms=<...>
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "spmd/backends/mpi/mpi.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#include "timing.hpp"

namespace {

namespace rt = spmd::runtime;
using spmd::index_t;
constexpr index_t W = 256, D = 64;
using M = spmd::mesh<spmd::dyn>;
using E = spmd::extents<1, spmd::dyn, W>;
using L = spmd::layout<M, spmd::placements<spmd::shard<1>>, E>;

std::vector<float> values(index_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> x(0.f, 1.f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& e : v) e = x(rng);
  return v;
}

/// Multiply-adds of rank r's causal forward and backward (all-gather, split: seven products per
/// tile and head; whole, cp 1, and the ring: five), by the kernels' tiles.
double rank_flops(index_t len, index_t cp, index_t r, bool ring, bool head_tail = false) {
  if (head_tail && cp > 1) {  // chunks r and 2cp−1−r of m rows, each tile against the keys to its last
    const index_t m = len / (2 * cp);
    double units = 0;
    for (const index_t chunk : {r, 2 * cp - 1 - r})
      for (index_t r0 = 0; r0 < m; r0 += 128) {
        const index_t t = std::min<index_t>(128, m - r0);
        units += static_cast<double>(t) * static_cast<double>(chunk * m + r0 + t) * D;
      }
    return 2 * 7 * units * (W / D);
  }
  const index_t base = len / cp, extra = len % cp;
  const index_t rows = base + (r < extra ? 1 : 0), first = r * base + std::min(r, extra);
  double units = 0;  // rows x keys x D, summed over tiles
  for (index_t r0 = 0; r0 < rows; r0 += 128) {
    const index_t t = std::min<index_t>(128, rows - r0);
    units += static_cast<double>(t) * static_cast<double>(std::min(len, first + r0 + t)) * D;
  }
  const double products = 2 + (cp > 1 && !ring ? 7 : 5);
  return 2 * products * units * (W / D);  // two flops per multiply-add, every head
}

double gemm_gflops() {
  const int n = 1024;
  std::vector<float> a(n * n, 1.f), b(n * n, 0.5f), c(n * n);
  const double s = bench::median_s([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
  }, 3);
  return 2.0 * n * n * n / s / 1e9;
}

/// One step on backend B over the bound mesh: ms (median).
template <class B, rt::context_method Method = rt::context_method::all_gather>
double step_ms(index_t len) {
  using F = rt::factories<B>;
  const L l{E(len)};
  const auto n = len * W;
  auto q = rt::requires_grad(F::distribute_tensor(values(n, 1), l), "q");
  auto k = rt::requires_grad(F::distribute_tensor(values(n, 2), l), "k");
  auto v = rt::requires_grad(F::distribute_tensor(values(n, 3), l), "v");
  const auto g = F::distribute_tensor(values(n, 4), l);
  std::vector<double> ms;
  for (int i = 0; i < 4; ++i) {
    if constexpr (requires { B::barrier(); }) B::barrier();
    const auto t0 = std::chrono::steady_clock::now();
    rt::causal_attention<D, Method>(q, k, v).backward(g);
    if constexpr (requires { B::barrier(); }) B::barrier();
    if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    q.zero_grad(), k.zero_grad(), v.zero_grad();
  }
  return bench::median(ms);
}

double received_bytes(index_t len, index_t cp, bool ring) {
  const double whole = double(len * W) * 4;
  return ring ? double(4 * (cp - 1) + 2 * cp) / double(cp) * whole * (cp > 1) : 6.0 * double(cp - 1) / double(cp) * whole;
}

void report(const char* backend, rt::context_method method, index_t len, index_t cp, double ms, double one_ms,
            double gflops, double comm_gbps) {
  const bool ring = method != rt::context_method::all_gather, head_tail = method == rt::context_method::ring_head_tail;
  double worst = 0;
  for (index_t r = 0; r < cp; ++r) worst = std::max(worst, rank_flops(len, cp, r, ring, head_tail));
  const double bytes = received_bytes(len, cp, ring);
  std::printf("RESULT context_parallel backend=%s method=%s positions=%lld cp=%lld ms=%.2f one_device_ms=%.2f "
              "bytes_per_rank=%.0f compute_floor_ms=%.2f comm_floor_ms=%.3f\n",
              backend, head_tail ? "ring_head_tail" : ring ? "ring" : "all_gather", static_cast<long long>(len), static_cast<long long>(cp), ms, one_ms, bytes,
              worst / (gflops * 1e9) * 1e3, comm_gbps > 0 ? bytes / (comm_gbps * 1e9) * 1e3 : 0.0);
  std::fflush(stdout);
}

std::vector<index_t> parse_lengths(const std::string& s) {
  std::vector<index_t> out;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::size_t end = std::min(s.find(',', at), s.size());
    out.push_back(std::stoll(s.substr(at, end - at)));
    at = end + 1;
  }
  return out;
}

void sim_mode(const std::vector<index_t>& lengths) {
  const double gflops = gemm_gflops();
  // the simulation's "communication" is copying: memcpy's rate
  std::vector<char> a(64 << 20, 1), b(64 << 20);
  const double copy_gbps = double(a.size()) / bench::median_s([&] { std::memcpy(b.data(), a.data(), a.size()); }) / 1e9;
  std::printf("context_parallel, the simulation: GEMM %.1f GFLOP/s, memcpy %.1f GB/s\n", gflops, copy_gbps);
  for (index_t len : lengths) {
    spmd::bind_mesh<M>(spmd::dims<1>{1});
    const double one = step_ms<spmd::sim::backend>(len);
    using enum rt::context_method;
    report("sim", all_gather, len, 1, one, one, gflops, 0);
    for (index_t cp : {2, 4}) {
      spmd::bind_mesh<M>(spmd::dims<1>{cp});
      report("sim", all_gather, len, cp, step_ms<spmd::sim::backend>(len), one, gflops, copy_gbps);
      report("sim", ring, len, cp, step_ms<spmd::sim::backend, ring>(len), one, gflops, copy_gbps);
      report("sim", ring_head_tail, len, cp, step_ms<spmd::sim::backend, ring_head_tail>(len), one, gflops, copy_gbps);
    }
  }
}

void mpi_mode(const std::vector<index_t>& lengths, int& argc, char**& argv) {
  openblas_set_num_threads(1);
  setenv("SPMD_SIM_THREADS", "1", 1);
  spmd::mpi::environment env(argc, argv);
  const int rank = env.rank(), size = env.size();
  const double gflops = gemm_gflops();
  for (index_t len : lengths) {
    // one device: every process computes the whole step alone (a 1-rank mesh on a sub-communicator
    // is not what the backend offers; the simulation's one-device step on one thread is the same
    // kernels)
    spmd::bind_mesh<M>(spmd::dims<1>{1});
    double one = 0;
    if (rank == 0) one = step_ms<spmd::sim::backend>(len);
    MPI_Bcast(&one, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
    spmd::bind_mesh<M>(spmd::dims<1>{size});
    const double ms = step_ms<spmd::mpi::backend>(len);
    // the all-gather's own rate: MPI_Allgather of one of K's blocks
    const index_t block = len * W / size;
    std::vector<float> mine(static_cast<std::size_t>(block), 1.f), all(static_cast<std::size_t>(block * size));
    const double s = bench::median_s([&] {
      MPI_Allgather(mine.data(), static_cast<int>(block), MPI_FLOAT, all.data(), static_cast<int>(block), MPI_FLOAT,
                    MPI_COMM_WORLD);
    });
    const double gbps = double(block) * (size - 1) * 4 / s / 1e9;
    if (rank == 0) report("mpi", rt::context_method::all_gather, len, size, ms, one, gflops, gbps);
    // the ring: its rate is MPI_Sendrecv's of one K/V block to the next rank
    const double ring_ms = step_ms<spmd::mpi::backend, rt::context_method::ring>(len);
    const double head_tail_ms = step_ms<spmd::mpi::backend, rt::context_method::ring_head_tail>(len);
    std::vector<float> kv(static_cast<std::size_t>(2 * block), 1.f), in(kv.size());
    const double r = bench::median_s([&] {
      MPI_Sendrecv(kv.data(), static_cast<int>(kv.size()), MPI_FLOAT, (rank + 1) % size, 0, in.data(),
                   static_cast<int>(in.size()), MPI_FLOAT, (rank + size - 1) % size, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    });
    const double ring_gbps = double(kv.size()) * 4 / r / 1e9;
    if (rank == 0) report("mpi", rt::context_method::ring, len, size, ring_ms, one, gflops, ring_gbps);
    if (rank == 0) report("mpi", rt::context_method::ring_head_tail, len, size, head_tail_ms, one, gflops, ring_gbps);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode, lengths = "1024,4096,16384";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--lengths" && i + 1 < argc) lengths = argv[++i];
    else if (a == "--sim" || a == "--mpi") mode = a;
    else {
      std::fprintf(stderr, "context_parallel: %s: give --sim, --mpi (under mpirun -np 2) or nothing, and --lengths L,L\n",
                   a.c_str());
      return 2;
    }
  }
  const std::vector<index_t> ls = parse_lengths(lengths);
  if (mode == "--sim") return sim_mode(ls), 0;
  if (mode == "--mpi") return mpi_mode(ls, argc, argv), 0;
  const std::string self = argv[0];
  const int a = std::system((self + " --sim --lengths " + lengths).c_str());
  const int b = std::system((std::string(SPMD_MPIRUN) + " -np 2 " + self + " --mpi --lengths " + lengths).c_str());
  return a == 0 && b == 0 ? 0 : 1;
}
