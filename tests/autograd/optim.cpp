// tests/autograd/optim: SGD and AdamW on sharded parameters against a hand-written transcript
// of torch.optim's single-tensor update (each operation rounded to float, in torch's order),
// on 1-d and 2-d meshes, even and uneven shards, over several steps; a gradient left Partial
// is reduced into the parameter's layout first; bad options are refused naming the value.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "../common/values.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/optim.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;

using test_values::values;

/// torch.optim.SGD's step on one element, float arithmetic in torch's order.
struct sgd_ref {
  explicit sgd_ref(rt::sgd_options opt) : o(opt) {}
  rt::sgd_options o;
  std::vector<float> buf;
  void step(std::vector<float>& p, const std::vector<float>& g) {
    if (buf.empty() && o.momentum != 0) buf.assign(p.size(), 0.f);
    const bool first = !started;
    started = true;
    for (std::size_t i = 0; i < p.size(); ++i) {
      float d = g[i];
      if (o.weight_decay != 0) d = d + p[i] * static_cast<float>(o.weight_decay);
      if (o.momentum != 0) {
        if (first) buf[i] = d;
        else buf[i] = buf[i] * static_cast<float>(o.momentum) + d * static_cast<float>(1 - o.dampening);
        d = o.nesterov ? d + buf[i] * static_cast<float>(o.momentum) : buf[i];
      }
      p[i] = p[i] - d * static_cast<float>(o.lr);
    }
  }
  bool started = false;
};

/// torch.optim.AdamW's step, the same way.
struct adamw_ref {
  explicit adamw_ref(rt::adamw_options opt) : o(opt) {}
  rt::adamw_options o;
  std::vector<float> m, v;
  int t = 0;
  void step(std::vector<float>& p, const std::vector<float>& g) {
    if (m.empty()) m.assign(p.size(), 0.f), v.assign(p.size(), 0.f);
    ++t;
    const double bc1 = 1 - std::pow(o.beta1, t), bc2 = 1 - std::pow(o.beta2, t);
    const float decay = static_cast<float>(1 - o.lr * o.weight_decay), w = static_cast<float>(1 - o.beta1);
    const float b2 = static_cast<float>(o.beta2), c2 = static_cast<float>(1 - o.beta2);
    const float step_size = static_cast<float>(o.lr / bc1), bc2_sqrt = static_cast<float>(std::sqrt(bc2));
    const float eps = static_cast<float>(o.eps);
    for (std::size_t i = 0; i < p.size(); ++i) {
      p[i] = p[i] * decay;
      m[i] = m[i] + (g[i] - m[i]) * w;
      v[i] = v[i] * b2 + (g[i] * c2) * g[i];
      const float denom = std::sqrt(v[i]) / bc2_sqrt + eps;
      p[i] = p[i] - (m[i] / denom) * step_size;
    }
  }
};

/// N steps of loss = sum(w * c_k) (gradient c_k at step k) through the optimizer, against the
/// reference on the whole tensor: the same bits.
template <class L, class Opt, class Ref>
void check_steps(Opt make, Ref ref, int steps) {
  constexpr index_t n = L::extents_type::static_extent(0) * L::extents_type::static_extent(1);
  std::vector<float> w0 = values(n, 1);
  auto w = rt::requires_grad(sim::distribute_tensor<L>(w0), "w");
  auto opt = make(w);
  std::vector<float> want = w0;
  for (int k = 0; k < steps; ++k) {
    const std::vector<float> c = values(n, static_cast<unsigned>(10 + k));
    // [docs:optim-step]
    rt::sum<>(w * sim::distribute_tensor<L>(c)).backward();
    opt.step();       // every rank updates its own block of w and of the optimizer's state
    opt.zero_grad();  // torch's set_to_none
    // [/docs:optim-step]
    ref.step(want, c);
    const std::vector<float> got = w.full_tensor();
    for (index_t i = 0; i < n; ++i) REQUIRE(got[static_cast<std::size_t>(i)] == want[static_cast<std::size_t>(i)]);
  }
}

template <class L>
void check_all() {
  const rt::sgd_options plain{.lr = 0.1};
  const rt::sgd_options momentum{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01};
  const rt::sgd_options nesterov{.lr = 0.05, .momentum = 0.9, .weight_decay = 0.02, .nesterov = true};
  for (const rt::sgd_options& o : {plain, momentum, nesterov})
    check_steps<L>([&](auto& w) { return rt::sgd(o, w); }, sgd_ref{o}, 4);
  const rt::adamw_options defaults{};
  const rt::adamw_options custom{.lr = 0.01, .beta1 = 0.8, .beta2 = 0.99, .eps = 1e-6, .weight_decay = 0.1};
  for (const rt::adamw_options& o : {defaults, custom})
    check_steps<L>([&](auto& w) { return rt::adamw(o, w); }, adamw_ref{o}, 5);
}

}  // namespace

