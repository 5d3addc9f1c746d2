// tests/sim/local.cpp — spmd::sim::local_tensor and local_int: per-rank ops, reconcile,
// rank_map / tensor_map, uneven shards, errors, and the DTensor integration (to_local_tensor,
// from_local). Includes the values of PyTorch's LocalTensor tutorial.
#include <cmath>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/backends/sim/sim.hpp"
#include "../common/throws.hpp"

namespace {

using spmd::index_t;
using spmd::mesh;
namespace sim = spmd::sim;
using sim::host_tensor;
using sim::local_int;
using sim::local_tensor;

template <class T>
host_tensor<T> ht(std::vector<index_t> shape, std::vector<T> data) {
  return {std::move(shape), std::move(data)};
}

template <class T>
std::vector<T> values(const sim::strided_view<const T>& v) {
  return {v.data(), v.data() + v.size()};
}
template <class T>
std::vector<index_t> shape_of(const sim::strided_view<const T>& v) {
  return {v.extents().begin(), v.extents().end()};
}

using spmd_test::contains;
using spmd_test::message;

}  // namespace

TEST_CASE("tutorial: two ranks, x2 and +10, reconcile", "[local]") {
  using M = mesh<2>;
  const local_tensor<float, M> x(std::map<index_t, host_tensor<float>>{
      {0, ht<float>({2, 2}, {1, 2, 3, 4})}, {1, ht<float>({2, 2}, {5, 6, 7, 8})}});
  const auto y = x * 2.f;
  const auto z = x + 10.f;
  CHECK(values<float>(y.local(0)) == std::vector<float>{2, 4, 6, 8});
  CHECK(values<float>(y.local(1)) == std::vector<float>{10, 12, 14, 16});
  CHECK(values<float>(z.local(0)) == std::vector<float>{11, 12, 13, 14});
  CHECK(values<float>(z.local(1)) == std::vector<float>{15, 16, 17, 18});
  CHECK(x.local(1)(1, 0) == 7.f);
  CHECK(x.dim() == 2);
  CHECK(x.size(0) == 2);
  CHECK(x.size(-1).reconcile() == 2);

  // Identical shards reconcile to one tensor.
  const auto same = local_tensor<float, M>::replicated(ht<float>({2, 2}, {1, 2, 3, 4}));
  CHECK(same.is_uniform());
  const host_tensor<float> one = (same * 2.f + 1.f).reconcile();
  CHECK(one.shape == std::vector<index_t>{2, 2});
  CHECK(one.data == std::vector<float>{3, 5, 7, 9});

  // Differing shards: the message names the rank and the element.
  CHECK(!x.is_uniform());
  const std::string m = message<std::logic_error>([&] { (void)x.reconcile(); });
  CHECK(contains(m, "rank 1"));
  CHECK(contains(m, "at [0, 0]"));
  CHECK(contains(m, "rank 0"));
}

TEST_CASE("elementwise ops between local tensors and with scalars", "[local]") {
  using M = mesh<3>;
  const auto a = sim::rank_map<M>([](index_t r) {
    return ht<double>({r + 1}, std::vector<double>(static_cast<std::size_t>(r + 1), r + 1.0));
  });
  const auto b = a * a;  // (r+1)^2 on r+1 elements
  for (index_t r = 0; r < 3; ++r) {
    const double v = (r + 1.0) * (r + 1.0);
    CHECK(values<double>(b.local(r)) == std::vector<double>(static_cast<std::size_t>(r + 1), v));
    CHECK(values<double>((b - a).local(r)) ==
          std::vector<double>(static_cast<std::size_t>(r + 1), v - (r + 1)));
    CHECK(values<double>((b / a).local(r)) ==
          std::vector<double>(static_cast<std::size_t>(r + 1), r + 1.0));
    CHECK(values<double>((1.0 - a).local(r)) ==
          std::vector<double>(static_cast<std::size_t>(r + 1), -r));
    CHECK(values<double>((12.0 / a).local(r)) ==
          std::vector<double>(static_cast<std::size_t>(r + 1), 12.0 / (r + 1)));
    CHECK(values<double>((-a).local(r)) ==
          std::vector<double>(static_cast<std::size_t>(r + 1), -(r + 1.0)));
  }
  auto c = a;
  c += a;
  c *= 3.0;
  c -= 1.0;
  CHECK(values<double>(c.local(2)) == std::vector<double>{17, 17, 17});
  CHECK(a.numel() == local_int<M>{1, 2, 3});
  CHECK(a.size(0) == local_int<M>{1, 2, 3});
  const auto sq = a.map_elements([](double v) { return v * v; });
  CHECK(values<double>(sq.local(1)) == std::vector<double>{4, 4});

  // A shape mismatch names the rank and both shapes.
  const auto d = sim::rank_map<M>([](index_t) { return ht<double>({2}, {1, 2}); });
  const std::string m = message<std::invalid_argument>([&] { (void)(a + d); });
  CHECK(contains(m, "rank 0"));
  CHECK(contains(m, "[1]"));
  CHECK(contains(m, "[2]"));
}

