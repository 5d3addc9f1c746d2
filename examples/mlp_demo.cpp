// spmd demo: a 2-layer MLP forward, tensor parallel (Megatron-LM), in the simulation backend
// (spmd-demo), with one process per rank (mpirun -np 8 spmd-demo --backend mpi), or with
// every rank on one GPU (spmd-demo --backend cuda).
//
// Mesh 2x4 named (dp, tp): the batch is split over dp, the first layer's weight by output
// features over tp (column-parallel), the second's by input features (row-parallel). Every
// operator's sharding is chosen by the compiler — the static_asserts below are the proof —
// and the program prints each layer's compile-time decisions, the collectives that actually
// ran, and the largest difference from the same MLP computed on one device. It exits 1 when
// that difference exceeds the tolerance.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/io/layer_summary.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/tp.hpp"
#include "spmd/backends/sim/sim.hpp"
#ifdef SPMD_DEMO_CUDA
#include "spmd/backends/cuda/cuda.hpp"
#endif
#ifdef SPMD_DEMO_MPI
#include "spmd/backends/mpi/mpi.hpp"
#endif

#include "randn.hpp"

namespace {

using namespace spmd;
namespace sim = spmd::sim;

// [docs:mlp]
using Mesh = mesh<2, 4>::named<"dp", "tp">;
constexpr int dp = Mesh::dim<"dp">(), tp = Mesh::dim<"tp">();
constexpr index_t batch = 16, d_model = 32, d_hidden = 64;

using X = layout<Mesh, placements<shard<0>, replicate>, extents<batch, d_model>>;  // batch on dp
using Up = sim::column_parallel_linear<float, Mesh, tp, d_model, d_hidden>;      // W1 (64, 32)
using Down = sim::row_parallel_linear<float, Mesh, tp, d_hidden, d_model>;       // W2 (32, 64)

// The compiler's choices, checked where they are made.
using H = decltype(sim::relu(std::declval<Up&>()(std::declval<sim::dtensor<float, X>&>())));
static_assert(std::is_same_v<H::placements_type, placements<shard<0>, shard<1>>>);  // no comm
using Y = decltype(std::declval<Down&>()(std::declval<H&>()));
static_assert(std::is_same_v<Y::placements_type, placements<shard<0>, replicate>>);  // 1 all_reduce
// [/docs:mlp]

using spmd::examples::randn;

/// y = relu(x W1^T + b1) W2^T + b2 on one device, in double.
std::vector<double> mlp_one_device(const std::vector<float>& x, const std::vector<float>& w1,
                                   const std::vector<float>& b1, const std::vector<float>& w2,
                                   const std::vector<float>& b2) {
  std::vector<double> h(batch * d_hidden), y(batch * d_model);
  for (index_t i = 0; i < batch; ++i)
    for (index_t o = 0; o < d_hidden; ++o) {
      double s = b1[o];
      for (index_t k = 0; k < d_model; ++k) s += double(x[i * d_model + k]) * w1[o * d_model + k];
      h[i * d_hidden + o] = std::max(0.0, s);
    }
  for (index_t i = 0; i < batch; ++i)
    for (index_t o = 0; o < d_model; ++o) {
      double s = b2[o];
      for (index_t k = 0; k < d_hidden; ++k) s += h[i * d_hidden + k] * w2[o * d_hidden + k];
      y[i * d_model + o] = s;
    }
  return y;
}

void print_counts(const runtime::comm_counter& c) {
  std::printf("  ran: %d collective(s)", c.total());
  if (c.count(step_kind::all_reduce) > 0)
    std::printf(": %d all_reduce over mesh dim tp (%d), %lld bytes received in all",
                c.count(step_kind::all_reduce, dim_mask{1} << tp), tp,
                static_cast<long long>(c.bytes()));
  std::printf("\n");
}

std::string indent(const std::string& lines) {
  std::string out = "  ";
  for (char ch : lines) out += ch == '\n' ? std::string("\n  ") : std::string(1, ch);
  return out;
}

}  // namespace

