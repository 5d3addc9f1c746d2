// tests/ops/reduction: sum, mean, max, min, prod over compile-time dims (one dim, a negative
// dim with keepdim, every dim: a 0-d result) on dtensors over placements drawn from
// {R, S(0), S(1), Partial} on 1-d meshes (even and uneven) and a 2-d mesh, against one device
// in double; the compiler's choices (a sharded reduced dim gives a Partial; an uneven mean
// does not); other element types and dynamic extents.
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "../common/op_test.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/reduction.hpp"

namespace {

using namespace spmd;
using op_test::host_tensor;
using op_test::index_t;
using ops::reduce_kind;
using psum = partial<reduce_op::sum>;
using pavg = partial<reduce_op::avg>;
using pmax = partial<reduce_op::max>;
using pmin = partial<reduce_op::min>;
using pprod = partial<reduce_op::product>;

template <class T>
host_tensor<double> widen(const host_tensor<T>& t) {
  host_tensor<double> w{t.shape, {}};
  for (const T& v : t.data) w.data.push_back(static_cast<double>(v));
  return w;
}

/// The reduction on one device: every element combined into its output element (reduced
/// dims dropped, or kept as 1), in double.
host_tensor<double> reference(const host_tensor<double>& a, std::vector<int> dims, bool keep, reduce_kind k) {
  const int r = static_cast<int>(a.shape.size());
  std::vector<bool> red(static_cast<std::size_t>(r), dims.empty());
  for (int d : dims) red[static_cast<std::size_t>(d < 0 ? d + r : d)] = true;
  std::vector<index_t> shape;
  index_t count = 1;
  for (int d = 0; d < r; ++d) {
    const auto e = a.shape[static_cast<std::size_t>(d)];
    if (!red[static_cast<std::size_t>(d)]) shape.push_back(e);
    else if (keep) shape.push_back(1);
    if (red[static_cast<std::size_t>(d)]) count *= e;
  }
  const double init = k == reduce_kind::prod ? 1
                      : k == reduce_kind::max ? -std::numeric_limits<double>::infinity()
                      : k == reduce_kind::min ? std::numeric_limits<double>::infinity()
                                              : 0;
  auto y = host_tensor<double>::full(shape, init);
  for (std::size_t i = 0; i < a.data.size(); ++i) {
    // The input's index, then the output's flat index from its kept dims.
    index_t rest = static_cast<index_t>(i), flat = 0, scale = 1;
    for (int d = r - 1; d >= 0; --d) {
      const auto e = a.shape[static_cast<std::size_t>(d)];
      const index_t c = rest % e;
      rest /= e;
      if (!red[static_cast<std::size_t>(d)]) {
        flat += c * scale;
        scale *= e;
      }
    }
    double& o = y.data[static_cast<std::size_t>(flat)];
    const double v = a.data[i];
    switch (k) {
      case reduce_kind::sum:
      case reduce_kind::mean: o += v; break;
      case reduce_kind::prod: o *= v; break;
      case reduce_kind::max: o = std::max(o, v); break;
      case reduce_kind::min: o = std::min(o, v); break;
    }
  }
  if (k == reduce_kind::mean)
    for (double& o : y.data) o /= static_cast<double>(count);
  return y;
}

template <class... P, class F>
void each(F&& f) {
  (f.template operator()<P>(), ...);
}

/// The Partial a reduction passes through, and one it does not (reduced first).
template <reduce_kind K>
using own_partial = std::conditional_t<
    K == reduce_kind::max, pmax,
    std::conditional_t<K == reduce_kind::min, pmin, std::conditional_t<K == reduce_kind::prod, pprod, psum>>>;
template <reduce_kind K>
using other_partial = std::conditional_t<K == reduce_kind::max || K == reduce_kind::min, psum, pmax>;

/// Kind K on (M, N) over dims <1>, <-2> keepdim and <> (all), for each placement list.
template <reduce_kind K, class Mesh, class T, index_t M, index_t N, class... P>
void sweep(const host_tensor<T>& a, double tol) {
  const auto w = widen(a);
  const auto want1 = reference(w, {1}, false, K), want0k = reference(w, {-2}, true, K),
             want_all = reference(w, {}, false, K);
  each<P...>([&]<class PX>() {
    INFO(ops::reduce_kind_name(K) << " mesh " << Mesh::size << " x " << op_test::placements_text<PX>());
    const auto x = sim::distribute_tensor<layout<Mesh, PX, extents<M, N>>>(a.data);
    op_test::check_close(sim::reduce<K, sim::over<1>>(x), want1, tol);
    op_test::check_close(sim::reduce<K, sim::over<-2>, true>(x), want0k, tol);
    op_test::check_close(sim::reduce<K, sim::over<>>(x), want_all, tol);
  });
}

template <reduce_kind K>
void sweep_kind() {
  // prod stays well scaled with factors near 1.
  const double lo = K == reduce_kind::prod ? 0.6 : -2, hi = K == reduce_kind::prod ? 1.4 : 2;
  const auto a = op_test::random<float>({8, 4}, 1, lo, hi);
  sweep<K, mesh<4>, float, 8, 4, placements<replicate>, placements<shard<0>>, placements<shard<1>>,
        placements<own_partial<K>>, placements<other_partial<K>>>(a, 1e-5);
  // mesh<3>: dim 0 (6) splits evenly, dim 1 (7) does not (3, 3, 1).
  const auto b = op_test::random<float>({6, 7}, 2, lo, hi);
  sweep<K, mesh<3>, float, 6, 7, placements<replicate>, placements<shard<0>>, placements<shard<1>>,
        placements<own_partial<K>>, placements<other_partial<K>>>(b, 1e-5);
  const auto c = op_test::random<float>({4, 6}, 3, lo, hi);
  sweep<K, mesh<2, 3>, float, 4, 6, placements<shard<0>, shard<1>>, placements<shard<1>, shard<1>>,
        placements<own_partial<K>, shard<0>>>(c, 1e-5);
}

}  // namespace

