// Edge values through collectives, redistribute transitions and operators: NaN, ±inf, -0.0,
// denormals, integer limits, empty tensors and zero-size shards.
//
// Facts from PyTorch, with where they come from (spmd's own choices are in docs/numerics.md):
//   [F1] torch.maximum/minimum, amax/amin and max/min reductions propagate NaN; so does a
//        Partial(max) reduced by a collective: ranks [1,NaN,3,4] and [0,-5,7,NaN] as P(max) -> R
//        give [1,NaN,7,NaN] (measured, PyTorch 2.15; shared/reference/dtensor-semantics.md).
//   [F2] int32 addition wraps on the CPU: 2^31-1 + 1 -> -2^31 (measured, same source).
//   [F3] ATen's sum starts from +0.0: torch.sum of an empty tensor, or of [-0.0], is +0.0
//        (pytorch PR #193660, "ATen/eager sum reduction semantics effectively include a +0.0
//        additive identity").
//   [F4] torch.mean refuses integer tensors ("mean(): could not infer output dtype. Input
//        dtype must be either a floating point or complex dtype").
//   [F5] DTensor's R -> P(sum) gives every rank x/n and its P(sum) -> R adds them: -0.0
//        comes back as -0.0 (torch/distributed/tensor/placement_types.py, Partial).
// Each case below failed before the fix it names (the commit that added this file).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "../common/failures.hpp"
#include "reference.hpp"
#include "spmd/plan.hpp"
#include "spmd/runtime/ops/cat.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/reduction.hpp"
#include "spmd/backends/sim/sim.hpp"

namespace {

using namespace spmd;
using spmd_test::failures;
namespace sim = spmd::sim;
using simref::ivec;

template <class T>
using lim = std::numeric_limits<T>;

/// Equal as values, NaN equal to NaN, and zeros equal only with the same sign.
template <class T>
bool same(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    return a == b;
  } else {
    if (spmd::is_nan(a) || spmd::is_nan(b)) return spmd::is_nan(a) && spmd::is_nan(b);
    return a == b && spmd::sign_bit(a) == spmd::sign_bit(b);
  }
}

template <class T>
std::string show(T v) {
  if constexpr (std::is_same_v<T, bfloat16>) return std::to_string(float(v));
  else return std::to_string(v);
}

template <class T>
void check_same(const std::vector<T>& got, const std::vector<T>& want, const std::string& what,
                failures& f) {
  ++f.checks;
  if (got.size() != want.size()) return f.add(what + ": size " + std::to_string(got.size()));
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], want[i]))
      return f.add(what + ": element " + std::to_string(i) + " is " + show(got[i]) + ", want " +
                   show(want[i]));
}

/// The edge values of T, in an order that puts each special value on several ranks.
template <class T>
std::vector<T> edge_values() {
  if constexpr (std::is_integral_v<T>) {
    return {lim<T>::lowest(), T(lim<T>::lowest() + 1), T(-1), T(0), T(1), T(lim<T>::max() - 1),
            lim<T>::max(), T(7), T(-7)};
  } else {
    return {lim<T>::quiet_NaN(), lim<T>::infinity(), -lim<T>::infinity(), T(-0.0f), T(0.0f),
            lim<T>::denorm_min(), T(-lim<T>::denorm_min()), lim<T>::min(), lim<T>::max(),
            lim<T>::lowest(), T(1.5f), T(-2.25f)};
  }
}

}  // namespace

// --- redistribute: every transition keeps every value, bit for bit -----------------------