/// The demo on backend B; `print`: this process prints (the simulation, or MPI's rank 0).
template <class B>
int run(const char* backend_name, bool print) {
  using Up = runtime::column_parallel_linear<float, Mesh, tp, d_model, d_hidden, B>;
  using Down = runtime::row_parallel_linear<float, Mesh, tp, d_hidden, d_model, B>;
  const auto x = randn(batch * d_model, 1, 1.f);
  const auto w1 = randn(d_hidden * d_model, 2, 0.2f), b1 = randn(d_hidden, 3, 0.1f);
  const auto w2 = randn(d_model * d_hidden, 4, 0.2f), b2 = randn(d_model, 5, 0.1f);
  auto say = [print](auto... args) {
    if (print) std::printf(args...);
  };

  say("spmd demo: a 2-layer MLP forward on mesh 2x4 (dp=%lld, tp=%lld), %s backend\n",
      static_cast<long long>(Mesh::extent(dp)), static_cast<long long>(Mesh::extent(tp)), backend_name);
  say("x (%lld, %lld) [S(0), R]; W1 (%lld, %lld) column-parallel on tp; "
      "W2 (%lld, %lld) row-parallel on tp\n\n",
      (long long)batch, (long long)d_model, (long long)d_hidden, (long long)d_model,
      (long long)d_model, (long long)d_hidden);

  // [docs:mlp_run]
  const auto dx = runtime::factories<B>::template distribute_tensor<X>(x);
  const Up up = Up::from_full(w1, b1);
  const Down down = Down::from_full(w2, b2);

  runtime::comm_counter layer1;
  const auto h = runtime::relu(up(dx));
  runtime::comm_counter layer2;  // nested counters: layer1 sees both layers
  const auto y = down(h);
  // [/docs:mlp_run]

  using XW1 = decltype(runtime::matmul_t(dx, up.weight));
  say("layer 1 (column-parallel), compile-time decisions:\n%s\n", indent(io::layer_summary<Up, X>()).c_str());
  say("  relu: %s -> %s (elementwise: shards kept)\n",
      format_placements(XW1::layout_type::spec()).c_str(),
      format_placements(H::layout_type::spec()).c_str());
  const int layer1_only = layer1.total() - layer2.total();
  say("  ran: %d collective(s)\n", layer1_only);
  say("layer 2 (row-parallel), compile-time decisions:\n%s\n",
      indent(io::layer_summary<Down, H::layout_type>()).c_str());
  if (print) print_counts(layer2);

  const std::vector<float> got = y.full_tensor();
  const std::vector<double> want = mlp_one_device(x, w1, b1, w2, b2);
  double diff = 0;
  for (std::size_t i = 0; i < got.size(); ++i) diff = std::max(diff, std::fabs(got[i] - want[i]));
  constexpr double tolerance = 1e-4;
  const bool ok = got.size() == want.size() && diff <= tolerance && layer1_only == 0 &&
                  layer2.total() == 1 && layer2.count(step_kind::all_reduce, dim_mask{1} << tp) == 1;
  say("\ny (%lld, %lld) %s; max |y - one device| = %.3g (tolerance %.0e): %s\n",
      (long long)batch, (long long)d_model, format_placements(Y::layout_type::spec()).c_str(),
      diff, tolerance, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  const std::string backend = argc == 3 && std::string(argv[1]) == "--backend" ? argv[2]
                              : argc == 1                                       ? "sim"
                                                                                : "";
  if (backend == "sim") return run<sim::backend>("simulation", true);
#ifdef SPMD_DEMO_CUDA
  if (backend == "cuda") {
    try {
      spmd::cuda::require_device("spmd-demo --backend cuda");
    } catch (const spmd::cuda::no_device& e) {
      std::fprintf(stderr, "%s\n", e.what());
      return 2;
    }
    return run<spmd::cuda::backend>("CUDA (every rank on one GPU)", true);
  }
#endif
#ifdef SPMD_DEMO_MPI
  if (backend == "mpi") {
    spmd::mpi::environment env(argc, argv);
    if (env.size() != Mesh::size) {  // every process knows: the first says it, once
      if (env.rank() == 0)
        std::fprintf(stderr, "spmd-demo: the mesh 2x4 has %lld ranks, this job has %d processes: run mpirun -np %lld "
                             "spmd-demo --backend mpi (with --oversubscribe on a machine with fewer cores)\n",
                     static_cast<long long>(Mesh::size), env.size(), static_cast<long long>(Mesh::size));
      return 2;
    }
    return run<spmd::mpi::backend>("MPI (one process per rank)", env.rank() == 0);
  }
#endif
  std::fprintf(stderr,
               "usage: spmd-demo [--backend sim|mpi|cuda]   (mpi: mpirun -np 8 spmd-demo --backend mpi%s%s)\n",
#ifdef SPMD_DEMO_MPI
               "",
#else
               "; this build has no MPI",
#endif
#ifdef SPMD_DEMO_CUDA
               ""
#else
               "; this build has no CUDA"
#endif
  );
  return 2;
}