TEST_CASE("sum over placements", "[reduction]") { sweep_kind<reduce_kind::sum>(); }
TEST_CASE("mean over placements", "[reduction]") { sweep_kind<reduce_kind::mean>(); }
TEST_CASE("max over placements", "[reduction]") { sweep_kind<reduce_kind::max>(); }
TEST_CASE("min over placements", "[reduction]") { sweep_kind<reduce_kind::min>(); }
TEST_CASE("prod over placements", "[reduction]") { sweep_kind<reduce_kind::prod>(); }

TEST_CASE("3-d, several dims, P(avg) inputs, the named functions", "[reduction]") {
  using M = mesh<2, 2>;
  const auto a = op_test::random<double>({4, 3, 6}, 4);
  const auto w = widen(a);
  each<placements<shard<0>, shard<2>>, placements<shard<2>, shard<1>>, placements<pavg, shard<0>>,
       placements<replicate, psum>>([&]<class P>() {
    INFO("x " << op_test::placements_text<P>());
    const auto x = sim::distribute_tensor<layout<M, P, extents<4, 3, 6>>>(a.data);
    op_test::check_close(sim::sum<0, 2>(x), reference(w, {0, 2}, false, reduce_kind::sum), 1e-12);
    op_test::check_close(sim::mean<-1, 0>(x, sim::keepdim), reference(w, {0, 2}, true, reduce_kind::mean), 1e-12);
    op_test::check_close(sim::max<1>(x), reference(w, {1}, false, reduce_kind::max), 0);
    op_test::check_close(sim::min<>(x), reference(w, {}, false, reduce_kind::min), 0);
    op_test::check_close(sim::prod<2>(x, sim::keepdim), reference(w, {2}, true, reduce_kind::prod), 1e-12);
    op_test::check_close(sim::mean<>(x), reference(w, {}, false, reduce_kind::mean), 1e-12);
  });
}

TEST_CASE("other element types", "[reduction]") {
  using M = mesh<3>;
  const auto i = op_test::random<std::int32_t>({5, 7}, 5, -9, 9);
  const auto l = op_test::random<std::int64_t>({5, 7}, 6, -9, 9);
  const auto h = op_test::random<bfloat16>({5, 7}, 7);
  each<placements<shard<0>>, placements<shard<1>>, placements<psum>>([&]<class P>() {
    INFO("x " << op_test::placements_text<P>());
    using L = layout<M, P, extents<5, 7>>;
    op_test::check_close(sim::sum<1>(sim::distribute_tensor<L>(i.data)), reference(widen(i), {1}, false, reduce_kind::sum), 0);
    op_test::check_close(sim::max<0>(sim::distribute_tensor<L>(i.data)), reference(widen(i), {0}, false, reduce_kind::max), 0);
    op_test::check_close(sim::min<>(sim::distribute_tensor<L>(l.data)), reference(widen(l), {}, false, reduce_kind::min), 0);
    // bfloat16 accumulates in float and rounds once: relative error <= 2^-8.
    op_test::check_close(sim::sum<0>(sim::distribute_tensor<L>(h.data)), reference(widen(h), {0}, false, reduce_kind::sum), 1e-2);
    op_test::check_close(sim::mean<1>(sim::distribute_tensor<L>(h.data)), reference(widen(h), {1}, false, reduce_kind::mean), 1e-2);
  });
}

