// tests/autograd/engine.cpp — the tape's rules: accumulation over several backwards and over
// several uses of one tensor, zeroing, no_grad, detach, retain_grad, freed graphs (refused
// with the tensor's name, nothing changed), backward from a given output gradient, the
// gradient types, and the backward's communication for the Megatron MLP on 2x4 (one
// all_reduce each way) against the same MLP on one device.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/throws.hpp"
#include "gradcheck.hpp"

namespace {
/// f throws E with a message containing `part`.
template <class E, class F>
void require_throws_containing(F&& f, const std::string& part) {
  const std::string m = spmd_test::message<E>(f);
  INFO("message: " << m);
  REQUIRE(spmd_test::contains(m, part));
}
}  // namespace

using namespace spmd;
namespace rt = spmd::runtime;

namespace {
using M = mesh<2>;
using LX = layout<M, placements<shard<0>>, extents<4, 3>>;
const std::vector<double> x0{1, -2, 3, 0.5, -1, 2, 4, -3, 1.5, -0.5, 2.5, -1.5};

auto leaf(const char* name = "x") { return sim::requires_grad(sim::distribute_tensor<LX>(x0), name); }
}  // namespace

TEST_CASE("gradients accumulate over backwards and uses, and zero_grad starts anew", "[autograd][engine]") {
  auto x = leaf();
  rt::sum<>(x * 2.0).backward();
  rt::sum<>(x * 3.0).backward();
  for (double g : x.grad().full_tensor()) CHECK(g == 5.0);
  x.zero_grad();
  CHECK_FALSE(x.has_grad());
  rt::sum<>(x * x + x).backward();  // two uses: 2x + 1
  const auto g = x.grad().full_tensor();
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == 2 * x0[i] + 1);
}

TEST_CASE("no_grad records nothing; detach leaves the tape", "[autograd][engine]") {
  auto x = leaf();
  {
    sim::no_grad guard;
    CHECK_FALSE(rt::is_grad_enabled());
    auto y = x * 2.0;
    CHECK_FALSE(y.requires_grad());
    {
      sim::enable_grad on;
      CHECK((x * 2.0).requires_grad());
    }
  }
  CHECK(rt::is_grad_enabled());
  auto d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(&d.value() == &x.value());  // the same tensor
  auto y = rt::sum<>(d * x);        // only x's use is differentiated
  y.backward();
  CHECK(x.grad().full_tensor() == x0);
  // A dtensor operand is a constant too.
  x.zero_grad();
  rt::sum<>(x * sim::distribute_tensor<LX>(x0)).backward();
  CHECK(x.grad().full_tensor() == x0);
}

TEST_CASE("a freed graph is refused with the tensor's name, and nothing changes", "[autograd][engine]") {
  auto x = leaf("weights");
  auto h = rt::relu(x) * 2.0;
  auto loss = rt::sum<>(h);
  loss.backward();
  const auto before = x.grad().full_tensor();
  require_throws_containing<std::logic_error>([&] { loss.backward(); },
                                                         "already freed");
  CHECK(x.grad().full_tensor() == before);
  // A second graph sharing the freed part: refused before anything runs.
  auto loss2 = rt::sum<>(h * h);
  require_throws_containing<std::logic_error>([&] { loss2.backward(); }, "'mul'");
  CHECK(x.grad().full_tensor() == before);
  // retain_graph keeps it.
  auto k = rt::sum<>(rt::relu(x));
  k.backward(true);
  k.backward();
  // No gradient yet, or none wanted: named.
  auto y = leaf("bias");
  require_throws_containing<std::logic_error>([&] { (void)y.grad(); }, "'bias' has no gradient");
  require_throws_containing<std::logic_error>(
      [&] { rt::as_variable(sim::distribute_tensor<LX>(x0)).backward(sim::distribute_tensor<LX>(x0)); },
      "does not require a gradient");
}

TEST_CASE("backward from a given output gradient; retain_grad keeps a non-leaf's", "[autograd][engine]") {
  auto x = leaf();
  auto y = x * 3.0;
  y.retain_grad();
  using LG = layout<M, placements<replicate>, extents<4, 3>>;  // any layout of y's shape
  y.backward(sim::distribute_tensor<LG>(x0));
  const auto g = x.grad().full_tensor();
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(g[i] == 3 * x0[i]);
  CHECK(y.grad().full_tensor() == x0);
}

TEST_CASE("gradient types: the leaf's layout with Partial -> Replicate, or the given placements",
          "[autograd][engine]") {
  using M2 = mesh<2, 2>;
  using LP = layout<M2, placements<partial<>, shard<1>>, extents<4, 3>>;
  auto p = sim::requires_grad(sim::distribute_tensor<LP>(x0), "p");
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(p.grad())>,
                               sim::dtensor<double, layout<M2, placements<replicate, shard<1>>, extents<4, 3>>>>);
  auto q = sim::requires_grad<placements<partial<>, replicate>>(sim::distribute_tensor<LP>(x0), "q");
  static_assert(std::is_same_v<decltype(q)::grad_type,
                               sim::dtensor<double, layout<M2, placements<partial<>, replicate>, extents<4, 3>>>>);
  rt::sum<>(p * q).backward();
  // q's gradient is held Partial (as declared); its value is p's.
  CHECK(q.grad().full_tensor() == x0);
  CHECK(p.grad().full_tensor() == x0);
  // The adjoint plan is a compile-time value like a forward plan.
  using From = layout<M2, placements<shard<0>, replicate>, extents<4, 3>>;
  using To = layout<M2, placements<replicate, replicate>, extents<4, 3>>;
  static_assert(rt::backward_plan_of<From, To, float>::collectives() == 0);  // R -> S(0): a local chunk
  static_assert(rt::backward_plan_of<To, From, float>::collectives() == 1);
  using Pt = layout<M2, placements<partial<>, replicate>, extents<4, 3>>;
  static_assert(rt::backward_plan_of<Pt, To, float>::size() == 0);  // P -> R forward: R -> R back
}

