// tests/ops/nn/layer_norm.cpp — layer_norm (with and without weight and bias) on dtensors over
// every layout of x drawn from {R, S(d), P(sum)} on 1-d (even, uneven) and 2-d meshes, against
// one device; the compiler's choices; run-time misuse.
#include <stdexcept>
#include <type_traits>

#include "../common/op_test.hpp"
#include "reference.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/nn.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace {

using namespace spmd;
using op_test::host_tensor;
using op_test::index_t;

// (B, S, H) normalised over H: x S(2) must be redistributed (H is needed whole), and the
// result is not sharded on H. x S(0) stays S(0), the weight and bias replicated.
using M4 = mesh<4>;
using LW = layout<M4, placements<replicate>, extents<8>>;
using RH = ops::resolved<ops::layer_norm<1, true>, float, void,
                         layout<M4, placements<shard<2>>, extents<4, 6, 8>>, LW, LW>;
static_assert(RH::input_moves<0>);
static_assert(!std::is_same_v<RH::out_placements, placements<shard<2>>>);
using RB = ops::resolved<ops::layer_norm<1, true>, float, void,
                         layout<M4, placements<shard<0>>, extents<4, 6, 8>>, LW, LW>;
static_assert(std::is_same_v<RB::out_placements, placements<shard<0>>>);
static_assert(!RB::input_moves<0> && !RB::input_moves<1> && !RB::input_moves<2>);
// Normalising (S, H): S(1) moves too; no Partial passes.
using RS = ops::resolved<ops::layer_norm<2, false>, float, void,
                         layout<M4, placements<shard<1>>, extents<4, 6, 8>>>;
static_assert(RS::input_moves<0>);
using RP = ops::resolved<ops::layer_norm<1, false>, float, void,
                         layout<M4, placements<partial<reduce_op::sum>>, extents<4, 6, 8>>>;
static_assert(RP::input_moves<0> && !RP::compute_placements::value()[0].is_partial());

constexpr double eps = 1e-5;

// x over every layout; weight and bias R or S(0) (a sharded weight is gathered first).
template <class Mesh, class PW, index_t B, index_t S, index_t H>
void sweep(unsigned seed) {
  const auto a = op_test::random<float>({B, S, H}, seed);
  const auto w1 = op_test::random<float>({H}, seed + 1, 0.5, 1.5), b1 = op_test::random<float>({H}, seed + 2);
  const auto w2 = op_test::random<float>({S, H}, seed + 3, 0.5, 1.5), b2 = op_test::random<float>({S, H}, seed + 4);
  const auto wa = nn_ref::widen(a), ww1 = nn_ref::widen(w1), wb1 = nn_ref::widen(b1),
             ww2 = nn_ref::widen(w2), wb2 = nn_ref::widen(b2);
  const auto want1 = nn_ref::layer_norm(wa, 1, &ww1, &wb1, eps);
  const auto want2 = nn_ref::layer_norm(wa, 2, &ww2, &wb2, eps);
  const auto want_plain = nn_ref::layer_norm(wa, 2, nullptr, nullptr, eps);
  using LW1 = layout<Mesh, PW, extents<H>>;
  using LW2 = layout<Mesh, PW, extents<S, H>>;
  const auto dw1 = sim::distribute_tensor<LW1>(w1.data), db1 = sim::distribute_tensor<LW1>(b1.data);
  const auto dw2 = sim::distribute_tensor<LW2>(w2.data), db2 = sim::distribute_tensor<LW2>(b2.data);
  op_test::for_each_placements<Mesh, 3>([&]<class P>() {
    INFO("mesh " << Mesh::size << " x " << op_test::placements_text<P>() << " weight "
                 << op_test::placements_text<PW>());
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<B, S, H>>>(a.data);
    op_test::check_close(sim::layer_norm<1>(x, dw1, db1, eps), want1, 1e-5);
    op_test::check_close(sim::layer_norm<2>(x, dw2, db2, eps), want2, 1e-5);
    op_test::check_close(sim::layer_norm<2>(x, eps), want_plain, 1e-5);
  });
}

}  // namespace

TEST_CASE("layer_norm over every layout, 1-d mesh", "[nn][layer_norm]") {
  sweep<mesh<4>, placements<replicate>, 4, 6, 8>(41);  // even
  sweep<mesh<3>, placements<shard<0>>, 5, 4, 7>(42);   // uneven, weight gathered first
}

