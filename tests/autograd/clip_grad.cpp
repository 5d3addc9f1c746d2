// tests/autograd/clip_grad: clip_grad_norm_ over gradients of several layouts (sharded,
// uneven, replicated, left Partial) against the norm of the whole gradients computed in
// double; the inf-norm exactly; no clipping below max_norm; bad norm types refused.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "../common/values.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/clip_grad.hpp"

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;
using M = mesh<2, 2>;
using LW = layout<M, placements<shard<0>, shard<1>>, extents<5, 6>>;  // uneven: 3 + 2 rows
using LB = layout<M, placements<replicate, shard<0>>, extents<6>>;
using LP = layout<M, placements<shard<0>, replicate>, extents<4, 3>>;

using test_values::values;

struct setup {
  std::vector<float> cw = values(30, 2), cb = values(6, 3), cp = values(12, 4);
  decltype(rt::requires_grad(sim::distribute_tensor<LW>(values(30, 1)), "w")) w =
      rt::requires_grad(sim::distribute_tensor<LW>(values(30, 1)), "w");
  decltype(rt::requires_grad(sim::distribute_tensor<LB>(values(6, 1)), "b")) b =
      rt::requires_grad(sim::distribute_tensor<LB>(values(6, 1)), "b");
  // A gradient kept Partial(sum) on mesh dim 1 (data parallelism's deferred reduction).
  decltype(rt::requires_grad<placements<shard<0>, partial<reduce_op::sum>>>(sim::distribute_tensor<LP>(values(12, 1)), "p")) p =
      rt::requires_grad<placements<shard<0>, partial<reduce_op::sum>>>(sim::distribute_tensor<LP>(values(12, 1)), "p");
  setup() {  // gradients: cw, cb, cp
    (rt::sum<>(w * sim::distribute_tensor<LW>(cw)) + rt::sum<>(b * sim::distribute_tensor<LB>(cb)) +
     rt::sum<>(p * sim::distribute_tensor<LP>(cp)))
        .backward();
  }
  std::vector<float> all() const {
    std::vector<float> a = cw;
    a.insert(a.end(), cb.begin(), cb.end());
    a.insert(a.end(), cp.begin(), cp.end());
    return a;
  }
};

void check_scaled(const std::vector<float>& got, const std::vector<float>& g, double coef) {
  REQUIRE(got.size() == g.size());
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(got[i] == Approx(g[i] * coef).epsilon(1e-5).margin(1e-7));
}

}  // namespace

TEST_CASE("clip_grad_norm_ (2-norm) over sharded, replicated and Partial gradients", "[clip]") {
  setup s;
  double sq = 0;
  for (float x : s.all()) sq += double(x) * x;
  const double total = std::sqrt(sq);
  const double max_norm = 0.5;
  REQUIRE(total > max_norm);  // so it clips
  const auto n = rt::clip_grad_norm_(max_norm, s.w, s.b, s.p);
  static_assert(std::remove_cvref_t<decltype(n)>::layout_type::rank == 0);
  CHECK(n.full_tensor()[0] == Approx(total).epsilon(1e-6));
  const double coef = max_norm / (total + 1e-6);
  check_scaled(s.w.grad().full_tensor(), s.cw, coef);
  check_scaled(s.b.grad().full_tensor(), s.cb, coef);
  check_scaled(s.p.grad().full_tensor(), s.cp, coef);
  // Clipped once, the norm is max_norm: clipping again changes (almost) nothing.
  const auto n2 = rt::clip_grad_norm_(max_norm, s.w, s.b, s.p);
  CHECK(n2.full_tensor()[0] == Approx(max_norm).epsilon(1e-5));
}

TEST_CASE("clip_grad_norm_ with inf_norm: the largest magnitude, exactly", "[clip]") {
  setup s;
  float top = 0;
  for (float x : s.all()) top = std::max(top, std::fabs(x));
  const auto n = rt::clip_grad_norm_(0.1, rt::inf_norm, s.w, s.b, s.p);
  CHECK(n.full_tensor()[0] == top);
  const double coef = static_cast<float>(0.1f / (top + 1e-6f));
  check_scaled(s.w.grad().full_tensor(), s.cw, coef);
}

TEST_CASE("clip_grad_norm_ leaves gradients under max_norm as they are", "[clip]") {
  setup s;
  rt::clip_grad_norm_(1e6, s.w, s.b, s.p);
  CHECK(s.w.grad().full_tensor() == s.cw);  // times 1: the same bits
  CHECK(s.b.grad().full_tensor() == s.cb);
}

TEST_CASE("clip_grad_norm_ refuses what it cannot do, naming it", "[clip]") {
  setup s;
  CHECK_THROWS_WITH(rt::clip_grad_norm_(1.0, 1.0, s.w), Catch::Contains("norm_type 1"));
  CHECK_THROWS_WITH(rt::clip_grad_norm_(-1.0, s.w), Catch::Contains("max_norm -1"));
  CHECK_THROWS_WITH(rt::clip_grad_norm_(std::numeric_limits<double>::quiet_NaN(), s.w),
                    Catch::Contains("max_norm nan is not a number"));
  s.w.zero_grad(), s.b.zero_grad(), s.p.zero_grad();
  CHECK(rt::clip_grad_norm_(1.0, s.w, s.b).full_tensor()[0] == 0.f);  // no gradients: norm 0
}
