// tests/autoshard/execute.cpp — the search's choice run: the two-layer MLP on meshes of 4 and
// 2x2, each operator fed its strategy's layouts (auto_parallel's read_placements, with the
// gradients the strategy makes as grad_placements), forward and backward on the simulation.
// The collectives counted equal the predicted ones kind by kind, and the loss and gradients
// equal one device's. Cases: the search's own choice under dear and cheap links, and
// hand-written plans pinned (FSDP, DDP, DP × TP, FSDP × TP), whose activations it places.
#include <cmath>
#include <initializer_list>
#include <vector>

#include <catch2/catch.hpp>

#include "graphs.hpp"
#include "spmd/autoshard/auto_parallel.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/sim/sim.hpp"

using namespace autoshard_tests;
namespace rt = spmd::runtime;

namespace {

using all_sum = ops::reduction<ops::reduce_kind::sum, false>;
constexpr index_t batch = 64, d = 128, hidden = 256;

/// sum(relu(x · W1ᵀ) · W2ᵀ) summed whole: tensors 0 x, 1 W1, 2 W2, 3 h, 4 relu, 5 z, 6 the loss.
template <int... M>
struct mlp {
  static constexpr as::graph make() {
    as::graph g{spmd::mesh_shape_vec{{M...}, sizeof...(M)}};
    const int x = g.data({batch, d});
    const int w1 = g.param({hidden, d}), w2 = g.param({d, hidden});
    const int u = g.apply<relu>({g.apply<ops::matmul_t>({x, w1})});
    g.loss = g.apply<all_sum>({g.apply<ops::matmul_t>({u, w2})});
    return g;
  }
};

template <int Micro>
struct links {
  static constexpr as::cost_model value() {
    as::cost_model c{};
    c.fallback.alpha_s = Micro * 1e-6;
    return c;
  }
};

/// x, W1, W2 pinned (the activations searched).
template <class Step>
constexpr as::pins pinned(std::initializer_list<std::initializer_list<spmd::placement>> per_tensor) {
  const as::graph g = Step::make();
  as::pins p;
  int t = 0;
  for (const auto& list : per_tensor) {
    spmd::placement_vec v{};
    for (const spmd::placement& x : list) v.push_back(x);
    p.pin(t, spmd::make_spec(g.mesh, v, g.tensors[static_cast<std::size_t>(t)].shape.size()).spec, g.tensors.size());
    ++t;
  }
  return p;
}
constexpr spmd::placement S0 = spmd::make_shard(0), S1 = spmd::make_shard(1), R = spmd::make_replicate();
struct fsdp4 {
  static constexpr as::pins value() { return pinned<mlp<4>>({{S0}, {S0}, {S0}}); }
};
struct ddp4 {
  static constexpr as::pins value() { return pinned<mlp<4>>({{S0}, {R}, {R}}); }
};
struct dp_tp {
  static constexpr as::pins value() { return pinned<mlp<2, 2>>({{S0, R}, {R, S0}, {R, S1}}); }
};
struct fsdp_tp {
  static constexpr as::pins value() { return pinned<mlp<2, 2>>({{S0, R}, {S0, S0}, {S0, S1}}); }
};

struct outcome {
  int counts[4] = {};
  double loss = 0;
  std::vector<float> g1, g2;
};

std::vector<float> values(std::size_t n, int mod, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<int>(i % static_cast<std::size_t>(mod)) - mod / 2) * scale;
  return v;
}

/// The step of A on Mesh: every operator reads its strategy's layouts.
template <class A, class Mesh>
outcome run() {
  // [docs:auto-run]
  using X = spmd::layout<Mesh, typename A::template read_placements<0, 0>, spmd::extents<batch, d>>;
  const auto x = rt::as_variable(spmd::sim::distribute_tensor<X>(values(batch * d, 7, 0.1f)));
  auto w1 = rt::requires_grad(spmd::sim::distribute_tensor<typename A::template layout<1, Mesh>>(values(hidden * d, 5, 0.05f)), "w1");
  auto w2 = rt::requires_grad(spmd::sim::distribute_tensor<typename A::template layout<2, Mesh>>(values(d * hidden, 3, 0.05f)), "w2");
  // operator J's input I, moved to what its strategy reads (its gradient as the strategy makes it)
  const auto in = [](auto j, auto i, const auto& v) {
    return rt::redistribute<typename A::template read_placements<j, i>>(
        v, rt::grad_placements<typename A::template grad_placements<j, i>>);
  };
  using C = std::integral_constant<std::size_t, 0>;
  using I1 = std::integral_constant<std::size_t, 1>;
  using J2 = std::integral_constant<std::size_t, 2>;
  using J3 = std::integral_constant<std::size_t, 3>;
  rt::comm_counter count;
  const auto h = rt::matmul_t<typename A::template placements_of<3>>(in(C{}, C{}, x), in(C{}, I1{}, w1));
  const auto u = rt::relu(in(I1{}, C{}, h));
  const auto z = rt::matmul_t<typename A::template placements_of<5>>(in(J2{}, C{}, u), in(J2{}, I1{}, w2));
  auto loss = rt::sum<>(in(J3{}, C{}, z));
  loss.backward();
  // [/docs:auto-run]
  outcome o;
  for (int k = 0; k < 4; ++k) o.counts[k] = count.count(static_cast<spmd::step_kind>(k));
  o.loss = static_cast<double>(loss.value().full_tensor()[0]);
  o.g1 = w1.grad().full_tensor();
  o.g2 = w2.grad().full_tensor();
  return o;
}

template <class A, class Mesh>
void check_case(const outcome& one) {
  static_assert(A::ok);
  const outcome o = run<A, Mesh>();
  for (int k = 0; k < 4; ++k) CHECK(o.counts[k] == A::counts.n[k]);
  CHECK(std::abs(o.loss - one.loss) <= 1e-5);  // a sum of 8,192 terms of both signs, about 0.06
  double worst = 0;
  for (std::size_t i = 0; i < one.g1.size(); ++i) worst = std::max(worst, double(std::abs(o.g1[i] - one.g1[i])));
  for (std::size_t i = 0; i < one.g2.size(); ++i) worst = std::max(worst, double(std::abs(o.g2[i] - one.g2[i])));
  CHECK(worst <= 1e-5);
}

}  // namespace

TEST_CASE("autoshard: the chosen step runs the collectives predicted, kind by kind, and one device's numbers", "[autoshard]") {
  const outcome one = run<as::auto_parallel<mlp<1>>, spmd::mesh<1>>();
  CHECK(one.loss != 0);
  // the search's own choice
  check_case<as::auto_parallel<mlp<4>, as::no_pins, links<1000>>, spmd::mesh<4>>(one);
  check_case<as::auto_parallel<mlp<4>, as::no_pins, links<1>>, spmd::mesh<4>>(one);
  // hand-written plans, activations searched
  using F = as::auto_parallel<mlp<4>, fsdp4>;
  static_assert(F::counts.n[0] == 2 && F::counts.n[2] == 2);  // W1, W2 gathered; their gradients reduce-scattered
  check_case<F, spmd::mesh<4>>(one);
  using D = as::auto_parallel<mlp<4>, ddp4>;
  static_assert(D::counts.n[1] == 2 && D::collectives == 2);  // each gradient all-reduced
  check_case<D, spmd::mesh<4>>(one);
  check_case<as::auto_parallel<mlp<2, 2>, dp_tp>, spmd::mesh<2, 2>>(one);
  check_case<as::auto_parallel<mlp<2, 2>, fsdp_tp>, spmd::mesh<2, 2>>(one);
}
