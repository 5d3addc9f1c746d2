// spmd-grad-demo: the gradients of the tensor-parallel MLP (Megatron-LM) on a 2x4 mesh and on
// one device, side by side, with the collectives of each pass.
//
//   spmd-grad-demo                          # the simulation
//   mpirun -np 8 spmd-grad-demo --backend mpi
//   spmd-grad-demo --backend cuda           # every rank on one GPU
//
// The same program runs on mesh 2x4 (dp, tp) and on mesh 1x1: x's batch on dp, W1 split by
// output features and W2 by input features over tp. Every gradient's layout is a type fixed
// where the parameter is declared (static_asserts below); the backward's sharding is chosen by
// the compiler, and costs one all_reduce (the gradient of the column-parallel layer's input),
// as the forward does (the row-parallel layer's output). The weights' gradients stay
// Partial(sum) over dp: reducing them is the data-parallel layer's job. It exits 1 when a
// gradient differs from one device's by more than the tolerance or another collective ran.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#ifdef SPMD_DEMO_CUDA
#include "spmd/backends/cuda/cuda.hpp"
#endif
#ifdef SPMD_DEMO_MPI
#include "spmd/backends/mpi/mpi.hpp"
#endif

#include "randn.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;

constexpr index_t batch = 16, d_model = 32, d_hidden = 64;

// [docs:grad_types]
template <class Mesh, class B>
struct mlp {
  static constexpr int tp = Mesh::template dim<"tp">();
  using X = layout<Mesh, placements<shard<0>, replicate>, extents<batch, d_model>>;  // batch on dp
  using Up = rt::trainable<rt::column_parallel_linear<float, Mesh, tp, d_model, d_hidden, B>>;
  using Down = rt::trainable<rt::row_parallel_linear<float, Mesh, tp, d_hidden, d_model, B>>;
  // W1 (64, 32) is [R, S(0)]: its gradient is [P(sum), S(0)] (dp's reduction deferred);
  // x's gradient has x's layout.
  static_assert(std::is_same_v<typename Up::weight_type::grad_placements,
                               placements<partial<>, shard<0>>>);
  static_assert(std::is_same_v<typename rt::variable<float, X, B>::grad_type,
                               rt::dtensor<float, X, B>>);
  // The backward's one collective, at compile time: x's gradient is dh · W1 (dh sharded like
  // h, [S(0), S(1)]), a contraction over the tp-sharded hidden dim, so it comes out
  // [S(0), P(sum)]; the plan into x's gradient layout is one all_reduce over tp.
  using Hidden = rt::dtensor<float, layout<Mesh, placements<shard<0>, shard<1>>, extents<batch, d_hidden>>, B>;
  using DX = decltype(rt::matmul(std::declval<const Hidden&>(),
                                 std::declval<const typename Up::weight_type::value_type&>()));
  static_assert(Mesh::size == 1 || std::is_same_v<typename DX::placements_type, placements<shard<0>, partial<>>>);
  using DXPlan = plan_of<typename DX::layout_type, X, float>;
  static_assert(Mesh::size == 1 || (DXPlan::collectives() == 1 && DXPlan::count(step_kind::all_reduce) == 1));
};
// [/docs:grad_types]

using spmd::examples::randn;

struct inputs {
  std::vector<float> x = randn(batch * d_model, 1, 1.f);
  std::vector<float> w1 = randn(d_hidden * d_model, 2, 0.2f), b1 = randn(d_hidden, 3, 0.1f);
  std::vector<float> w2 = randn(d_model * d_hidden, 4, 0.2f), b2 = randn(d_model, 5, 0.1f);
  std::vector<float> c = randn(batch * d_model, 6, 1.f);  // loss = mean(y * c)
};

struct result {
  std::vector<std::vector<float>> grads;  // x, W1, b1, W2, b2 (full tensors)
  double loss = 0;
  int forward_collectives = 0, forward_all_reduce = 0;
  int backward_collectives = 0, backward_all_reduce = 0;
};

