// tests/ops/elementwise/unary: neg, abs, exp, log, sqrt, relu, gelu, tanh, sigmoid on dtensors
// over placements drawn from {R, S(0), S(1), P(sum), P(avg), P(max), P(min)} on 1-d meshes
// (even and uneven) and a subset on a 2-d mesh, against one device in double; the
// compiler's choices for Partial inputs; the other element types.
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ew_test.hpp"

namespace {

using namespace spmd;
using namespace ew_test;

// Each op: the dtensor call, the one-device value in double, and the input range it is
// defined on (log and sqrt: positive).
struct neg_case {
  static auto run(const auto& x) { return -x; }
  static double ref(double v) { return -v; }
  static constexpr double lo = -2, hi = 2;
};
struct abs_case {
  static auto run(const auto& x) { return sim::abs(x); }
  static double ref(double v) { return v < 0 ? -v : v; }
  static constexpr double lo = -2, hi = 2;
};
struct exp_case {
  static auto run(const auto& x) { return sim::exp(x); }
  static double ref(double v) { return std::exp(v); }
  static constexpr double lo = -2, hi = 2;
};
struct log_case {
  static auto run(const auto& x) { return sim::log(x); }
  static double ref(double v) { return std::log(v); }
  static constexpr double lo = 0.1, hi = 3;
};
struct sqrt_case {
  static auto run(const auto& x) { return sim::sqrt(x); }
  static double ref(double v) { return std::sqrt(v); }
  static constexpr double lo = 0.1, hi = 3;
};
struct relu_case {
  static auto run(const auto& x) { return sim::relu(x); }
  static double ref(double v) { return v > 0 ? v : 0; }
  static constexpr double lo = -2, hi = 2;
};
struct gelu_case {  // the erf form: x Φ(x)
  static auto run(const auto& x) { return sim::gelu(x); }
  static double ref(double v) { return v * 0.5 * std::erfc(-v / std::sqrt(2.0)); }
  static constexpr double lo = -3, hi = 3;
};
struct tanh_case {
  static auto run(const auto& x) { return sim::tanh(x); }
  static double ref(double v) { return (std::exp(2 * v) - 1) / (std::exp(2 * v) + 1); }
  static constexpr double lo = -2, hi = 2;
};
struct sigmoid_case {
  static auto run(const auto& x) { return sim::sigmoid(x); }
  static double ref(double v) { return std::exp(v) / (1 + std::exp(v)); }
  static constexpr double lo = -3, hi = 3;
};

template <class Case>
void sweep_all(double tol) {
  // 1-d: every placement, even (8 x 4 over 4) and uneven (5 x 7 over 3: 2, 2, 1 and 3, 3, 1).
  sweep<Case, mesh<4>, float, 8, 4, placements<replicate>, placements<shard<0>>, placements<shard<1>>,
        placements<psum>, placements<pavg>, placements<pmax>, placements<pmin>>(tol, 1);
  sweep<Case, mesh<3>, float, 5, 7, placements<replicate>, placements<shard<0>>, placements<shard<1>>,
        placements<psum>, placements<pavg>, placements<pmax>, placements<pmin>>(tol, 2);
  // 2-d: representative lists (each pair instantiates its redistributions).
  sweep<Case, mesh<2, 3>, float, 5, 6, placements<shard<0>, shard<1>>, placements<shard<1>, shard<1>>,
        placements<psum, shard<0>>, placements<replicate, pmax>, placements<pmin, pmin>>(tol, 3);
}

}  // namespace

TEST_CASE("unary ops over placements, float", "[elementwise]") {
  sweep_all<neg_case>(1e-6);
  sweep_all<abs_case>(1e-6);
  sweep_all<exp_case>(1e-6);
  sweep_all<log_case>(1e-6);
  sweep_all<sqrt_case>(1e-6);
  sweep_all<relu_case>(1e-6);
  sweep_all<gelu_case>(1e-6);
  sweep_all<tanh_case>(1e-6);
  sweep_all<sigmoid_case>(1e-6);
}