TEST_CASE("integer and bfloat16 elements", "[local]") {
  using M = mesh<2>;
  const auto i = sim::rank_map<M>([](index_t r) {
    return ht<std::int32_t>({2}, {static_cast<std::int32_t>(r), 7});
  });
  CHECK(values<std::int32_t>((i * 3 + 1).local(1)) == std::vector<std::int32_t>{4, 22});
  CHECK(values<std::int32_t>((i / 2).local(1)) == std::vector<std::int32_t>{0, 3});
  // Integer division by zero throws, naming the rank and the element.
  const std::string m = message<std::domain_error>([&] { (void)(7 / i); });
  CHECK(contains(m, "rank 0"));
  CHECK(contains(m, "[0]"));
  // Wrapping, not UB.
  const auto big = local_tensor<std::int64_t, M>::replicated(
      ht<std::int64_t>({1}, {std::numeric_limits<std::int64_t>::max()}));
  CHECK((big + std::int64_t{1}).reconcile().data[0] == std::numeric_limits<std::int64_t>::min());
  CHECK_THROWS_AS(big * std::int64_t{0} / std::int64_t{0}, std::domain_error);

  using spmd::bfloat16;
  const auto h = sim::rank_map<M>([](index_t r) {
    return ht<bfloat16>({1}, {bfloat16{static_cast<float>(r) + 0.5f}});
  });
  CHECK(float((h * bfloat16{2.f}).local(1)(0)) == 3.f);
  CHECK(float((h + h).local(0)(0)) == 1.f);
}

TEST_CASE("tutorial: uneven shards of 1/2/1 rows and per-rank ints", "[local]") {
  using M = mesh<3>;
  const local_tensor<float, M> x(std::vector<host_tensor<float>>{
      ht<float>({1, 2}, {0, 1}), ht<float>({2, 2}, {2, 3, 4, 5}), ht<float>({1, 2}, {6, 7})});
  const local_int<M> rows = x.size(0);
  CHECK(rows[0] == 1);
  CHECK(rows[1] == 2);
  CHECK(rows[2] == 1);
  CHECK(!rows.uniform());
  CHECK(x.size(1).reconcile() == 2);
  CHECK(shape_of<float>((x + 1.f).local(1)) == std::vector<index_t>{2, 2});
  CHECK(values<float>((x + x).local(2)) == std::vector<float>{12, 14});
  const std::string m = message<std::logic_error>([&] { (void)x.reconcile(); });
  CHECK(contains(m, "rank 1 (shape [2, 2] vs [1, 2])"));
  CHECK(contains(m, "rank 2 (at [0, 0]: 6.000000 vs 0.000000)"));

  // Per-rank ints {10,20,30} + {1,2,3}.
  const local_int<M> a{10, 20, 30}, b{1, 2, 3};
  const local_int<M> c = a + b;
  CHECK(c == local_int<M>{11, 22, 33});
  CHECK(c[2] == 33);
  CHECK((a - b) == local_int<M>{9, 18, 27});
  CHECK((a * b) == local_int<M>{10, 40, 90});
  CHECK((a / b) == local_int<M>{10, 10, 10});
  CHECK((a / b).reconcile() == 10);
  CHECK((a % b) == 0);
  CHECK((a + 1) == local_int<M>{11, 21, 31});
  CHECK(-b == local_int<M>{-1, -2, -3});
  CHECK(!(a == b));
  CHECK(!(a == local_int<M>{10, 20, 31}));  // false unless true on every rank
  CHECK(a != local_int<M>{10, 20, 31});
  CHECK(b < a);
  CHECK(a > b);
  CHECK(a >= a);
  CHECK(!(a < a));
  CHECK(b <= 3);
  const std::string o = message<std::logic_error>([&] { (void)(a < local_int<M>{11, 20, 5}); });
  CHECK(contains(o, "true on ranks 0"));
  CHECK(contains(o, "false on ranks 1, 2"));
  const std::string r = message<std::logic_error>([&] { (void)c.reconcile(); });
  CHECK(contains(r, "ranks 1, 2 differ from rank 0"));
  CHECK(contains(message<std::domain_error>([&] { (void)(a / (b - 2)); }), "rank 1"));
  CHECK(contains(message<std::domain_error>([&] { (void)(a % (b - 3)); }), "rank 2"));
  CHECK_THROWS_AS(local_int<M>(std::numeric_limits<index_t>::min()) / -1, std::domain_error);
  CHECK_THROWS_AS((local_int<M>{1, 2}), std::invalid_argument);
  CHECK_THROWS_AS(a[3], std::out_of_range);
  const local_int<M> m2(std::map<index_t, index_t>{{0, 5}, {1, 5}, {2, 5}});
  CHECK(m2.reconcile() == 5);
  CHECK_THROWS_AS((local_int<M>(std::map<index_t, index_t>{{0, 5}, {1, 5}})),
                  std::invalid_argument);
}

