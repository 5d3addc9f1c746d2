// tests/ops/nn/context_parallel.cpp — attention with the positions split over ranks (context
// parallelism, the all-gather method and the ring): q, k and v Shard(1) on a mesh dim, alone or beside the
// batch (dp) or the heads (tp), causal or not, for lengths that 2·cp divides and lengths it
// does not (down to ranks that hold no position). The output and the gradients of q, k and v
// (through the autograd layer: dq split, dk and dv reduce-scattered) against a reference in
// double (attention_reference.hpp), and in float against one device's float within 1e-5; the
// collectives each direction runs; the layouts. One instantiation per (mesh rank, placements,
// causal, element type): the mesh sizes and the length are run-time values.
#include <cmath>
#include <string>
#include <type_traits>
#include <vector>

#include "../common/op_test.hpp"
#include "attention_reference.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/comm_counter.hpp"

namespace {

using namespace spmd;
using op_test::index_t;
namespace rt = spmd::runtime;

constexpr index_t Bn = 2, W = 8, D = 2;  // 4 heads of 2

// Static layouts: the queries stay split, the keys and values are gathered; dk/dv Partial.
using S1 = layout<mesh<4>, placements<shard<1>>, extents<Bn, 8, W>>;
using F1 = ops::resolved<ops::attention<D, false>, float, void, S1, S1, S1>;
static_assert(!F1::input_moves<0> && F1::input_moves<1> && F1::input_moves<2> &&
              std::is_same_v<F1::out_placements, placements<shard<1>>>);
using KV1 = ops::resolved<ops::attention_backward_kv<D, true>, float, void, S1, S1, S1, S1>;
static_assert(std::is_same_v<KV1::out_placements, placements<partial<reduce_op::sum>>>);
using Q1 = ops::resolved<ops::attention_backward_q<D, true>, float, void, S1, S1, S1, S1>;
static_assert(std::is_same_v<Q1::out_placements, placements<shard<1>>>);
// with tp: heads on dim 0, positions on dim 1
using S2 = layout<mesh<2, 2>, placements<shard<2>, shard<1>>, extents<Bn, 8, W>>;
static_assert(std::is_same_v<ops::resolved<ops::causal_attention<D>, float, void, S2, S2, S2>::out_placements,
                             placements<shard<2>, shard<1>>>);

std::vector<double> values(index_t n, unsigned seed) {
  const auto t = op_test::random<double>({n}, seed);
  return {t.data.begin(), t.data.end()};
}

template <class T>
std::vector<T> as(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

struct result {
  std::vector<double> y, dq, dk, dv;
  long gathers = 0, reduce_scatters = 0, all_reduces = 0, p2p = 0;  // in the backward
  long forward_gathers = 0, forward_p2p = 0, forward_total = 0;
};

using rt::context_method;

/// y = attention(q, k, v) on variables of layout (Mesh, P, (Bn, c, W)) (k and v of ck
/// positions: c when 0), then backward from g.
template <class Mesh, class P, bool Causal, class T, context_method Method = context_method::all_gather>
result run(index_t c, const std::vector<double>& q, const std::vector<double>& k, const std::vector<double>& v,
           const std::vector<double>& g, index_t ck = 0) {
  using E = extents<Bn, dyn, W>;
  using L = layout<Mesh, P, E>;
  const L l{E(c)}, lk{E(ck > 0 ? ck : c)};
  auto qv = sim::requires_grad(sim::distribute_tensor(as<T>(q), l), "q");
  auto kv = sim::requires_grad(sim::distribute_tensor(as<T>(k), lk), "k");
  auto vv = sim::requires_grad(sim::distribute_tensor(as<T>(v), lk), "v");
  result r;
  rt::comm_counter fwd;
  auto y = rt::attention<D, Causal, Method>(qv, kv, vv);
  r.forward_gathers = fwd.count(step_kind::all_gather);
  r.forward_p2p = fwd.count_p2p();
  r.forward_total = fwd.total();
  static_assert(std::is_same_v<typename decltype(y)::layout_type::placements_type, P>,
                "the output is split as q is");
  rt::comm_counter bwd;
  y.backward(sim::distribute_tensor(as<T>(g), l));
  r.gathers = bwd.count(step_kind::all_gather);
  r.reduce_scatters = bwd.count(step_kind::reduce_scatter);
  r.all_reduces = bwd.count(step_kind::all_reduce);
  r.p2p = bwd.count_p2p();
  auto full = [](const auto& x) {
    const auto f = x.full_tensor();
    return std::vector<double>(f.begin(), f.end());
  };
  static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(kv.grad())>::layout_type::placements_type, P>);
  r.y = full(y.value());
  r.dq = full(qv.grad());
  r.dk = full(kv.grad());
  r.dv = full(vv.grad());
  return r;
}

void check_near(const std::vector<double>& got, const std::vector<double>& want, double tol, const char* what) {
  REQUIRE(got.size() == want.size());
  for (std::size_t e = 0; e < got.size(); ++e) {
    INFO(what << " element " << e << ": " << got[e] << " against " << want[e]);
    CHECK(std::fabs(got[e] - want[e]) <= tol * std::max(1.0, std::fabs(want[e])));
  }
}

/// Every length of `lengths` on the bound mesh: double against the reference, float against
/// float on one device (the same inputs replicated: the whole sequence on each rank).
template <class Mesh, class P, bool Causal, context_method Method = context_method::all_gather>
void sweep(const std::vector<index_t>& lengths, index_t position_ranks) {
  using R = boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, Mesh::ndim>>;
  for (index_t c : lengths) {
    INFO("q " << op_test::placements_text<P>() << (Causal ? " causal" : "")
              << (Method == context_method::ring ? " ring" : " all-gather") << ", "
                 << c << " positions over " << position_ranks << " ranks");
    const index_t n = Bn * c * W;
    const auto q = values(n, 11 + unsigned(c)), k = values(n, 12 + unsigned(c)), v = values(n, 13 + unsigned(c)),
               g = values(n, 14 + unsigned(c));
    const auto want = attention_test::attend(q, k, v, g, Bn, c, c, W, D, Causal, 1 / std::sqrt(double(D)));
    const result d = run<Mesh, P, Causal, double, Method>(c, q, k, v, g);
    check_near(d.y, want.y, 1e-12, "y");
    check_near(d.dq, want.dq, 1e-12, "dq");
    check_near(d.dk, want.dk, 1e-12, "dk");
    check_near(d.dv, want.dv, 1e-12, "dv");
    // the all-gather method: K and V gathered once each way (the backward gathers them again
    // rather than keep them), dK and dV reduce-scattered together, nothing all-reduced
    if (position_ranks > 1 && Method == context_method::all_gather) {
      CHECK(d.forward_gathers == 2);
      CHECK(d.gathers == 2);
      CHECK(d.reduce_scatters == 1);
      CHECK(d.all_reduces == 0);
    }
    // the ring: no collective; K/V passed on cp − 1 times forward, and backward K/V cp − 1
    // times and dK/dV cp times (home again)
    if (Method == context_method::ring) {
      CHECK(d.forward_total == d.forward_p2p);
      CHECK(d.forward_p2p == position_ranks - 1);
      CHECK(d.gathers + d.reduce_scatters + d.all_reduces == 0);
      CHECK(d.p2p == (position_ranks > 1 ? 2 * position_ranks - 1 : 0));
    }
    const result f = run<Mesh, P, Causal, float, Method>(c, q, k, v, g);
    const result one = run<Mesh, R, Causal, float>(c, q, k, v, g);
    check_near(f.y, one.y, 1e-5, "float y");
    check_near(f.dq, one.dq, 1e-5, "float dq");
    check_near(f.dk, one.dk, 1e-5, "float dk");
    check_near(f.dv, one.dv, 1e-5, "float dv");
    check_near(f.y, want.y, 2e-5, "float y against double");
  }
}

/// x (Bn, c, W) in natural order to head-tail order over n ranks (stored row s holds position
/// head_tail::position(c, n, s)), or back (Back).
template <bool Back = false>
std::vector<double> head_tail_order(const std::vector<double>& x, index_t c, index_t n) {
  std::vector<double> out(x.size());
  for (index_t b = 0; b < Bn; ++b)
    for (index_t s = 0; s < c; ++s) {
      const index_t p = head_tail::position(c, n, s);
      for (index_t e = 0; e < W; ++e) {
        const auto stored = static_cast<std::size_t>((b * c + s) * W + e), natural = static_cast<std::size_t>((b * c + p) * W + e);
        (Back ? out[natural] : out[stored]) = Back ? x[stored] : x[natural];
      }
    }
  return out;
}

/// The ring over a sequence in head-tail order: the inputs reordered, the outputs and
/// gradients ordered back, against the reference (double) and one device (float).
template <class Mesh, class P, bool Causal>
void sweep_head_tail(const std::vector<index_t>& lengths, index_t cp) {
  using R = boost::mp11::mp_apply<placements, boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, Mesh::ndim>>;
  constexpr auto ht = context_method::ring_head_tail;
  for (index_t c : lengths) {
    INFO("q " << op_test::placements_text<P>() << (Causal ? " causal" : "") << " ring, head-tail, " << c
              << " positions over " << cp << " ranks");
    const index_t n = Bn * c * W;
    const auto q = values(n, 21 + unsigned(c)), k = values(n, 22 + unsigned(c)), v = values(n, 23 + unsigned(c)),
               g = values(n, 24 + unsigned(c));
    const auto want = attention_test::attend(q, k, v, g, Bn, c, c, W, D, Causal, 1 / std::sqrt(double(D)));
    auto order = [&](const std::vector<double>& x) { return head_tail_order(x, c, cp); };
    auto back = [&](const std::vector<double>& x) { return head_tail_order<true>(x, c, cp); };
    const result d = run<Mesh, P, Causal, double, ht>(c, order(q), order(k), order(v), order(g));
    check_near(back(d.y), want.y, 1e-12, "y");
    check_near(back(d.dq), want.dq, 1e-12, "dq");
    check_near(back(d.dk), want.dk, 1e-12, "dk");
    check_near(back(d.dv), want.dv, 1e-12, "dv");
    CHECK(d.forward_p2p == cp - 1);
    const result f = run<Mesh, P, Causal, float, ht>(c, order(q), order(k), order(v), order(g));
    const result one = run<Mesh, R, Causal, float>(c, q, k, v, g);
    check_near(back(f.y), one.y, 1e-5, "float y");
    check_near(back(f.dq), one.dq, 1e-5, "float dq");
    check_near(back(f.dk), one.dk, 1e-5, "float dk");
    check_near(back(f.dv), one.dv, 1e-5, "float dv");
  }
}

template <bool Causal, context_method Method = context_method::all_gather>
void all_meshes() {
  using M1 = mesh<dyn>;
  // cp = 2: 8 (2·cp divides it), 6 (cp does, 2·cp not), 5 (neither), 301 (the kernels' tiles
  // of 128 query rows: 2 on each rank, 3 on one device); cp = 3: 7; cp = 4: 8, 7, and 3 (a rank
  // holds no position); cp = 8: 16, 11
  for (const auto& [cp, lengths] : std::vector<std::pair<index_t, std::vector<index_t>>>{
           {2, {8, 6, 5, 301}}, {3, {7}}, {4, {8, 7, 3}}, {8, {16, 11}}}) {
    bind_mesh<M1>(dims<1>{cp});
    sweep<M1, placements<shard<1>>, Causal, Method>(lengths, cp);
  }
  using M2 = mesh<dyn, dyn>;
  bind_mesh<M2>(dims<2>{2, 2});
  sweep<M2, placements<shard<0>, shard<1>>, Causal, Method>({8, 5}, 2);  // dp x cp
  sweep<M2, placements<shard<2>, shard<1>>, Causal, Method>({8, 5}, 2);  // tp x cp
  // the positions over both dims (the ring goes around one mesh dim: it refuses to compile
  // this, tests/compile_fail/ring_two_dims.cpp)
  if constexpr (Method == context_method::all_gather) sweep<M2, placements<shard<1>, shard<1>>, Causal>({8, 7}, 4);
  bind_mesh<M1>(dims<1>{1});
  sweep<M1, placements<shard<1>>, Causal, Method>({5}, 1);  // one rank: nothing passed
}

}  // namespace