template <class Mesh, class B>
result run_on(const inputs& in) {
  using M = mlp<Mesh, B>;
  using F = rt::factories<B>;
  // [docs:grad_run]
  auto x = rt::requires_grad(F::template distribute_tensor<typename M::X>(in.x), "x");
  auto up = M::Up::from_full(in.w1, in.b1, "up");
  auto down = M::Down::from_full(in.w2, in.b2, "down");
  const auto c = F::template distribute_tensor<typename M::X>(in.c);

  rt::comm_counter forward;
  auto loss = rt::mean<>(down(rt::relu(up(x))) * c);
  const int fwd = forward.total(), fwd_ar = forward.count(step_kind::all_reduce);
  rt::comm_counter backward;
  loss.backward();
  // [/docs:grad_run]
  result r;
  r.forward_collectives = fwd;
  r.forward_all_reduce = fwd_ar;
  r.backward_collectives = backward.total();
  r.backward_all_reduce = backward.count(step_kind::all_reduce);
  const std::vector<float> l = loss.full_tensor();  // empty in a process outside the mesh
  r.loss = l.empty() ? NAN : l[0];
  r.grads = {x.grad().full_tensor(), up.weight.grad().full_tensor(), up.bias.grad().full_tensor(),
             down.weight.grad().full_tensor(), down.bias.grad().full_tensor()};
  return r;
}

template <class B>
int run(const char* backend_name, bool print) {
  using Mesh = mesh<2, 4>::named<"dp", "tp">;
  using One = mesh<1, 1>::named<"dp", "tp">;
  const inputs in;
  const result sharded = run_on<Mesh, B>(in);
  const result single = run_on<One, B>(in);
  auto say = [print](auto... args) {
    if (print) std::printf(args...);
  };
  say("spmd grad demo: gradients of a 2-layer TP MLP, mesh 2x4 (dp, tp) against one device, %s\n"
      "loss = mean((relu(x W1^T + b1) W2^T + b2) * c): %.7g (2x4), %.7g (one device)\n\n",
      backend_name, sharded.loss, single.loss);
  say("collectives   forward  backward\n");
  say("  2x4         %7d  %8d   (all_reduce: %d forward, %d backward)\n", sharded.forward_collectives,
      sharded.backward_collectives, sharded.forward_all_reduce, sharded.backward_all_reduce);
  say("  one device  %7d  %8d\n\n", single.forward_collectives, single.backward_collectives);
  const char* names[] = {"x", "W1", "b1", "W2", "b2"};
  // A process outside the one-device mesh (MPI ranks but 0) holds nothing of it to compare.
  const bool compare = !single.grads[0].empty();
  constexpr double tolerance = 1e-5;
  double worst = 0;
  say("gradient  first values (2x4 | one device)                       max |diff|\n");
  for (std::size_t t = 0; t < 5; ++t) {
    const auto& a = sharded.grads[t];
    const auto& b = single.grads[t];
    if (!compare) break;
    double d = a.size() == b.size() ? 0 : INFINITY;
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
      d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
    worst = std::max(worst, d);
    say("  %-4s    %+.5f %+.5f %+.5f | %+.5f %+.5f %+.5f    %.2g\n", names[t], a[0], a[1], a[2], b[0],
        b[1], b[2], d);
  }
  const bool comm_ok = sharded.forward_collectives == 1 && sharded.forward_all_reduce == 1 &&
                       sharded.backward_collectives == 1 && sharded.backward_all_reduce == 1 &&
                       single.forward_collectives == 0 && single.backward_collectives == 0 &&
                       sharded.grads[0].size() == static_cast<std::size_t>(batch * d_model);
  const bool ok = worst <= tolerance && comm_ok;
  say("\nmax |gradient difference| = %.3g (tolerance %.0e); collectives %s: %s\n", worst, tolerance,
      comm_ok ? "one all_reduce each way" : "UNEXPECTED",
      ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string backend = argc == 3 && std::string(argv[1]) == "--backend" ? argv[2]
                              : argc == 1                                       ? "sim"
                                                                                : "";
  if (backend == "sim") return run<sim::backend>("simulation", true);
#ifdef SPMD_DEMO_CUDA
  if (backend == "cuda") {
    try {
      spmd::cuda::require_device("spmd-grad-demo --backend cuda");
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
    return run<spmd::mpi::backend>("MPI (one process per rank)", env.rank() == 0);
  }
#endif
  std::fprintf(stderr, "usage: spmd-grad-demo [--backend sim|mpi|cuda]   (mpi: mpirun -np 8 ...)\n");
  return 2;
}