// What the compiler chose: a Partial passes where the function allows it, and is reduced
// first where it does not.
namespace {
template <class Case, class P>
using unary_out = placements_of<decltype(Case::run(
    std::declval<const sim::dtensor<float, layout<mesh<4>, P, extents<8, 4>>>&>()))>;
using pmin_t = placements<pmin>;
using pmax_t = placements<pmax>;
static_assert(std::is_same_v<unary_out<relu_case, pmax_t>, pmax_t>, "relu of P(max) stays P(max)");
static_assert(std::is_same_v<unary_out<exp_case, pmin_t>, pmin_t>, "exp of P(min) stays P(min)");
static_assert(std::is_same_v<unary_out<sigmoid_case, pmax_t>, pmax_t>);
static_assert(std::is_same_v<unary_out<log_case, pmin_t>, pmin_t>, "log of P(min) stays P(min)");
static_assert(std::is_same_v<unary_out<sqrt_case, pmin_t>, pmin_t>);
static_assert(std::is_same_v<unary_out<neg_case, pmax_t>, pmin_t>, "neg swaps max and min");
static_assert(std::is_same_v<unary_out<neg_case, placements<psum>>, placements<psum>>, "neg is linear");
static_assert(std::is_same_v<unary_out<neg_case, placements<pavg>>, placements<pavg>>);
// A function that passes no Partial reduces the input first (reduce_scatter to a shard is
// cheaper than all_reduce, so the result is S(0) here, not R): never partial.
template <class Case, class P>
constexpr bool reduced_first = [] {
  for (const auto& p : unary_out<Case, P>::value())
    if (p.is_partial()) return false;
  return true;
}();
static_assert(reduced_first<abs_case, placements<psum>>, "abs of P(sum) is computed from the sum");
static_assert(reduced_first<gelu_case, pmax_t>, "gelu is not monotone");
static_assert(reduced_first<exp_case, placements<psum>>, "exp is not linear");
static_assert(reduced_first<relu_case, placements<psum>>, "relu is not linear");
static_assert(reduced_first<log_case, pmax_t>, "log of P(max): other ranks may hold x < 0");
static_assert(reduced_first<sqrt_case, pmax_t>);
static_assert(std::is_same_v<unary_out<relu_case, placements<shard<1>>>, placements<shard<1>>>);
}  // namespace

TEST_CASE("unary ops on other element types", "[elementwise]") {
  using M = mesh<3>;
  // double: tight.
  sweep<gelu_case, M, double, 5, 7, placements<shard<1>>, placements<pmax>>(1e-12, 4);
  sweep<log_case, M, double, 5, 7, placements<shard<0>>, placements<pmin>>(1e-12, 5);
  // bfloat16: computed in float, rounded once (relative error <= 2^-8).
  sweep<exp_case, M, bfloat16, 5, 7, placements<shard<1>>, placements<pmax>>(1e-2, 6);
  sweep<tanh_case, M, bfloat16, 5, 7, placements<replicate>, placements<psum>>(1e-2, 7);
  // Integers: neg, abs and relu (exact).
  sweep<neg_case, M, std::int32_t, 5, 7, placements<shard<0>>, placements<psum>, placements<pmax>>(0, 8);
  sweep<abs_case, M, std::int64_t, 5, 7, placements<shard<1>>, placements<psum>>(0, 9);
  sweep<relu_case, M, std::int32_t, 5, 7, placements<replicate>, placements<pmin>>(0, 10);
}

TEST_CASE("unary ops on a 0-d and a 3-d dtensor", "[elementwise]") {
  const auto a = op_test::random<float>({2, 3, 4}, 11);
  const auto x = sim::distribute_tensor<layout<mesh<2, 2>, placements<shard<2>, shard<0>>, extents<2, 3, 4>>>(a.data);
  op_test::check_close(sim::sigmoid(x), map(widen(a), sigmoid_case::ref), 1e-6);
  const std::vector<double> one{-1.5};
  const auto s = sim::distribute_tensor<layout<mesh<4>, placements<psum>, extents<>>>(one);
  op_test::check_close(sim::abs(s), host_tensor<double>{{}, {1.5}}, 0);
}