TEST_CASE("causal attention with the positions split: output and gradients as one device's", "[nn][attention][cp]") {
  all_meshes<true>();
}

TEST_CASE("attention without a mask, the positions split: output and gradients as one device's", "[nn][attention][cp]") {
  all_meshes<false>();
}

TEST_CASE("the ring, causal: output and gradients as one device's", "[nn][attention][cp][ring]") {
  all_meshes<true, context_method::ring>();
}

TEST_CASE("the ring without a mask: output and gradients as one device's", "[nn][attention][cp][ring]") {
  all_meshes<false, context_method::ring>();
}

TEST_CASE("the ring over a sequence in head-tail order: output and gradients as one device's",
          "[nn][attention][cp][ring]") {
  static_assert(head_tail::chunks(4, 1).head == 1 && head_tail::chunks(4, 1).tail == 6);
  static_assert(head_tail::position(16, 4, 2) == 14 && head_tail::position(16, 4, 4) == 2);
  static_assert(head_tail::splits(16, 4) && !head_tail::splits(12, 4));
  for (index_t s = 0; s < 24; ++s) CHECK(head_tail::stored_row(24, 3, head_tail::position(24, 3, s)) == s);
  using M1 = mesh<dyn>;
  // cp = 2: 8, 12 and 516 (chunks of 129 rows: a tile of 128 and one more); cp = 3: 6, 12;
  // cp = 4: 8, 16; cp = 8: 16
  for (const auto& [cp, lengths] : std::vector<std::pair<index_t, std::vector<index_t>>>{
           {2, {8, 12, 516}}, {3, {6, 12}}, {4, {8, 16}}, {8, {16}}}) {
    bind_mesh<M1>(dims<1>{cp});
    sweep_head_tail<M1, placements<shard<1>>, true>(lengths, cp);
    sweep_head_tail<M1, placements<shard<1>>, false>({lengths[0]}, cp);
  }
  using M2 = mesh<dyn, dyn>;
  bind_mesh<M2>(dims<2>{2, 2});
  sweep_head_tail<M2, placements<shard<0>, shard<1>>, true>({8, 12}, 2);  // dp x cp
  sweep_head_tail<M2, placements<shard<2>, shard<1>>, true>({8}, 2);      // tp x cp
  // a length 2·cp does not divide: refused, naming the numbers
  bind_mesh<M1>(dims<1>{4});
  const std::vector<double> x(Bn * 12 * W, 0.5);
  REQUIRE_THROWS_WITH((run<M1, placements<shard<1>>, true, double, context_method::ring_head_tail>(12, x, x, x, x)),
                      Catch::Contains("2·cp = 8 equal chunks; 12 positions are not a multiple of 8"));
}