TEMPLATE_TEST_CASE("every transition keeps edge values (NaN, inf, -0, denormals, limits)",
                   "[edge]", float, double, bfloat16, std::int32_t, std::int64_t) {
  using T = TestType;
  failures f;
  const std::vector<T> base = edge_values<T>();
  // Meshes with uneven and zero-size shards: 4 ranks over 3..12 rows.
  const std::vector<mesh_shape_vec> meshes = {mesh_shape_vec{{4}, 1}, mesh_shape_vec{{2, 3}, 2}};
  std::vector<placement> vocab = {make_replicate(), make_shard(0), make_shard(1),
                                  make_partial(reduce_op::sum), make_partial(reduce_op::max),
                                  make_partial(reduce_op::min), make_partial(reduce_op::product)};
  if (!std::is_integral_v<T>) vocab.push_back(make_partial(reduce_op::avg));  // [F4]
  for (const mesh_shape_vec& mesh : meshes)
    for (const ivec& global : {ivec{static_cast<index_t>(base.size()), 1}, ivec{3, 4}, ivec{2, 6}}) {
      std::vector<T> data(static_cast<std::size_t>(simref::volume(global)));
      for (std::size_t i = 0; i < data.size(); ++i) data[i] = base[i % base.size()];
      // Every placement list over the vocabulary (one partial op per list).
      std::vector<layout_spec> specs;
      const int n = static_cast<int>(vocab.size());
      for (int code = 0; code < (mesh.size() == 1 ? n : n * n); ++code) {
        placement_vec p{};
        for (int m = 0, c = code; m < mesh.size(); ++m, c /= n) p.push_back(vocab[c % n]);
        const spec_result r = make_spec(mesh, p, 2);
        if (r.ok()) specs.push_back(r.spec);
      }
      // P(avg) holds x as a sum n*x: |x| > max/n overflows (in NCCL's avg too); docs/numerics.md.
      std::vector<T> avg_data = data;
      for (T& v : avg_data)
        if (v == lim<T>::max() || v == lim<T>::lowest()) v = T(1.5f);
      auto holds_avg = [](const layout_spec& s) { return holds_partial(s.placements, reduce_op::avg); };
      for (const bool avg : {false, true})  // avg: the data P(avg) can hold, every pair
        for (const layout_spec& a : specs) {
          if (!avg && holds_avg(a)) continue;
          const std::vector<T>& d = avg ? avg_data : data;
          const auto in = sim::distribute<T>(d, a, simref::to_shape(global));
          check_same(simref::global_value(a, global, simref::from_set(in, a, global)), d,
                     "distribute " + simref::text(a) + " " + simref::text(global), f);
          for (const layout_spec& b : specs) {
            if (!avg && holds_avg(b)) continue;
            const plan_result p = make_plan(a, b, 4.0 * static_cast<double>(d.size()));
            REQUIRE(p.ok());
            const auto out = sim::execute<T>(p.value, simref::to_shape(global), in);
            check_same(simref::global_value(b, global, simref::from_set(out, b, global)), d,
                       simref::text(a) + " -> " + simref::text(b) + " " + simref::text(global) +
                           " (" + sim::element_name<T>() + ")",
                       f);
          }
        }
    }
  f.report_checked();
}

TEST_CASE("the issue's NaN: [1, NaN, 3, 4] as P(max) and P(min) back to R", "[edge]") {
  using M = mesh<2>;
  using E = extents<4>;
  const std::vector<float> g{1, NAN, 3, 4};
  for (int which = 0; which < 2; ++which) {
    auto check = [&]<class P>(P) {
      const auto y = sim::distribute_tensor<layout<M, P, E>>(g).template redistribute<placements<replicate>>();
      const std::vector<float> v = y.full_tensor();
      CHECK(v[0] == 1);
      CHECK(std::isnan(v[1]));  // was -inf for P(max)
      CHECK(v[2] == 3);
      CHECK(v[3] == 4);
    };
    if (which == 0) check(placements<partial<reduce_op::max>>{});
    else check(placements<partial<reduce_op::min>>{});
  }
}

TEST_CASE("P(max) -> R of [1,NaN,3,4] and [0,-5,7,NaN] gives [1,NaN,7,NaN] in either rank order [F1]",
          "[edge]") {
  using M = mesh<2>;
  using P = layout<M, placements<partial<reduce_op::max>>, extents<4>>;
  const sim::host_tensor<float> a{{4}, {1, NAN, 3, 4}}, b{{4}, {0, -5, 7, NAN}};
  for (const auto& locals : {std::vector{a, b}, std::vector{b, a}}) {
    const auto x = sim::from_local<P>(locals);
    const std::vector<float> v = x.redistribute<placements<replicate>>().full_tensor();
    CHECK(v[0] == 1);
    CHECK(std::isnan(v[1]));
    CHECK(v[2] == 7);
    CHECK(std::isnan(v[3]));
    // The same bits whichever rank held the NaN.
    const std::vector<float> r = x.redistribute<placements<shard<0>>>().full_tensor();
    CHECK(std::memcmp(r.data(), v.data(), sizeof(float) * 4) == 0);
  }
}

// --- collectives on local tensors ---------------------------------------------------------