TEST_CASE("layer_norm over every layout, 2-d mesh", "[nn][layer_norm]") {
  sweep<mesh<2, 2>, placements<replicate, replicate>, 3, 5, 4>(43);
}

TEST_CASE("layer_norm of S(0) runs where x is; of S(2) after a redistribution", "[nn][layer_norm]") {
  const auto a = op_test::random<double>({4, 6, 8}, 44);
  const auto w = op_test::random<double>({8}, 45), b = op_test::random<double>({8}, 46);
  const auto dw = sim::distribute_tensor<LW>(w.data), db = sim::distribute_tensor<LW>(b.data);
  const auto want = nn_ref::layer_norm(a, 1, &w, &b, 1e-3);
  const auto y0 = sim::layer_norm<1>(sim::distribute_tensor<layout<M4, placements<shard<0>>, extents<4, 6, 8>>>(a.data), dw, db, 1e-3);
  static_assert(std::is_same_v<decltype(y0)::placements_type, placements<shard<0>>>);
  op_test::check_close(y0, want, 1e-12);
  const auto y2 = sim::layer_norm<1>(sim::distribute_tensor<layout<M4, placements<shard<2>>, extents<4, 6, 8>>>(a.data), dw, db, 1e-3);
  static_assert(!std::is_same_v<decltype(y2)::placements_type, placements<shard<2>>>);
  op_test::check_close(y2, want, 1e-12);
  // Forced output back on H.
  op_test::check_close(sim::layer_norm<1, placements<shard<2>>>(
                           sim::distribute_tensor<layout<M4, placements<shard<2>>, extents<4, 6, 8>>>(a.data), dw, db, 1e-3),
                       want, 1e-12);
}

TEST_CASE("layer_norm misuse at run time throws naming the values", "[nn][layer_norm]") {
  using LX = layout<mesh<2>, placements<shard<0>>, extents<dyn, 4>>;
  using LV = layout<mesh<2>, placements<replicate>, extents<dyn>>;
  const auto x = sim::distribute_tensor(std::vector<float>(12, 1.f), LX(extents<dyn, 4>(3)));
  const auto w5 = sim::distribute_tensor(std::vector<float>(5, 1.f), LV(extents<dyn>(5)));
  const auto w4 = sim::distribute_tensor(std::vector<float>(4, 1.f), LV(extents<dyn>(4)));
  REQUIRE_THROWS_WITH(sim::layer_norm<1>(x, w5, w4),
                      "spmd::layer_norm: the weight has shape [5], not the normalised shape [4] of x [3, 4]");
  REQUIRE_THROWS_WITH(sim::layer_norm<1>(x, w4, w5),
                      "spmd::layer_norm: the bias has shape [5], not the normalised shape [4] of x [3, 4]");
  REQUIRE_THROWS_WITH(sim::layer_norm<1>(x, -1.0), Catch::Contains("eps is -1.0"));
  // A constant row normalises to 0 (var 0: eps keeps it finite); then * 1 + 1.
  op_test::check_close(sim::layer_norm<1>(x), host_tensor<double>::zeros({3, 4}), 0);
  op_test::check_close(sim::layer_norm<1>(x, w4, w4), host_tensor<double>::ones({3, 4}), 0);
}

