// tests/ops/elementwise/scalar: a dtensor with a scalar on either side (x + c, c - x, x * c,
// c / x, maximum(x, c), ...) over placements drawn from {R, S(0), S(1), P(sum), P(avg),
// P(max), P(min)} on 1-d meshes (even and uneven) and a subset on a 2-d mesh, against one
// device in double; the compiler's choices for Partial inputs; other element types.
#include <cstdint>
#include <type_traits>

#include "ew_test.hpp"

namespace {

using namespace spmd;
using namespace ew_test;

// Each case: the dtensor expression, the same in double, and the input range (c / x keeps
// x away from 0). The scalars are run-time values.
struct x_plus_c {
  static auto run(const auto& x) { return x + 1.5f; }
  static double ref(double v) { return v + 1.5; }
  static constexpr double lo = -2, hi = 2;
};
struct c_plus_x {
  static auto run(const auto& x) { return 1.5f + x; }
  static double ref(double v) { return 1.5 + v; }
  static constexpr double lo = -2, hi = 2;
};
struct x_minus_c {
  static auto run(const auto& x) { return x - 0.75; }  // a double scalar with a float dtensor
  static double ref(double v) { return v - 0.75; }
  static constexpr double lo = -2, hi = 2;
};
struct c_minus_x {
  static auto run(const auto& x) { return 0.5f - x; }
  static double ref(double v) { return 0.5 - v; }
  static constexpr double lo = -2, hi = 2;
};
struct x_times_c {
  static auto run(const auto& x) { return x * -1.25f; }  // negative: P(max) must not pass
  static double ref(double v) { return v * -1.25; }
  static constexpr double lo = -2, hi = 2;
};
struct c_times_x {
  static auto run(const auto& x) { return 3.f * x; }
  static double ref(double v) { return 3 * v; }
  static constexpr double lo = -2, hi = 2;
};
struct x_over_c {
  static auto run(const auto& x) { return x / -4.f; }
  static double ref(double v) { return v / -4; }
  static constexpr double lo = -2, hi = 2;
};
struct c_over_x {
  static auto run(const auto& x) { return 2.f / x; }
  static double ref(double v) { return 2 / v; }
  static constexpr double lo = 0.5, hi = 2;
};
struct max_x_c {
  static auto run(const auto& x) { return sim::maximum(x, 0.25f); }
  static double ref(double v) { return v > 0.25 ? v : 0.25; }
  static constexpr double lo = -2, hi = 2;
};
struct min_c_x {
  static auto run(const auto& x) { return sim::minimum(-0.5f, x); }
  static double ref(double v) { return v < -0.5 ? v : -0.5; }
  static constexpr double lo = -2, hi = 2;
};

template <class Case>
void sweep_all() {
  sweep<Case, mesh<4>, float, 8, 4, placements<replicate>, placements<shard<0>>, placements<shard<1>>,
        placements<psum>, placements<pavg>, placements<pmax>, placements<pmin>>(1e-6, 1);
  sweep<Case, mesh<3>, float, 5, 7, placements<replicate>, placements<shard<0>>, placements<shard<1>>,
        placements<psum>, placements<pavg>, placements<pmax>, placements<pmin>>(1e-6, 2);
  sweep<Case, mesh<2, 2>, float, 5, 6, placements<shard<1>, shard<0>>, placements<psum, shard<1>>,
        placements<replicate, pmax>>(1e-6, 3);
}

}  // namespace

TEST_CASE("a dtensor with a scalar over placements", "[elementwise]") {
  sweep_all<x_plus_c>();
  sweep_all<c_plus_x>();
  sweep_all<x_minus_c>();
  sweep_all<c_minus_x>();
  sweep_all<x_times_c>();
  sweep_all<c_times_x>();
  sweep_all<x_over_c>();
  sweep_all<c_over_x>();
  sweep_all<max_x_c>();
  sweep_all<min_c_x>();
}

TEST_CASE("scalars with other element types", "[elementwise]") {
  using M = mesh<3>;
  const auto a = op_test::random<std::int32_t>({5, 7}, 4, -50, 50);
  const auto l = op_test::random<std::int64_t>({5, 7}, 5, -50, 50);
  const auto h = op_test::random<bfloat16>({5, 7}, 6);
  const auto d = op_test::random<double>({5, 7}, 7);
  each<placements<shard<1>>, placements<psum>, placements<pmax>>([&]<class P>() {
    INFO("x " << op_test::placements_text<P>());
    op_test::check_close(sim::distribute_tensor<layout<M, P, extents<5, 7>>>(a.data) * 3,
                         map(widen(a), [](double v) { return v * 3; }), 0);
    op_test::check_close(std::int64_t{2} - sim::distribute_tensor<layout<M, P, extents<5, 7>>>(l.data),
                         map(widen(l), [](double v) { return 2 - v; }), 0);
    op_test::check_close(sim::distribute_tensor<layout<M, P, extents<5, 7>>>(h.data) * 0.5f,
                         map(widen(h), [](double v) { return v * 0.5; }), 1e-2);
    op_test::check_close(sim::maximum(sim::distribute_tensor<layout<M, P, extents<5, 7>>>(d.data), 0.0),
                         map(widen(d), [](double v) { return v > 0 ? v : 0; }), 1e-12);
  });
}

// What the compiler chose.
namespace {
template <class Case, class P>
using out_of = placements_of<decltype(Case::run(
    std::declval<const sim::dtensor<float, layout<mesh<4>, placements<P>, extents<8, 4>>>&>()))>;
template <class P>
using pl = placements<P>;
template <class Case, class P>
constexpr bool not_partial_out = not_partial<decltype(Case::run(
    std::declval<const sim::dtensor<float, layout<mesh<4>, placements<P>, extents<8, 4>>>&>()))>();

static_assert(not_partial_out<x_plus_c, psum>, "x + c of P(sum) would add c once per rank");
static_assert(std::is_same_v<out_of<x_plus_c, pavg>, pl<pavg>>);
static_assert(std::is_same_v<out_of<c_plus_x, pmax>, pl<pmax>>);
static_assert(std::is_same_v<out_of<x_minus_c, pmin>, pl<pmin>>);
static_assert(std::is_same_v<out_of<c_minus_x, pmax>, pl<pmin>>, "c - x swaps max and min");
static_assert(std::is_same_v<out_of<c_minus_x, pavg>, pl<pavg>>);
static_assert(std::is_same_v<out_of<x_times_c, psum>, pl<psum>>);
static_assert(std::is_same_v<out_of<c_times_x, pavg>, pl<pavg>>);
static_assert(not_partial_out<x_times_c, pmax>, "c may be negative: P(max) does not pass");
static_assert(std::is_same_v<out_of<x_over_c, psum>, pl<psum>>);
static_assert(not_partial_out<c_over_x, psum>, "c / x passes nothing");
static_assert(not_partial_out<c_over_x, pmax>);
static_assert(std::is_same_v<out_of<max_x_c, pmin>, pl<pmin>>, "max(x, c) is increasing in x");
static_assert(std::is_same_v<out_of<min_c_x, pmax>, pl<pmax>>);
static_assert(std::is_same_v<out_of<x_plus_c, shard<1>>, pl<shard<1>>>);
}  // namespace