TEST_CASE("dynamic extents", "[reduction]") {
  using L = layout<mesh<4>, placements<shard<0>>, extents<dyn, 3>>;
  const auto a = op_test::random<float>({7, 3}, 8);
  const auto x = sim::distribute_tensor<L>(a.data, L{extents<dyn, 3>(7)});
  op_test::check_close(sim::sum<0>(x), reference(widen(a), {0}, false, reduce_kind::sum), 1e-5);
  // A dynamic reduced dim may split unevenly: mean never leaves it P(avg).
  const auto m = sim::mean<0>(x);
  static_assert(!std::is_same_v<decltype(m)::layout_type::placements_type, placements<pavg>>);
  op_test::check_close(m, reference(widen(a), {0}, false, reduce_kind::mean), 1e-5);
  op_test::check_close(sim::max<1>(x, sim::keepdim), reference(widen(a), {1}, true, reduce_kind::max), 0);
}

// What the compiler chose.
namespace {
template <class D>
using placements_of = typename std::remove_cvref_t<D>::layout_type::placements_type;
template <reduce_kind K, bool Keep, class Over, class P, class E, class Mesh = mesh<4>>
using out_of = placements_of<decltype(sim::reduce<K, Over, Keep>(
    std::declval<const sim::dtensor<float, layout<Mesh, P, E>>&>()))>;
using E84 = extents<8, 4>;
template <class P>
using pl = placements<P>;
static_assert(std::is_same_v<out_of<reduce_kind::sum, false, sim::over<0>, pl<shard<0>>, E84>, pl<psum>>,
              "sum over a sharded dim -> P(sum)");
static_assert(std::is_same_v<out_of<reduce_kind::sum, false, sim::over<1>, pl<shard<0>>, E84>, pl<shard<0>>>,
              "sum over another dim keeps the shard");
static_assert(std::is_same_v<out_of<reduce_kind::sum, true, sim::over<-1>, pl<shard<1>>, E84>, pl<psum>>);
static_assert(std::is_same_v<out_of<reduce_kind::max, false, sim::over<>, pl<shard<1>>, E84>, pl<pmax>>);
static_assert(std::is_same_v<out_of<reduce_kind::min, false, sim::over<1>, pl<shard<1>>, E84>, pl<pmin>>);
static_assert(std::is_same_v<out_of<reduce_kind::prod, false, sim::over<0>, pl<shard<0>>, E84>, pl<pprod>>);
static_assert(std::is_same_v<out_of<reduce_kind::mean, false, sim::over<0>, pl<shard<0>>, E84>, pl<pavg>>,
              "mean over an evenly sharded dim -> P(avg)");
static_assert(!std::is_same_v<out_of<reduce_kind::mean, false, sim::over<1>, pl<shard<1>>, extents<8, 6>>, pl<pavg>>,
              "mean over an unevenly sharded dim (6 over 4) -> not P(avg)");
static_assert(!std::is_same_v<out_of<reduce_kind::mean, false, sim::over<1>, pl<shard<1>>, extents<6, 7>, mesh<3>>,
                              pl<pavg>>);
// Partial pass-through.
static_assert(std::is_same_v<out_of<reduce_kind::sum, false, sim::over<1>, pl<psum>, E84>, pl<psum>>);
static_assert(std::is_same_v<out_of<reduce_kind::mean, false, sim::over<1>, pl<pavg>, E84>, pl<pavg>>);
static_assert(std::is_same_v<out_of<reduce_kind::mean, false, sim::over<1>, pl<psum>, E84>, pl<psum>>);
static_assert(std::is_same_v<out_of<reduce_kind::max, true, sim::over<0>, pl<pmax>, E84>, pl<pmax>>);
static_assert(std::is_same_v<out_of<reduce_kind::min, false, sim::over<>, pl<pmin>, E84>, pl<pmin>>);
static_assert(std::is_same_v<out_of<reduce_kind::prod, false, sim::over<1>, pl<pprod>, E84>, pl<pprod>>);
static_assert(!std::is_same_v<out_of<reduce_kind::max, false, sim::over<1>, pl<psum>, E84>, pl<psum>>,
              "max of a P(sum) needs the sum first");
// Shapes: keepdim keeps a 1, no dims gives 0-d.
using x84 = sim::dtensor<float, layout<mesh<4>, pl<replicate>, E84>>;
static_assert(std::is_same_v<decltype(sim::sum<-1>(std::declval<const x84&>(), sim::keepdim))::layout_type::extents_type,
                             extents<8, 1>>);
static_assert(decltype(sim::mean<>(std::declval<const x84&>()))::rank == 0);
}  // namespace