TEST_CASE("backward_dtype: the backward redistribute runs in the given type", "[autograd][redistribute]") {
  using LS = layout<M, placements<shard<1>>, extents<4, 3>>;
  auto x = sim::requires_grad(sim::distribute_tensor<LX>(x0), "x");
  sim::comm_counter comm;
  auto y = rt::redistribute<placements<shard<1>>>(x, rt::forward_dtype<double>, rt::backward_dtype<spmd::bfloat16>);
  rt::sum<>(y * 1.0009765625).backward();  // 1 + 2^-10: not a bfloat16, rounds to 1
  static_assert(std::is_same_v<decltype(y)::grad_layout, rt::grad_layout_t<LS>>);
  for (double g : x.grad().full_tensor()) CHECK(g == 1.0);
  // Both ways moved: 4 bytes per element forward, 2 back (elements that change rank).
  CHECK(comm.count(step_kind::all_to_all) == 2);
}

TEST_CASE("grad_placements: the output's gradient held as given", "[autograd][redistribute]") {
  using M2 = mesh<2, 2>;
  using L0 = layout<M2, placements<shard<0>, replicate>, extents<4, 3>>;
  auto x = sim::requires_grad(sim::distribute_tensor<L0>(x0), "x");
  auto y = rt::redistribute<placements<replicate, replicate>>(x, rt::grad_placements<placements<replicate, partial<>>>);
  static_assert(std::is_same_v<decltype(y)::grad_placements, placements<replicate, partial<>>>);
  rt::sum<>(y * 2.0).backward();
  for (double g : x.grad().full_tensor()) CHECK(g == 2.0);
}

namespace {
/// from_local<P, GradP> on a leaf of placements A: the gradient returned to the leaf, its
/// layout type, and the collectives of the backward.
template <class A, class P, class GradP>
void check_from_local(int reductions) {
  using LA = layout<mesh<2>, A, extents<4>>;
  using LC = layout<mesh<2>, placements<replicate>, extents<4>>;
  const std::vector<double> v{1, 2, 3, 4}, c{0.5, -1, 2, 3};
  auto x = sim::requires_grad(sim::distribute_tensor<LA>(v), "local");
  auto y = rt::from_local<P, GradP>(x);
  static_assert(std::is_same_v<typename decltype(y)::grad_placements,
                               std::conditional_t<std::is_void_v<GradP>, rt::default_grad_placements_t<P>, GradP>>);
  auto loss = rt::sum<>(y * sim::distribute_tensor<LC>(c));
  sim::comm_counter comm;
  loss.backward();
  CHECK(comm.count(step_kind::all_reduce) == reductions);
  static_assert(std::is_same_v<typename decltype(x)::grad_placements, rt::default_grad_placements_t<A>>);
  const auto g = x.grad().full_tensor();
  CHECK(g == c);
  gradcheck::check_blocks(x.grad(), g);
}
}  // namespace

TEST_CASE("from_local: DTensor's five cases of forward placement, incoming and returned gradient",
          "[autograd][local]") {
  using S = placements<shard<0>>;
  using R = placements<replicate>;
  using P = placements<partial<>>;
  check_from_local<S, S, void>(0);  // Shard -> Shard -> Shard
  check_from_local<R, R, void>(0);  // Replicate -> Replicate -> Replicate
  check_from_local<R, R, P>(1);     // Replicate -> Partial -> Replicate (reduced)
  check_from_local<P, P, void>(0);  // Partial -> Replicate -> Replicate
  check_from_local<P, P, P>(1);     // Partial -> Partial -> Replicate (reduced)
}

TEST_CASE("to_local then from_local on a Partial tensor: the pure-DTensor path's gradient",
          "[autograd][local]") {
  using LP = layout<mesh<2>, placements<partial<>>, extents<4>>;
  using LC = layout<mesh<2>, placements<replicate>, extents<4>>;
  const std::vector<double> v{1, 2, 3, 4}, c{0.5, -1, 2, 3};
  auto x = sim::requires_grad(sim::distribute_tensor<LP>(v), "x");
  auto y = rt::from_local<placements<partial<>>>(rt::to_local(x));
  rt::sum<>(y * sim::distribute_tensor<LC>(c)).backward();
  auto x2 = sim::requires_grad(sim::distribute_tensor<LP>(v), "x2");
  rt::sum<>(x2 * sim::distribute_tensor<LC>(c)).backward();
  CHECK(x.grad().full_tensor() == x2.grad().full_tensor());
  static_assert(std::is_same_v<decltype(x)::grad_type, decltype(x2)::grad_type>);
}
