// tests/ops/nn/attention.cpp — causal_attention as one operator (runtime/ops/attention.hpp)
// and its backward, over every layout of q drawn from {R, S(d), P(sum)} on 1-d and 2-d meshes,
// against a reference written out per head in double (attention_reference.hpp); the rule's
// choices (the width sharded by whole heads stays so; split positions keep the queries split);
// float against double; run-time misuse. Split positions in full: context_parallel.cpp.
#include <cmath>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "../common/op_test.hpp"
#include "attention_reference.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/attention.hpp"

namespace {

using namespace spmd;
using op_test::host_tensor;
using op_test::index_t;
namespace rt = spmd::runtime;

// (batch 3, positions 5, 4 heads of 2): the width sharded on 2 ranks keeps whole heads.
constexpr index_t Bn = 3, C = 5, W = 8, D = 2;
using M2 = mesh<2>;
using QW = layout<M2, placements<shard<2>>, extents<Bn, C, W>>;
using RW = ops::resolved<ops::causal_attention<D>, float, void, QW, QW, QW>;
static_assert(std::is_same_v<RW::out_placements, placements<shard<2>>> && !RW::input_moves<0>);
// positions (context parallelism): the queries stay split, the keys and values are gathered
using QC = layout<M2, placements<shard<1>>, extents<Bn, C, W>>;
using RC = ops::resolved<ops::causal_attention<D>, float, void, QC, QC, QC>;
static_assert(!RC::input_moves<0> && RC::input_moves<1> && RC::input_moves<2> &&
              std::is_same_v<RC::out_placements, placements<shard<1>>>);
// 2 heads of 2 on a 2 x 2 mesh with the width split over both dims: a column each, so the
// width is gathered (on one dim) rather than a head split
using Q22 = layout<mesh<2, 2>, placements<shard<2>, shard<2>>, extents<Bn, C, 4>>;
using R22 = ops::resolved<ops::causal_attention<D>, float, void, Q22, Q22, Q22>;
static_assert(R22::input_moves<0> && !std::is_same_v<R22::out_placements, placements<shard<2>, shard<2>>>);
using QP = layout<M2, placements<partial<reduce_op::sum>>, extents<Bn, C, W>>;  // no Partial passes
static_assert(ops::resolved<ops::causal_attention<D>, float, void, QP, QW, QW>::input_moves<0>);

/// Per (batch, head): softmax(scale q kᵀ + causal) v, and the gradients of sum(y * g).
struct reference {
  host_tensor<double> y, dq, dk, dv;
};
reference attend(const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
                 const std::vector<double>& g, double scale) {
  const auto r = attention_test::attend(q, k, v, g, Bn, C, C, W, D, true, scale);
  auto t = [](const std::vector<double>& x) {
    host_tensor<double> h = host_tensor<double>::zeros({Bn, C, W});
    h.data = x;
    return h;
  };
  return {t(r.y), t(r.dq), t(r.dk), t(r.dv)};
}

/// The stacked backward's part i (dq, dk, dv) as a (Bn, C, W) host tensor.
template <class D3>
host_tensor<double> part(const D3& d, int i) {
  const auto all = d.full_tensor();
  host_tensor<double> t = host_tensor<double>::zeros({Bn, C, W});
  for (std::size_t e = 0; e < t.data.size(); ++e) t.data[e] = static_cast<double>(all[i * t.data.size() + e]);
  return t;
}

template <class T, class Mesh>
void sweep(unsigned seed, double tol) {
  const auto q = op_test::random<T>({Bn, C, W}, seed), k = op_test::random<T>({Bn, C, W}, seed + 1),
             v = op_test::random<T>({Bn, C, W}, seed + 2), g = op_test::random<T>({Bn, C, W}, seed + 3);
  const double scale = 1 / std::sqrt(double(D));
  const auto want = attend({q.data.begin(), q.data.end()}, {k.data.begin(), k.data.end()},
                           {v.data.begin(), v.data.end()}, {g.data.begin(), g.data.end()}, scale);
  using R = layout<Mesh, boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, Mesh::ndim>>,
                   extents<Bn, C, W>>;
  const auto kr = sim::distribute_tensor<R>(k.data), vr = sim::distribute_tensor<R>(v.data);
  op_test::for_each_placements<Mesh, 3>([&]<class P>() {
    INFO("mesh " << Mesh::size << " q " << op_test::placements_text<P>());
    using L = layout<Mesh, P, extents<Bn, C, W>>;
    const auto qd = sim::distribute_tensor<L>(q.data), gd = sim::distribute_tensor<L>(g.data);
    op_test::check_close(rt::causal_attention<D>(qd, kr, vr, scale), want.y, tol);
    op_test::check_close(rt::causal_attention<D>(sim::distribute_tensor<L>(v.data), sim::distribute_tensor<L>(k.data),
                                                 sim::distribute_tensor<L>(q.data), scale),
                         attend({v.data.begin(), v.data.end()}, {k.data.begin(), k.data.end()},
                                {q.data.begin(), q.data.end()}, {g.data.begin(), g.data.end()}, scale).y,
                         tol);
    const auto d = rt::causal_attention_backward<D>(gd, qd, kr, vr, scale);
    static_assert(std::remove_cvref_t<decltype(d)>::layout_type::rank == 4);
    const host_tensor<double> dq = part(d, 0), dk = part(d, 1), dv = part(d, 2);
    for (std::size_t e = 0; e < dq.data.size(); ++e) {
      CHECK(std::fabs(dq.data[e] - want.dq.data[e]) <= tol * (1 + std::fabs(want.dq.data[e])));
      CHECK(std::fabs(dk.data[e] - want.dk.data[e]) <= tol * (1 + std::fabs(want.dk.data[e])));
      CHECK(std::fabs(dv.data[e] - want.dv.data[e]) <= tol * (1 + std::fabs(want.dv.data[e])));
    }
  });
}

}  // namespace

TEST_CASE("causal_attention and its backward over every layout, against the reference", "[nn][attention]") {
  sweep<double, mesh<2>>(61, 1e-12);
  sweep<float, mesh<2>>(62, 2e-5);  // float: the vector rows
  sweep<double, mesh<2, 2>>(63, 1e-12);
}

TEST_CASE("causal_attention: a width not of whole heads per rank is gathered; a bad width is refused, naming it",
          "[nn][attention]") {
  // 3 heads of 2 on 2 ranks: the width is gathered rather than a head split; the values are
  // those of the replicated inputs
  using L = layout<mesh<2>, placements<shard<2>>, extents<2, 3, 6>>;
  using LR = layout<mesh<2>, placements<replicate>, extents<2, 3, 6>>;
  static_assert(ops::resolved<ops::causal_attention<2>, float, void, L, L, L>::input_moves<0>);
  std::vector<float> v(36);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(0.7 * static_cast<double>(i)));
  const auto x = sim::distribute_tensor<L>(v);
  const auto xr = sim::distribute_tensor<LR>(v);
  CHECK(rt::causal_attention<2>(x, x, x, 1.0).full_tensor() == rt::causal_attention<2>(xr, xr, xr, 1.0).full_tensor());
  // a dynamic width that is not a multiple of the head dim
  using LD = layout<mesh<2>, placements<replicate>, extents<2, 3, dyn>>;
  const auto y = sim::distribute_tensor(std::vector<float>(30, 0.5f), LD(extents<2, 3, dyn>(5)));
  REQUIRE_THROWS_WITH(rt::causal_attention<2>(y, y, y, 1.0), Catch::Contains("the width 5 is not a multiple of the head dim 2"));
}