namespace {

// layer_norm's input gradient as one op: float rows along a contiguous last dim take the
// vector kernel (host/vector_math.hpp), every other case the double path; both against the
// reference's formula, over every layout of g and x.
template <class Mesh, index_t B, index_t S, index_t H>
void backward_sweep(unsigned seed) {
  const auto a = op_test::random<float>({B, S, H}, seed), g = op_test::random<float>({B, S, H}, seed + 7);
  const auto w1 = op_test::random<float>({H}, seed + 1, 0.5, 1.5);
  const auto w2 = op_test::random<float>({S, H}, seed + 3, 0.5, 1.5);
  const auto wa = nn_ref::widen(a), wg = nn_ref::widen(g), ww1 = nn_ref::widen(w1), ww2 = nn_ref::widen(w2);
  const auto want1 = nn_ref::layer_norm_backward(wg, wa, 1, &ww1, eps);
  const auto want2 = nn_ref::layer_norm_backward(wg, wa, 2, &ww2, eps);
  const auto want_plain = nn_ref::layer_norm_backward(wg, wa, 1, nullptr, eps);
  const auto dw1 = sim::distribute_tensor<layout<Mesh, placements<replicate>, extents<H>>>(w1.data);
  const auto dw2 = sim::distribute_tensor<layout<Mesh, placements<replicate>, extents<S, H>>>(w2.data);
  const auto gx = sim::distribute_tensor<layout<Mesh, placements<replicate>, extents<B, S, H>>>(g.data);
  op_test::for_each_placements<Mesh, 3>([&]<class P>() {
    INFO("mesh " << Mesh::size << " x " << op_test::placements_text<P>());
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<B, S, H>>>(a.data);
    op_test::check_close(sim::layer_norm_backward<1>(gx, x, dw1, eps), want1, 2e-5);
    op_test::check_close(sim::layer_norm_backward<2>(gx, x, dw2, eps), want2, 2e-5);
    op_test::check_close(sim::layer_norm_backward<1>(gx, x, eps), want_plain, 2e-5);
    // g in P's layout too (P(sum): the gradient passes through, linear in g)
    const auto gp = sim::distribute_tensor<layout<Mesh, P, extents<B, S, H>>>(g.data);
    op_test::check_close(sim::layer_norm_backward<1>(gp, x, dw1, eps), want1, 2e-5);
  });
}

}  // namespace

TEST_CASE("layer_norm_backward over every layout, against the formula", "[nn][layer_norm]") {
  backward_sweep<mesh<4>, 4, 6, 40>(51);  // rows of 40: two blocks of 16 and a tail
  backward_sweep<mesh<3>, 5, 4, 7>(52);   // uneven, rows shorter than a block
}

TEST_CASE("layer_norm_backward: g P(sum) passes; double and strided rows take the double path", "[nn][layer_norm]") {
  using RP = ops::resolved<ops::layer_norm_backward<1, true>, float, void,
                           layout<M4, placements<partial<reduce_op::sum>>, extents<4, 6, 8>>,
                           layout<M4, placements<replicate>, extents<4, 6, 8>>, LW>;
  static_assert(!RP::input_moves<0> && RP::compute_placements::value()[0].is_partial());
  const auto a = op_test::random<double>({4, 6, 8}, 53), g = op_test::random<double>({4, 6, 8}, 54);
  const auto w = op_test::random<double>({8}, 55, 0.5, 1.5);
  const auto want = nn_ref::layer_norm_backward(g, a, 1, &w, 1e-3);
  using L = layout<M4, placements<shard<0>>, extents<4, 6, 8>>;
  const auto dw = sim::distribute_tensor<LW>(w.data);
  op_test::check_close(sim::layer_norm_backward<1>(sim::distribute_tensor<L>(g.data), sim::distribute_tensor<L>(a.data),
                                                   sim::distribute_tensor<layout<M4, placements<replicate>, extents<8>>>(w.data),
                                                   1e-3),
                       want, 1e-12);
  // float through a transposed view: x (4, 8, 6) permuted to (4, 6, 8), its last dim strided
  const auto af = op_test::random<float>({4, 8, 6}, 56), gf = op_test::random<float>({4, 6, 8}, 57);
  const auto xt = sim::permute<0, 2, 1>(sim::distribute_tensor<layout<M4, placements<shard<0>>, extents<4, 8, 6>>>(af.data));
  auto wt = nn_ref::widen(af);  // the permuted values, for the reference
  host_tensor<double> at = host_tensor<double>::zeros({4, 6, 8});
  for (index_t i = 0; i < 4; ++i)
    for (index_t j = 0; j < 6; ++j)
      for (index_t k = 0; k < 8; ++k)
        at.data[static_cast<std::size_t>((i * 6 + j) * 8 + k)] = wt.data[static_cast<std::size_t>((i * 8 + k) * 6 + j)];
  const auto wf = op_test::random<float>({8}, 58, 0.5, 1.5);
  const auto wwf = nn_ref::widen(wf);
  op_test::check_close(sim::layer_norm_backward<1>(sim::distribute_tensor<L>(gf.data), xt,
                                                   sim::distribute_tensor<LW>(wf.data), eps),
                       nn_ref::layer_norm_backward(nn_ref::widen(gf), at, 1, &wwf, eps), 2e-5);
  (void)dw;
}