TEST_CASE("tutorial: rank_map fills each rank with its rank, tensor_map gives (r+1)^2",
          "[local]") {
  using M = mesh<4>;
  const auto x = sim::rank_map<M>([](auto rank) {
    static_assert(std::is_same_v<decltype(rank), spmd::rank_c<decltype(rank)::value>>);
    return ht<float>({2, 2}, std::vector<float>(4, static_cast<float>(rank)));
  });
  for (index_t r = 0; r < 4; ++r)
    CHECK(values<float>(x.local(r)) == std::vector<float>(4, static_cast<float>(r)));

  // f(rank, shard), rank as index_t.
  const auto y = sim::tensor_map(x, [](index_t r, sim::strided_view<const float> s) {
    host_tensor<float> t{{s.extents().begin(), s.extents().end()}, {}};
    for (float v : s.span()) t.data.push_back((v + 1) * (v + 1));
    CHECK(s(0, 0) == static_cast<float>(r));
    return t;
  });
  for (index_t r = 0; r < 4; ++r)
    CHECK(values<float>(y.local(r)) ==
          std::vector<float>(4, static_cast<float>((r + 1) * (r + 1))));

  // f(shard) only; and f(rank_c<R>, shard) with a per-rank compile-time shape.
  const auto z = sim::tensor_map(y, [](auto s) {
    return ht<double>({s.size()}, std::vector<double>(static_cast<std::size_t>(s.size()), 1.0));
  });
  CHECK(values<double>(z.local(3)) == std::vector<double>{1, 1, 1, 1});
  const auto w = sim::tensor_map(x, [](auto rank, auto) {
    constexpr index_t n = decltype(rank)::value + 1;  // a compile-time constant
    return ht<std::int64_t>({n}, std::vector<std::int64_t>(n, n));
  });
  CHECK(w.size(0) == local_int<M>{1, 2, 3, 4});
  CHECK(values<std::int64_t>(w.local(2)) == std::vector<std::int64_t>{3, 3, 3});
}

TEST_CASE("meshes with explicit ranks and 2-d meshes", "[local]") {
  using Q = mesh<4>::with_ranks<0, 2, 4, 6>;
  const auto x = sim::rank_map<Q>([](auto r) {
    return ht<float>({1}, {static_cast<float>(decltype(r)::value)});
  });
  CHECK(x.local(4)(0) == 4.f);
  CHECK(x.to_local(6).data == std::vector<float>{6});
  CHECK(contains(message<std::out_of_range>([&] { (void)x.local(1); }), "rank 1"));
  const local_int<Q> n = x.size(0);
  CHECK(n.reconcile() == 1);
  CHECK(n[6] == 1);
  const std::string m = message<std::logic_error>([&] { (void)x.reconcile(); });
  CHECK(contains(m, "rank 2 (at [0]: 2.000000 vs 0.000000)"));
  CHECK(contains(m, "rank 6"));

  using M = mesh<2, 4>;
  const auto y = sim::rank_map<M>([](index_t r) { return ht<int>({}, {static_cast<int>(r)}); });
  CHECK(y.dim() == 0);
  CHECK((y * 2).local(7)() == 14);
}