TEST_CASE("collectives: NaN wins max and min on any rank; zeros order by sign", "[edge]") {
  using M = mesh<4>;
  for (index_t nan_rank = 0; nan_rank < 4; ++nan_rank) {
    std::vector<sim::host_tensor<float>> s;
    for (index_t r = 0; r < 4; ++r)
      s.push_back({{3}, {r == nan_rank ? NAN : float(r), r % 2 ? -0.0f : 0.0f, r % 2 ? 0.0f : -0.0f}});
    const sim::local_tensor<float, M> x(s);
    for (reduce_op op : {reduce_op::max, reduce_op::min}) {
      const auto y = sim::all_reduce(x, op).reconcile();
      INFO("nan on rank " << nan_rank << ", op " << reduce_op_name(op));
      CHECK(std::isnan(y.data[0]));
      CHECK(y.data[1] == 0);
      CHECK(std::signbit(y.data[1]) == (op == reduce_op::min));  // max(+0,-0) = +0, min = -0
      CHECK(std::signbit(y.data[2]) == (op == reduce_op::min));
      const auto rs = sim::reduce_scatter(x, op, 0);
      CHECK(std::isnan(rs.to_local(0).data[0]));
    }
  }
}

TEST_CASE("collectives: int32 sums wrap [F2]; integer avg is refused [F4]", "[edge]") {
  using M = mesh<2>;
  const sim::local_tensor<std::int32_t, M> x(std::vector<sim::host_tensor<std::int32_t>>{
      {{2}, {lim<std::int32_t>::max(), lim<std::int32_t>::lowest()}}, {{2}, {1, -1}}});
  const auto y = sim::all_reduce(x, reduce_op::sum).reconcile();
  CHECK(y.data == std::vector<std::int32_t>{lim<std::int32_t>::lowest(), lim<std::int32_t>::max()});
  CHECK(sim::all_reduce(x, reduce_op::product).reconcile().data ==
        std::vector<std::int32_t>{lim<std::int32_t>::max(), lim<std::int32_t>::lowest()});
  CHECK_THROWS_WITH(sim::all_reduce(x, reduce_op::avg),
                    Catch::Contains("P(avg) needs a floating-point element type, not i32"));
}

// --- signed zeros -------------------------------------------------------------------------

TEST_CASE("-0.0 survives every route through P(sum) [F5]", "[edge]") {
  using M = mesh<2>;
  using E = extents<4>;
  const std::vector<float> g{-0.0f, -0.0f, 1, -0.0f};
  auto all_negative_zero = [](const std::vector<float>& v) {
    return std::signbit(v[0]) && std::signbit(v[1]) && v[2] == 1 && std::signbit(v[3]);
  };
  const auto s = sim::distribute_tensor<layout<M, placements<shard<0>>, E>>(g);
  const auto r = sim::distribute_tensor<layout<M, placements<replicate>, E>>(g);
  const auto p = sim::distribute_tensor<layout<M, placements<partial<>>, E>>(g);
  CHECK(all_negative_zero(p.full_tensor()));  // distribute's split of -0 (was +0)
  CHECK(all_negative_zero(s.redistribute<placements<partial<>>>().redistribute<placements<replicate>>().full_tensor()));
  CHECK(all_negative_zero(r.redistribute<placements<partial<>>>().redistribute<placements<replicate>>().full_tensor()));
  CHECK(all_negative_zero(s.redistribute<placements<partial<reduce_op::avg>>>().full_tensor()));
}

TEST_CASE("local sums start from +0 as ATen's do [F3]; max/min order zeros by sign", "[edge]") {
  using M = mesh<2>;
  using L = layout<M, placements<replicate>, extents<2>>;
  const auto z = sim::distribute_tensor<L>(std::vector<float>{-0.0f, -0.0f});
  const std::vector<float> s = sim::sum<>(z).full_tensor();
  CHECK((s[0] == 0 && !std::signbit(s[0])));
  const std::vector<float> mx = sim::maximum(sim::distribute_tensor<L>(std::vector<float>{-0.0f, 0.0f}),
                                             sim::distribute_tensor<L>(std::vector<float>{0.0f, -0.0f}))
                                    .full_tensor();
  CHECK((!std::signbit(mx[0]) && !std::signbit(mx[1])));
  const std::vector<float> mn = sim::minimum(sim::distribute_tensor<L>(std::vector<float>{-0.0f, 0.0f}),
                                             sim::distribute_tensor<L>(std::vector<float>{0.0f, -0.0f}))
                                    .full_tensor();
  CHECK((std::signbit(mn[0]) && std::signbit(mn[1])));
}

// --- operators ----------------------------------------------------------------------------