TEST_CASE("attention without a mask over keys of another length, through the autograd layer",
          "[nn][attention][cp]") {
  // q 5 positions, k and v 7, all Shard(1) on cp ranks (and one rank): dq, dk and dv against
  // the reference, by both methods
  using M1 = mesh<dyn>;
  const index_t cq = 5, ck = 7;
  const auto q = values(Bn * cq * W, 51), k = values(Bn * ck * W, 52), v = values(Bn * ck * W, 53),
             g = values(Bn * cq * W, 54);
  const auto want = attention_test::attend(q, k, v, g, Bn, cq, ck, W, D, false, 1 / std::sqrt(double(D)));
  for (index_t cp : {1, 2, 3}) {
    INFO(cp << " ranks");
    bind_mesh<M1>(dims<1>{cp});
    const result a = run<M1, placements<shard<1>>, false, double>(cq, q, k, v, g, ck);
    const result r = run<M1, placements<shard<1>>, false, double, context_method::ring>(cq, q, k, v, g, ck);
    for (const result* x : {&a, &r}) {
      check_near(x->y, want.y, 1e-12, "y");
      check_near(x->dq, want.dq, 1e-12, "dq");
      check_near(x->dk, want.dk, 1e-12, "dk");
      check_near(x->dv, want.dv, 1e-12, "dv");
    }
  }
  // static lengths: the fused backward (one length) is not compiled beside the split one
  using LQ = layout<mesh<2>, placements<shard<1>>, extents<Bn, 5, W>>;
  using LK = layout<mesh<2>, placements<shard<1>>, extents<Bn, 7, W>>;
  auto qs = sim::requires_grad(sim::distribute_tensor<LQ>(q), "q");
  auto ks = sim::requires_grad(sim::distribute_tensor<LK>(k), "k");
  auto vs = sim::requires_grad(sim::distribute_tensor<LK>(v), "v");
  rt::attention<D>(qs, ks, vs).backward(sim::distribute_tensor<LQ>(g));
  const auto dk = ks.grad().full_tensor();
  check_near(std::vector<double>(dk.begin(), dk.end()), want.dk, 1e-12, "static dk");
}