TEST_CASE("construction errors name the rank and the value", "[local]") {
  using M = mesh<2>;
  using LT = local_tensor<float, M>;
  using Map = std::map<index_t, host_tensor<float>>;
  CHECK(contains(message<std::invalid_argument>([] {
                   LT x(Map{{0, ht<float>({1}, {1})}, {1, ht<float>({2}, {1})}});
                 }),
                 "rank 1's shard holds 1 elements, its shape [2] needs 2"));
  CHECK(contains(message<std::invalid_argument>([] { LT x(Map{{0, ht<float>({1}, {1})}}); }),
                 "no shard for rank 1"));
  CHECK(contains(message<std::invalid_argument>([] {
                   LT x(Map{{0, ht<float>({1}, {1})},
                            {1, ht<float>({1}, {1})},
                            {5, ht<float>({1}, {1})}});
                 }),
                 "rank 5 is not in the mesh"));
  CHECK(contains(message<std::invalid_argument>([] {
                   LT x(Map{{0, ht<float>({1}, {1})}, {1, ht<float>({1, 1}, {1})}});
                 }),
                 "rank 1's shard [1, 1] has 2 dims"));
  CHECK(contains(message<std::invalid_argument>([] {
                   LT x(Map{{0, ht<float>({-1}, {})}, {1, ht<float>({1}, {1})}});
                 }),
                 "negative extent -1"));
  CHECK(contains(message<std::invalid_argument>([] {
                   LT x(std::vector<host_tensor<float>>{ht<float>({1}, {1})});
                 }),
                 "got 1 shards"));
  const auto x = LT::replicated(ht<float>({2, 3}, std::vector<float>(6, 1.f)));
  CHECK(contains(message<std::out_of_range>([&] { (void)x.size(2); }), "dim 2"));
  CHECK(contains(message<std::out_of_range>([&] { (void)x.size(-3); }), "dim -3"));
  CHECK(x.size(-2) == 2);
}

TEST_CASE("dtensor integration: to_local_tensor and from_local", "[local]") {
  using M = mesh<3>;
  using L = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<10, 4>>;
  std::vector<float> g(40);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i);
  const auto d = sim::distribute_tensor<L>(g);
  const auto x = sim::to_local_tensor(d);  // 4 / 4 / 2 rows
  CHECK(x.size(0) == local_int<M>{4, 4, 2});
  CHECK(x.size(1).reconcile() == 4);
  CHECK(x.local(2)(1, 3) == 39.f);

  const auto d2 = sim::from_local<L>(x * 2.f);
  const std::vector<float> full = d2.full_tensor();
  for (std::size_t i = 0; i < g.size(); ++i) CHECK(full[i] == 2 * g[i]);
  CHECK(values<float>(sim::to_local_tensor(sim::dtensor<float, L>(d2)).local(1)) ==
        values<float>(d2.local(1)));

  // Shape checks of from_local.
  const auto bad = sim::rank_map<M>([](index_t) { return ht<float>({4, 4}, std::vector<float>(16)); });
  const std::string m = message<std::invalid_argument>([&] { (void)sim::from_local<L>(bad); });
  CHECK(contains(m, "rank 2"));
  CHECK(contains(m, "dim 0"));

  // Replicated layout: every rank's shard is the global tensor.
  using R = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<2, 2>>;
  const auto rep = sim::from_local<R>(local_tensor<float, M>::replicated(ht<float>({2, 2}, {1, 2, 3, 4})));
  CHECK(rep.full_tensor() == std::vector<float>{1, 2, 3, 4});
  CHECK(sim::to_local_tensor(rep).reconcile().data == std::vector<float>{1, 2, 3, 4});
}

TEST_CASE("local_int with one value in braces holds it on every rank", "[local]") {
  const spmd::sim::local_int<spmd::mesh<3>> a{5};
  CHECK(a.is_uniform());
  CHECK(a.reconcile() == 5);
  CHECK_THROWS_AS((spmd::sim::local_int<spmd::mesh<3>>{1, 2}), std::invalid_argument);
}

