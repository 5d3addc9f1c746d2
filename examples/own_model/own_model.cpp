// examples/own_model/own_model.cpp — your own model, loss and data with spmd's installed
// headers (docs/models.md walks through it): a 3-layer MLP regressing a teacher's outputs,
// tensor parallel × FSDP on a 2x2 mesh, trained beside the same model on one device; exit 1 if
// a loss differs by more than 1e-5 (relative). Built in CI against `meson install` + pkg-config.
#include <array>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include <boost/hana/adapt_struct.hpp>
#include <spmd/nn/modules.hpp>
#include <spmd/nn/parallelize.hpp>
#include <spmd/runtime/autograd.hpp>
#include <spmd/runtime/optim.hpp>
#include <spmd/sim/sim.hpp>

namespace nn = spmd::nn;
namespace rt = spmd::runtime;

// [docs:own-model]
struct mlp3 {  // 16 -> 64 -> 64 -> 4
  nn::linear<16, 64> fc1;
  nn::linear<64, 64> fc2;
  nn::linear<64, 4> fc3;
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    return get<"fc3">(m)(rt::tanh(get<"fc2">(m)(rt::tanh(get<"fc1">(m)(x)))));
  }
};
BOOST_HANA_ADAPT_STRUCT(mlp3, fc1, fc2, fc3);

using plan = nn::tp_plan<nn::rule<"fc1.*", nn::colwise>, nn::rule<"fc2.*", nn::rowwise>>;
// [/docs:own-model]
constexpr int batch = 32, steps = 30;

/// Step s's batch: inputs, and the targets a fixed teacher gives them.
std::array<std::vector<float>, 2> data(int s) {
  std::mt19937 r(100 + s);
  std::normal_distribution<float> n;
  std::vector<float> x(batch * 16), y(batch * 4);
  for (float& v : x) v = n(r);
  for (int b = 0; b < batch; ++b)
    for (int o = 0; o < 4; ++o) y[b * 4 + o] = std::sin(x[b * 16 + o] + 0.5f * x[b * 16 + o + 4]);
  return {x, y};
}

/// A batch of C features a row: the rows split over dp, whole on each tp rank.
template <class Mesh, int C>
using batch_layout = spmd::layout<Mesh, spmd::placements<spmd::shard<0>, spmd::replicate>, spmd::extents<batch, C>>;

/// The losses of training `host` on Mesh (its dims "dp" and "tp").
template <class Mesh>
std::vector<double> train(const mlp3& host) {
  // [docs:own-train]
  auto model = nn::parallelize<Mesh, spmd::sim::backend, nn::tensor_parallel<"tp", plan>, nn::fsdp<"dp">>(host);
  auto opt = std::apply([](auto&... p) { return rt::adamw({.lr = 3e-3}, p...); }, nn::parameters(model));
  std::vector<double> losses;
  for (int s = 0; s < steps; ++s) {
    const auto [x, y] = data(s);
    const auto d = model(rt::as_variable(spmd::sim::distribute_tensor<batch_layout<Mesh, 16>>(x))) -
                   spmd::sim::distribute_tensor<batch_layout<Mesh, 4>>(y);
    auto loss = rt::mean(d * d);  // our own loss: the mean squared error
    loss.backward();
    opt.step();
    opt.zero_grad();
    losses.push_back(loss.value().full_tensor()[0]);
  }
  // [/docs:own-train]
  return losses;
}

int main() {
  mlp3 host;  // initial values, as torch.nn.Linear draws them: U(-1/sqrt(in), 1/sqrt(in))
  std::mt19937 r(7);
  for (auto* t : {&host.fc1.weight.data, &host.fc1.bias.data, &host.fc2.weight.data, &host.fc2.bias.data,
                  &host.fc3.weight.data, &host.fc3.bias.data})
    for (float& v : *t) v = std::uniform_real_distribution<float>(-0.25f, 0.25f)(r);
  const auto one = train<spmd::mesh<1, 1>::named<"dp", "tp">>(host);
  const auto mesh = train<spmd::mesh<2, 2>::named<"dp", "tp">>(host);
  double worst = 0;
  for (int s = 0; s < steps; ++s) worst = std::max(worst, std::abs(mesh[s] - one[s]) / one[s]);
  std::printf("loss %.6f -> %.6f on 2x2 (one device: %.6f -> %.6f), worst difference %.2g\n", mesh.front(),
              mesh.back(), one.front(), one.back(), worst);
  return worst <= 1e-5 && mesh.back() < 0.5 * mesh.front() ? 0 : 1;
}