TEST_CASE("operators: maximum/minimum and amax/amin propagate NaN on sharded inputs [F1]", "[edge]") {
  using M = mesh<4>;
  using S = layout<M, placements<shard<0>>, extents<6>>;
  const std::vector<float> a{1, NAN, 3, -INFINITY, 5, 0}, b{NAN, 2, 2, 1, INFINITY, -0.0f};
  const auto x = sim::distribute_tensor<S>(a), y = sim::distribute_tensor<S>(b);
  const std::vector<float> mx = sim::maximum(x, y).full_tensor(), mn = sim::minimum(x, y).full_tensor();
  CHECK((std::isnan(mx[0]) && std::isnan(mx[1]) && mx[2] == 3 && mx[3] == 1 && mx[4] == INFINITY));
  CHECK((std::isnan(mn[0]) && std::isnan(mn[1]) && mn[2] == 2 && mn[3] == -INFINITY && mn[4] == 5));
  CHECK((!std::signbit(mx[5]) && std::signbit(mn[5])));
  CHECK(std::isnan(sim::maximum(x, 2.0f).full_tensor()[1]));
  CHECK(std::isnan(sim::maximum(2.0f, x).full_tensor()[1]));
  // Reductions over the sharded dim: a P(max)/P(min) of the shards, NaN on rank 0's block.
  CHECK(std::isnan(sim::max<>(x).full_tensor()[0]));
  CHECK(std::isnan(sim::min<>(x).full_tensor()[0]));
  // Without the NaN: -inf and +inf are ordinary values.
  const auto z = sim::distribute_tensor<S>(std::vector<float>{1, -INFINITY, 3, 2, 5, 0});
  CHECK(sim::min<>(z).full_tensor()[0] == -INFINITY);
  CHECK(sim::max<>(z).full_tensor()[0] == 5);
}

TEST_CASE("operators: integer P(max) from an empty block does not wrap under neg or add", "[edge]") {
  // 3 rows over 4 ranks: rank 3's block is empty, so its max is the identity lowest().
  using M = mesh<4>;
  using S = layout<M, placements<shard<0>>, extents<3>>;
  for (const std::vector<std::int32_t>& g : {std::vector<std::int32_t>{5, -2, 9},
                                             std::vector<std::int32_t>{-3, -8, -1}}) {
    const auto x = sim::distribute_tensor<S>(g);
    const auto m = sim::max<>(x);  // P(max), rank 3 holds lowest()
    static_assert(std::is_same_v<decltype(m)::placements_type, placements<partial<reduce_op::max>>>);
    const std::int32_t want = *std::max_element(g.begin(), g.end());
    CHECK(sim::neg(m).full_tensor()[0] == -want);      // -lowest() wrapped to lowest() as P(min)
    CHECK((m + std::int32_t{-5}).full_tensor()[0] == want - 5);  // lowest() - 5 wrapped
    CHECK(sim::relu(m).full_tensor()[0] == std::max(want, 0));  // monotone, no wrap: passes
    using R = decltype(sim::relu(m));
    static_assert(std::is_same_v<R::placements_type, placements<partial<reduce_op::max>>>);
    // For floats the identity -inf maps to +inf, and neg keeps the partial (no collective).
    using F = decltype(sim::neg(sim::max<>(sim::distribute_tensor<S>(std::vector<float>{1, 2, 3}))));
    static_assert(std::is_same_v<F::placements_type, placements<partial<reduce_op::min>>>);
  }
}

TEST_CASE("operators: empty tensors and zero-size shards", "[edge]") {
  using M = mesh<4>;
  // cat of blocks some of which are empty (was UB: an offset added to a null block).
  using A = layout<M, placements<shard<0>>, extents<3, 2>>;
  using B = layout<M, placements<shard<0>>, extents<3, 0>>;
  const auto a = sim::distribute_tensor<A>(std::vector<float>{1, 2, 3, 4, 5, 6});
  const auto b = sim::distribute_tensor<B>(std::vector<float>{});
  CHECK(sim::cat<1>(a, b).full_tensor() == std::vector<float>{1, 2, 3, 4, 5, 6});
  CHECK(sim::cat<1>(b, a).full_tensor() == std::vector<float>{1, 2, 3, 4, 5, 6});
  // Reductions of an empty tensor: sum +0, max -inf (the identities), shards empty or not.
  using Z = layout<M, placements<shard<0>>, extents<0>>;
  const auto z = sim::distribute_tensor<Z>(std::vector<float>{});
  const float s = sim::sum<>(z).full_tensor()[0];
  CHECK((s == 0 && !std::signbit(s)));
  CHECK(sim::max<>(z).full_tensor()[0] == -INFINITY);
  CHECK(sim::relu(z).full_tensor().empty());
  CHECK(z.redistribute<placements<replicate>>().full_tensor().empty());
}