TEST_CASE("host_tensor factories and at()", "[local][host]") {
  const auto a = host_tensor<float>::arange({4, 4});
  CHECK(a.shape == std::vector<index_t>{4, 4});
  CHECK(a.at({1, 2}) == 6.f);
  CHECK(a.at({3, 3}) == 15.f);
  CHECK(host_tensor<int>::full({2, 0, 3}, 7).data.empty());
  CHECK(host_tensor<double>::ones({3}).data == std::vector<double>{1, 1, 1});
  CHECK(host_tensor<double>::zeros({}).data == std::vector<double>{0});  // a scalar
  CHECK(contains(message<std::invalid_argument>([] { host_tensor<float>::zeros({2, -3}); }),
                 "extent -3 of dim 1"));
  CHECK(contains(message<std::invalid_argument>([] {
                   host_tensor<float>::zeros({1 << 30, 1 << 30, 1 << 30});
                 }),
                 "2^62"));
  CHECK(contains(message<std::out_of_range>([&] { (void)a.at({1, 4}); }), "index 4 of dim 1"));
  CHECK(contains(message<std::out_of_range>([&] { (void)a.at({1}); }), "1 indices"));
}

TEST_CASE("local_mode: factories over a rank set", "[local][mode]") {
  constexpr sim::local_mode<mesh<4>> mode;
  static_assert(mode.world_size == 4);
  const auto x = mode.ones<float>({2, 3});
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(x)>, local_tensor<float, mesh<4>>>);
  for (index_t r = 0; r < 4; ++r) CHECK(x.to_local(r) == host_tensor<float>::ones({2, 3}));
  CHECK(mode.zeros<int>({5}).reconcile() == host_tensor<int>::zeros({5}));
  CHECK(mode.full<double>({1, 2}, 2.5).reconcile().data == std::vector<double>{2.5, 2.5});
  CHECK(mode.arange<float>({2, 2}).reconcile().data == std::vector<float>{0, 1, 2, 3});
  // Ranks of a rank list, in mesh order.
  using L = mesh<3>::with_ranks<5, 1, 9>;
  const local_int<L> ids = sim::local_mode<L>::ranks();
  CHECK(ids[5] == 5);
  CHECK(ids[9] == 9);
  CHECK(ids.at_index(1) == 1);
  // rank_map / tensor_map bound to the set.
  const auto r = mode.rank_map([](index_t k) { return host_tensor<float>::full({1}, float(k)); });
  const auto sq = mode.tensor_map(r, [](index_t k, auto s) {
    return host_tensor<float>::full({1}, s(0) * float(k));
  });
  CHECK(sq.to_local(3).data == std::vector<float>{9});
}

TEST_CASE("per_rank: single-rank code once per rank", "[local][per_rank]") {
  using M = mesh<4>;
  const std::vector<float> all = host_tensor<float>::arange({16}).data;
  // The tutorial's compute_rank_offset: rank r takes elements [4r, 4r + 4).
  auto slice = [](const std::vector<float>& data, index_t rank) {
    const auto b = data.begin() + 4 * rank;
    return host_tensor<float>{{4}, {b, b + 4}};
  };
  const auto parts = sim::per_rank(slice, all, sim::local_mode<M>::ranks());
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(parts)>, local_tensor<float, M>>);
  for (index_t r = 0; r < 4; ++r) {
    CHECK(parts.to_local(r).data ==
          std::vector<float>{4.f * r, 4.f * r + 1, 4.f * r + 2, 4.f * r + 3});
  }
  // Local tensors arrive as each rank's shard; an integer result packs into a local_int.
  const local_int<M> n = sim::per_rank([](auto shard) { return shard.size(); }, parts);
  CHECK(n == local_int<M>(4));
  const local_int<M> first =
      sim::per_rank([](auto shard, index_t k) { return index_t(shard(0)) + k; }, parts,
                    local_int<M>{10, 20, 30, 40});
  CHECK(first == local_int<M>{10, 24, 38, 52});
  // No per-rank argument: f runs once, as plain code.
  CHECK(sim::per_rank(slice, all, index_t{2}).data == std::vector<float>{8, 9, 10, 11});
  // Void: called once per rank.
  int calls = 0;
  sim::per_rank([&](index_t) { ++calls; }, sim::local_mode<M>::ranks());
  CHECK(calls == 4);
  // A rank whose result has the wrong size is named.
  CHECK(contains(message<std::invalid_argument>([&] {
                   sim::per_rank(
                       [](index_t k) {
                         return host_tensor<float>{{2}, std::vector<float>(k == 2 ? 3 : 2)};
                       },
                       sim::local_mode<M>::ranks());
                 }),
                 "per_rank: rank 2"));
}
