// The MLP demo's weights as a checkpoint: distributed for tensor parallelism on a 2x4 mesh,
// saved to one safetensors file, loaded on a 4x2 mesh and on one device (each rank reading
// only its block), and the forward pass run on each: the outputs agree with each other and
// with a one-device reference in double. docs/modules.md quotes the marked regions.
//
//   mlp-checkpoint [FILE]        (default: mlp.safetensors in the temporary directory)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/io/checkpoint.hpp"

#include "randn.hpp"
#include "spmd/runtime/module.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/tp.hpp"

namespace {

using namespace spmd;
namespace sim = spmd::sim;
constexpr index_t batch = 16, d_model = 32, d_hidden = 64;

// [docs:module]
struct mlp_weights {
  BOOST_HANA_DEFINE_STRUCT(mlp_weights,
    (tensor<float, extents<d_hidden, d_model>>, w1), (tensor<float, extents<d_hidden>>, b1),
    (tensor<float, extents<d_model, d_hidden>>, w2), (tensor<float, extents<d_model>>, b2));
};

// Megatron's split on mesh dim 1 (tp), for any 2-d mesh: W1 and b1 by output features, W2 by
// input features; b2, which the partition does not name, is replicated.
template <fixed_string Name, class Member>
struct megatron {};
template <class M> struct megatron<"w1", M> { using type = placements<replicate, shard<0>>; };
template <class M> struct megatron<"b1", M> { using type = placements<replicate, shard<0>>; };
template <class M> struct megatron<"w2", M> { using type = placements<replicate, shard<1>>; };
// [/docs:module]

using spmd::examples::randn;

/// relu(x W1^T + b1) W2^T + b2 with the module's weights on Mesh (tp = dim 1).
template <class Mesh>
std::vector<float> forward(const runtime::distributed_module<mlp_weights, megatron, Mesh, sim::backend>& m,
                           const std::vector<float>& x) {
  using X = layout<Mesh, placements<shard<0>, replicate>, extents<batch, d_model>>;
  using Up = sim::column_parallel_linear<float, Mesh, 1, d_model, d_hidden>;
  using Down = sim::row_parallel_linear<float, Mesh, 1, d_hidden, d_model>;
  const Up up{m.template get<"w1">(), m.template get<"b1">()};
  const Down down{m.template get<"w2">(), m.template get<"b2">()};
  return down(sim::relu(up(sim::distribute_tensor<X>(x)))).full_tensor();
}

std::vector<double> one_device(const mlp_weights& w, const std::vector<float>& x) {
  std::vector<double> h(batch * d_hidden), y(batch * d_model);
  for (index_t i = 0; i < batch; ++i)
    for (index_t o = 0; o < d_hidden; ++o) {
      double s = w.b1.data[o];
      for (index_t k = 0; k < d_model; ++k) s += double(x[i * d_model + k]) * w.w1.data[o * d_model + k];
      h[i * d_hidden + o] = std::max(0.0, s);
    }
  for (index_t i = 0; i < batch; ++i)
    for (index_t o = 0; o < d_model; ++o) {
      double s = w.b2.data[o];
      for (index_t k = 0; k < d_hidden; ++k) s += h[i * d_hidden + k] * w.w2.data[o * d_hidden + k];
      y[i * d_model + o] = s;
    }
  return y;
}

template <class A, class B>
double max_diff(const std::vector<A>& a, const std::vector<B>& b) {
  double d = a.size() == b.size() ? 0 : INFINITY;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, std::fabs(double(a[i]) - double(b[i])));
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string path =
      argc > 1 ? argv[1] : (std::filesystem::temp_directory_path() / "mlp.safetensors").string();
  mlp_weights w;
  w.w1.data = randn(d_hidden * d_model, 2, 0.2f);
  w.b1.data = randn(d_hidden, 3, 0.1f);
  w.w2.data = randn(d_model * d_hidden, 4, 0.2f);
  w.b2.data = randn(d_model, 5, 0.1f);
  const std::vector<float> x = randn(batch * d_model, 1, 1.f);

  // [docs:save_load]
  using Mesh24 = mesh<2, 4>;
  using Mesh42 = mesh<4, 2>;
  using One = mesh<1, 1>;
  const auto on_2x4 = sim::distribute_module<megatron, Mesh24>(w);
  io::save(path, on_2x4);                                                   // one file, global tensors
  const auto on_4x2 = io::load_module<megatron, Mesh42, sim::backend, mlp_weights>(path);  // resharded
  const auto on_one = io::load_module<megatron, One, sim::backend, mlp_weights>(path);
  // [/docs:save_load]

  const std::vector<float> y24 = forward(on_2x4, x), y42 = forward(on_4x2, x), y1 = forward(on_one, x);
  const std::vector<double> ref = one_device(w, x);
  std::printf("mlp checkpoint: %s (%lld bytes)\n", path.c_str(),
              static_cast<long long>(std::filesystem::file_size(path)));
  std::printf("  w1 on 2x4: local (%lld, %lld) per rank; on 4x2: (%lld, %lld); on one device: (%lld, %lld)\n",
              (long long)on_2x4.get<"w1">().to_local(0).shape[0], (long long)on_2x4.get<"w1">().to_local(0).shape[1],
              (long long)on_4x2.get<"w1">().to_local(0).shape[0], (long long)on_4x2.get<"w1">().to_local(0).shape[1],
              (long long)on_one.get<"w1">().to_local(0).shape[0], (long long)on_one.get<"w1">().to_local(0).shape[1]);
  const bool same_weights = on_4x2.full_module().w2.data == w.w2.data && on_one.full_module().b1.data == w.b1.data;
  const double d42 = max_diff(y42, y24), d1 = max_diff(y1, y24), dref = max_diff(y24, ref);
  constexpr double tolerance = 1e-5;
  std::printf("  weights after the round trip: %s\n", same_weights ? "bit-identical" : "DIFFERENT");
  std::printf("  max |y(4x2) - y(2x4)| = %.3g, max |y(1) - y(2x4)| = %.3g, max |y(2x4) - double| = %.3g\n",
              d42, d1, dref);
  const bool ok = same_weights && d42 <= tolerance && d1 <= tolerance && dref <= 1e-4;
  std::printf("  %s\n", ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