TEST_CASE("SGD and AdamW on sharded parameters match torch's update", "[optim]") {
  check_all<layout<mesh<4>, placements<shard<0>>, extents<6, 5>>>();               // uneven: 2, 2, 2, 0
  check_all<layout<mesh<2, 2>, placements<shard<1>, replicate>, extents<3, 7>>>();  // 4, 3
  check_all<layout<mesh<2, 4>, placements<shard<0>, shard<1>>, extents<5, 8>>>();
  check_all<layout<mesh<2>, placements<replicate>, extents<2, 3>>>();
}

TEST_CASE("a Partial gradient is reduced into the parameter's layout first", "[optim]") {
  using M = mesh<2, 2>;
  using L = layout<M, placements<shard<0>, replicate>, extents<4, 3>>;
  // The gradient stays Partial(sum) on mesh dim 1 (DDP's deferred reduction).
  auto w = rt::requires_grad<placements<shard<0>, partial<reduce_op::sum>>>(sim::distribute_tensor<L>(values(12, 1)), "w");
  const std::vector<float> c = values(12, 5);
  rt::sum<>(w * sim::distribute_tensor<L>(c)).backward();
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(w.grad())>::layout_type::placements_type,
                               placements<shard<0>, partial<reduce_op::sum>>>);
  rt::sgd opt(rt::sgd_options{.lr = 0.5}, w);
  opt.step();
  std::vector<float> want = values(12, 1);
  sgd_ref{rt::sgd_options{.lr = 0.5}}.step(want, c);
  const std::vector<float> got = w.full_tensor();
  for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == want[i]);
}

TEST_CASE("bad optimizer input is refused naming the value", "[optim]") {
  using L = layout<mesh<2>, placements<shard<0>>, extents<4>>;
  auto w = rt::requires_grad(sim::distribute_tensor<L>(values(4, 1)), "w");
  CHECK_THROWS_WITH(rt::sgd(rt::sgd_options{.lr = -1}, w), Catch::Contains("lr -1"));
  CHECK_THROWS_WITH(rt::sgd(rt::sgd_options{.nesterov = true}, w), Catch::Contains("nesterov"));
  CHECK_THROWS_WITH(rt::adamw(rt::adamw_options{.beta1 = 1.0}, w), Catch::Contains("beta1 1"));
  // torch.optim's `not 0.0 <= x`: NaN refused as well as negatives, weight_decay included.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  CHECK_THROWS_WITH(rt::sgd(rt::sgd_options{.lr = nan}, w), Catch::Contains("lr nan is not a number"));
  CHECK_THROWS_WITH(rt::sgd(rt::sgd_options{.weight_decay = -0.5}, w), Catch::Contains("weight_decay -0.5"));
  CHECK_THROWS_WITH(rt::sgd(rt::sgd_options{.momentum = nan}, w), Catch::Contains("momentum nan"));
  CHECK_THROWS_WITH(rt::sgd(rt::sgd_options{.dampening = nan}, w), Catch::Contains("dampening nan"));
  CHECK_THROWS_WITH(rt::adamw(rt::adamw_options{.lr = nan}, w), Catch::Contains("lr nan"));
  CHECK_THROWS_WITH(rt::adamw(rt::adamw_options{.eps = nan}, w), Catch::Contains("eps nan"));
  CHECK_THROWS_WITH(rt::adamw(rt::adamw_options{.weight_decay = -1}, w), Catch::Contains("weight_decay -1"));
  CHECK_THROWS_WITH(rt::adamw(rt::adamw_options{.beta2 = nan}, w), Catch::Contains("beta2 nan"));
  CHECK_NOTHROW(rt::adamw(rt::adamw_options{.lr = 0, .eps = 0, .weight_decay = 0}, w));
  rt::variable<float, L, sim::backend> constant(sim::distribute_tensor<L>(values(4, 1)));
  CHECK_THROWS_WITH(rt::adamw(rt::adamw_options{}, constant), Catch::Contains("does not require a gradient"));
  // No gradient yet: the step skips the parameter, as torch's does.
  rt::adamw opt(rt::adamw_options{}, w);
  opt.step();
  CHECK(w.full_tensor() == values(4, 1));
  CHECK_FALSE(opt.state_of<0>().has_value());
}