TEST_CASE("attention without a mask over keys of another length, both split; causal refuses two lengths",
          "[nn][attention][cp]") {
  // q (2, 5, 8) and k, v (2, 7, 8), all Shard(1) on 2 ranks: the queries stay split, the keys
  // are gathered; the operator's output against the reference.
  using M = mesh<2>;
  using LQ = layout<M, placements<shard<1>>, extents<Bn, 5, W>>;
  using LK = layout<M, placements<shard<1>>, extents<Bn, 7, W>>;
  const auto q = values(Bn * 5 * W, 41), k = values(Bn * 7 * W, 42), v = values(Bn * 7 * W, 43), g = values(Bn * 5 * W, 44);
  const double scale = 1 / std::sqrt(double(D));
  const auto want = attention_test::attend(q, k, v, g, Bn, 5, 7, W, D, false, scale);
  const auto y = rt::attention<D>(sim::distribute_tensor<LQ>(q), sim::distribute_tensor<LK>(k),
                                  sim::distribute_tensor<LK>(v), scale);
  static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(y)>::layout_type::placements_type, placements<shard<1>>>);
  const auto f = y.full_tensor();
  check_near(std::vector<double>(f.begin(), f.end()), want.y, 1e-12, "y");
  // causal: the mask is one device's square one, so the lengths must agree (run-time extents)
  using E = extents<Bn, dyn, W>;
  using LD = layout<M, placements<replicate>, E>;
  const auto a = sim::distribute_tensor(std::vector<double>(Bn * 5 * W, 0.5), LD{E(5)});
  const auto b = sim::distribute_tensor(std::vector<double>(Bn * 7 * W, 0.5), LD{E(7)});
  REQUIRE_THROWS_WITH(rt::causal_attention<D>(a, b, b, 1.0), Catch::Contains("must be of one shape"));
  CHECK(rt::attention<D>(a, b, b, 1.0).full_tensor().size() == static_cast<std::size_t>(Bn * 5 * W));
}
