// tests/sim/collectives.cpp — collectives on local tensors (spmd/backends/sim/collectives.hpp) against
// an element-by-element reference: the LocalTensor tutorial's example 2, uneven pieces, groups
// over one mesh dim of a 2x2 mesh, every element type, and the errors.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/backends/sim/sim.hpp"
#include "../common/throws.hpp"

namespace {

using spmd::dim_mask;
using spmd::index_t;
using spmd::mesh;
using spmd::reduce_op;
namespace sim = spmd::sim;
using sim::host_tensor;
using sim::local_tensor;

template <class T>
host_tensor<T> ht(std::vector<index_t> shape, std::vector<T> data) {
  return {std::move(shape), std::move(data)};
}

using spmd_test::contains;
using spmd_test::message;

// --- the reference: plain tensors of doubles, element loops -----------------------------

struct ref {
  std::vector<index_t> shape;
  std::vector<double> data;
};

index_t numel(const std::vector<index_t>& s) {
  index_t n = 1;
  for (index_t e : s) n *= e;
  return n;
}
index_t outer(const std::vector<index_t>& s, int d) {
  index_t n = 1;
  for (int e = 0; e < d; ++e) n *= s[e];
  return n;
}
index_t inner(const std::vector<index_t>& s, int d) {
  index_t n = 1;
  for (int e = d + 1; e < static_cast<int>(s.size()); ++e) n *= s[e];
  return n;
}
ref concat(const std::vector<ref>& parts, int d) {
  ref r{parts[0].shape, {}};
  r.shape[d] = 0;
  for (const ref& p : parts) r.shape[d] += p.shape[d];
  for (index_t o = 0; o < outer(r.shape, d); ++o)
    for (const ref& p : parts) {
      const index_t len = p.shape[d] * inner(p.shape, d);
      for (index_t k = 0; k < len; ++k) r.data.push_back(p.data[o * len + k]);
    }
  return r;
}
ref slice(const ref& x, int d, index_t start, index_t len) {
  ref r{x.shape, {}};
  r.shape[d] = len;
  const index_t in = inner(x.shape, d);
  for (index_t o = 0; o < outer(x.shape, d); ++o)
    for (index_t k = 0; k < len * in; ++k) r.data.push_back(x.data[(o * x.shape[d] + start) * in + k]);
  return r;
}
ref chunk_of(const ref& x, int d, index_t n, index_t j) {
  const index_t full = (x.shape[d] + n - 1) / n;
  const index_t start = full * j < x.shape[d] ? full * j : x.shape[d];
  const index_t stop = start + full < x.shape[d] ? start + full : x.shape[d];
  return slice(x, d, start, stop - start);
}
template <class T>
ref reduce(const std::vector<ref>& xs, reduce_op op) {
  ref r = xs[0];
  for (std::size_t k = 1; k < xs.size(); ++k)
    for (std::size_t i = 0; i < r.data.size(); ++i) {
      const double a = r.data[i], b = xs[k].data[i];
      switch (op) {
        case reduce_op::sum:
        case reduce_op::avg: r.data[i] = a + b; break;
        case reduce_op::product: r.data[i] = a * b; break;
        case reduce_op::max: r.data[i] = std::max(a, b); break;
        case reduce_op::min: r.data[i] = std::min(a, b); break;
      }
    }
  if (op == reduce_op::avg)
    for (double& v : r.data) {
      v /= static_cast<double>(xs.size());
      if constexpr (std::is_integral_v<T>) v = std::trunc(v);
    }
  return r;
}

/// Mesh indices of the groups of `mask`, each in group order.
template <class M>
std::vector<std::vector<index_t>> groups(dim_mask mask) {
  std::vector<std::vector<index_t>> gs;
  for (index_t g = 0; g < M::group_count(mask); ++g) {
    gs.emplace_back();
    for (index_t j = 0; j < M::group_size(mask); ++j)
      gs.back().push_back(M::index_of(M::group_rank(mask, g, j)));
  }
  return gs;
}

template <class T, class M>
ref to_ref(const local_tensor<T, M>& x, index_t i) {
  const host_tensor<T> t = x.to_local(M::rank_at(i));
  ref r{t.shape, {}};
  for (T v : t.data) {
    if constexpr (std::is_same_v<T, spmd::bfloat16>) r.data.push_back(static_cast<float>(v));
    else r.data.push_back(static_cast<double>(v));
  }
  return r;
}

/// Every rank's shard of `got` equals `want[mesh index]`.
template <class T, class M>
void check(const local_tensor<T, M>& got, const std::vector<ref>& want) {
  for (index_t i = 0; i < M::size; ++i) {
    INFO("rank " << M::rank_at(i));
    const ref g = to_ref(got, i);
    REQUIRE(g.shape == want[static_cast<std::size_t>(i)].shape);
    for (std::size_t k = 0; k < g.data.size(); ++k) {
      const double w = want[static_cast<std::size_t>(i)].data[k];
      if constexpr (std::is_same_v<T, spmd::bfloat16>)
        CHECK(g.data[k] == Approx(w).epsilon(1e-2));
      else if constexpr (std::is_floating_point_v<T>)
        CHECK(g.data[k] == Approx(w).epsilon(1e-6));
      else
        CHECK(g.data[k] == w);
    }
  }
}

/// Shards of the given shapes (by mesh index) with small integer values.
template <class T, class M>
local_tensor<T, M> random_local(const std::vector<std::vector<index_t>>& shapes, std::mt19937& rng,
                                int lo = -3, int hi = 3) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<host_tensor<T>> shards;
  for (const auto& s : shapes) {
    host_tensor<T> t{s, {}};
    for (index_t k = 0; k < numel(s); ++k) t.data.push_back(static_cast<T>(static_cast<float>(dist(rng))));
    shards.push_back(t);
  }
  return local_tensor<T, M>(shards);
}

template <class T, class M>
std::vector<ref> refs_of(const local_tensor<T, M>& x) {
  std::vector<ref> r;
  for (index_t i = 0; i < M::size; ++i) r.push_back(to_ref(x, i));
  return r;
}

// The references of each collective, group by group.
template <class T, class M>
std::vector<ref> ref_all_reduce(const std::vector<ref>& x, reduce_op op, dim_mask mask) {
  std::vector<ref> out(x.size());
  for (const auto& g : groups<M>(mask)) {
    std::vector<ref> xs;
    for (index_t i : g) xs.push_back(x[i]);
    const ref r = reduce<T>(xs, op);
    for (index_t i : g) out[i] = r;
  }
  return out;
}
template <class M>
std::vector<ref> ref_all_gather(const std::vector<ref>& x, int d, dim_mask mask) {
  std::vector<ref> out(x.size());
  for (const auto& g : groups<M>(mask)) {
    std::vector<ref> xs;
    for (index_t i : g) xs.push_back(x[i]);
    const ref r = concat(xs, d);
    for (index_t i : g) out[i] = r;
  }
  return out;
}
template <class T, class M>
std::vector<ref> ref_reduce_scatter(const std::vector<ref>& x, reduce_op op, int d, dim_mask mask) {
  std::vector<ref> out(x.size());
  for (const auto& g : groups<M>(mask)) {
    std::vector<ref> xs;
    for (index_t i : g) xs.push_back(x[i]);
    const ref r = reduce<T>(xs, op);
    for (std::size_t j = 0; j < g.size(); ++j)
      out[g[j]] = chunk_of(r, d, static_cast<index_t>(g.size()), static_cast<index_t>(j));
  }
  return out;
}
template <class M>
std::vector<ref> ref_all_to_all(const std::vector<ref>& x, int sd, int cd, dim_mask mask) {
  std::vector<ref> out(x.size());
  for (const auto& g : groups<M>(mask)) {
    const index_t n = static_cast<index_t>(g.size());
    for (index_t j = 0; j < n; ++j) {
      std::vector<ref> parts;
      for (index_t k : g) parts.push_back(chunk_of(x[k], sd, n, j));
      out[g[j]] = concat(parts, cd);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("tutorial example 2: three ranks", "[collectives]") {
  using M = mesh<3>;
  const local_tensor<float, M> x(std::map<index_t, host_tensor<float>>{
      {0, ht<float>({1, 2}, {1, 2})}, {1, ht<float>({1, 2}, {3, 4})}, {2, ht<float>({1, 2}, {5, 6})}});

  const auto s = sim::all_reduce(x, reduce_op::sum);
  CHECK(s.reconcile().shape == std::vector<index_t>{1, 2});
  CHECK(s.reconcile().data == std::vector<float>{9, 12});

  const auto b = sim::broadcast(x, 0);
  CHECK(b.reconcile().data == std::vector<float>{1, 2});
  CHECK(sim::broadcast(x, 2).reconcile().data == std::vector<float>{5, 6});

  const auto g = sim::all_gather(x, 0);
  CHECK(g.reconcile().shape == std::vector<index_t>{3, 2});
  CHECK(g.reconcile().data == std::vector<float>{1, 2, 3, 4, 5, 6});
  const auto g1 = sim::all_gather(x, -1);
  CHECK(g1.reconcile().shape == std::vector<index_t>{1, 6});
  CHECK(g1.reconcile().data == std::vector<float>{1, 2, 3, 4, 5, 6});

  // reduce_scatter of a 3-element tensor per rank: rank j keeps element j of the sum.
  const local_tensor<float, M> y = sim::rank_map<M>([](index_t r) {
    return host_tensor<float>{{3}, {1.f + 10.f * float(r), 2.f + 10.f * float(r), 3.f + 10.f * float(r)}};
  });
  const auto rs = sim::reduce_scatter(y, reduce_op::sum, 0);
  for (index_t r = 0; r < 3; ++r) {
    CHECK(rs.to_local(r).shape == std::vector<index_t>{1});
    CHECK(rs.to_local(r).data == std::vector<float>{33.f + 3.f * float(r)});
  }
  // Uneven: [[9, 12]] split over 3 ranks along dim 1 is 1, 1, 0 columns.
  const auto rs1 = sim::reduce_scatter(x, reduce_op::sum, 1);
  CHECK(rs1.to_local(0).data == std::vector<float>{9});
  CHECK(rs1.to_local(1).data == std::vector<float>{12});
  CHECK(rs1.to_local(2).shape == std::vector<index_t>{1, 0});
  CHECK(rs1.size(1) == sim::local_int<M>{1, 1, 0});
}

TEST_CASE("uneven pieces: zero-size shards gather and scatter", "[collectives]") {
  using M = mesh<4>;
  // all_gather of shards of 2, 0, 3, 1 rows.
  const local_tensor<int, M> x(std::vector<host_tensor<int>>{
      ht<int>({2, 2}, {1, 2, 3, 4}), ht<int>({0, 2}, {}), ht<int>({3, 2}, {5, 6, 7, 8, 9, 10}),
      ht<int>({1, 2}, {11, 12})});
  const auto g = sim::all_gather(x, 0);
  CHECK(g.reconcile().shape == std::vector<index_t>{6, 2});
  CHECK(g.reconcile().data == std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  // Every shard empty.
  const local_tensor<int, M> e = local_tensor<int, M>::replicated(ht<int>({0, 3}, {}));
  CHECK(sim::all_gather(e, 0).reconcile().shape == std::vector<index_t>{0, 3});
  CHECK(sim::all_reduce(e, reduce_op::max).reconcile().shape == std::vector<index_t>{0, 3});
  // reduce_scatter of 5 rows over 4 ranks: 2, 2, 1, 0 (torch.chunk).
  const auto y = local_tensor<int, M>::replicated(ht<int>({5}, {1, 2, 3, 4, 5}));
  const auto rs = sim::reduce_scatter(y, reduce_op::sum, 0);
  CHECK(rs.to_local(0).data == std::vector<int>{4, 8});
  CHECK(rs.to_local(1).data == std::vector<int>{12, 16});
  CHECK(rs.to_local(2).data == std::vector<int>{20});
  CHECK(rs.to_local(3).shape == std::vector<index_t>{0});
  // 6 over 4: 2, 2, 2, 0 (not 2, 2, 1, 1).
  const auto rs6 = sim::reduce_scatter(local_tensor<int, M>::replicated(ht<int>({6}, {1, 1, 1, 1, 1, 1})),
                                       reduce_op::sum, 0);
  CHECK(rs6.size(0) == sim::local_int<M>{2, 2, 2, 0});
  // all_to_all of 6 rows per rank over 4 ranks: pieces of 2, 2, 2, 0 rows.
  const auto a = sim::all_to_all(g, 0, 0);
  CHECK(a.size(0) == sim::local_int<M>{8, 8, 8, 0});
  CHECK(a.to_local(0).data == std::vector<int>{1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4});
  CHECK(a.to_local(2).data == std::vector<int>{9, 10, 11, 12, 9, 10, 11, 12, 9, 10, 11, 12, 9,
                                               10, 11, 12});
  CHECK(a.to_local(3).shape == std::vector<index_t>{0, 2});
  // A rank whose shard has no rows broadcasts an empty tensor.
  CHECK(sim::broadcast(x, 1).size(0) == sim::local_int<M>{0, 0, 0, 0});
}

TEST_CASE("2x2 mesh: groups over one mesh dim", "[collectives]") {
  using M = mesh<2, 2>;  // ranks 0 1 / 2 3
  const local_tensor<float, M> x = sim::rank_map<M>([](index_t r) {
    return host_tensor<float>{{1, 2}, {float(r), 10.f * float(r)}};
  });
  // Over mesh dim 1 (bit 1): groups {0, 1} and {2, 3}.
  const auto s1 = sim::all_reduce(x, reduce_op::sum, 0b10);
  CHECK(s1.to_local(0).data == std::vector<float>{1, 10});
  CHECK(s1.to_local(1).data == std::vector<float>{1, 10});
  CHECK(s1.to_local(2).data == std::vector<float>{5, 50});
  CHECK(s1.to_local(3).data == std::vector<float>{5, 50});
  // Over mesh dim 0 (bit 0): groups {0, 2} and {1, 3}.
  const auto s0 = sim::all_reduce(x, reduce_op::max, 0b01);
  CHECK(s0.to_local(0).data == std::vector<float>{2, 20});
  CHECK(s0.to_local(1).data == std::vector<float>{3, 30});
  const auto g0 = sim::all_gather(x, 0, 0b01);
  CHECK(g0.to_local(1).data == std::vector<float>{1, 10, 3, 30});
  CHECK(g0.to_local(3).data == std::vector<float>{1, 10, 3, 30});
  // broadcast from rank 1 over mesh dim 1: position 1 of each group, so ranks 1 and 3.
  const auto b = sim::broadcast(x, 1, 0b10);
  CHECK(b.to_local(0).data == std::vector<float>{1, 10});
  CHECK(b.to_local(2).data == std::vector<float>{3, 30});
  // The whole mesh (default) and both dims flattened are the same group.
  CHECK(sim::all_gather(x, 0).reconcile().data == sim::all_gather(x, 0, 0b11).reconcile().data);
  CHECK(sim::all_gather(x, 0).reconcile().data ==
        std::vector<float>{0, 0, 1, 10, 2, 20, 3, 30});
  // The empty mask: every rank alone.
  CHECK(sim::all_reduce(x, reduce_op::sum, 0).to_local(3).data == std::vector<float>{3, 30});
}

TEST_CASE("a mesh over a rank list", "[collectives]") {
  using M = mesh<2, 2>::with_ranks<7, 5, 3, 1>;
  const local_tensor<int, M> x = sim::rank_map<M>([](index_t r) {
    return host_tensor<int>{{1}, {int(r)}};
  });
  CHECK(sim::all_gather(x, 0).reconcile().data == std::vector<int>{7, 5, 3, 1});
  CHECK(sim::all_gather(x, 0, 0b01).to_local(5).data == std::vector<int>{5, 1});
  CHECK(sim::broadcast(x, 3).reconcile().data == std::vector<int>{3});
  CHECK(sim::broadcast(x, 3, 0b10).to_local(5).data == std::vector<int>{7});
  CHECK(contains(message<std::invalid_argument>([&] { sim::broadcast(x, 0); }), "rank 0"));
}

TEMPLATE_TEST_CASE("every collective against the reference", "[collectives]", float, double,
                   std::int32_t, std::int64_t, spmd::bfloat16) {
  using T = TestType;
  std::mt19937 rng(1234);
  const reduce_op ops[] = {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min,
                           reduce_op::product};

  auto sweep = [&]<class M>(M) {
    for (dim_mask mask = 0; mask < (dim_mask{1} << M::ndim); ++mask) {
      INFO("mask " << mask);
      const index_t n = M::group_size(mask);
      // Equal shapes: the reductions; sizes that do and do not divide by the group size.
      for (const std::vector<index_t>& shape :
           {std::vector<index_t>{5, 3}, std::vector<index_t>{n * 2, 4}, std::vector<index_t>{1, 7},
            std::vector<index_t>{0, 2}}) {
        const auto x = random_local<T, M>(
            std::vector<std::vector<index_t>>(static_cast<std::size_t>(M::size), shape), rng,
            -3, 3);
        const auto xr = refs_of(x);
        for (reduce_op op : ops) {
          INFO("op " << int(op));
          if (std::is_integral_v<T> && op == reduce_op::avg) {  // no integer average
            CHECK_THROWS_WITH(sim::all_reduce(x, op, mask),
                              Catch::Contains("P(avg) needs a floating-point element type"));
            CHECK_THROWS_WITH(sim::reduce_scatter(x, op, 0, mask),
                              Catch::Contains("P(avg) needs a floating-point element type"));
            continue;
          }
          check(sim::all_reduce(x, op, mask), ref_all_reduce<T, M>(xr, op, mask));
          for (int d = 0; d < 2; ++d)
            check(sim::reduce_scatter(x, op, d, mask), ref_reduce_scatter<T, M>(xr, op, d, mask));
        }
        for (int sd = 0; sd < 2; ++sd)
          for (int cd = 0; cd < 2; ++cd)
            check(sim::all_to_all(x, sd, cd, mask), ref_all_to_all<M>(xr, sd, cd, mask));
        for (index_t i = 0; i < M::size; ++i) {
          std::vector<ref> want(static_cast<std::size_t>(M::size));
          for (const auto& g : groups<M>(mask)) {
            const index_t pos = M::group_of_rank(mask, M::rank_at(i)).index;
            for (index_t k : g) want[k] = xr[g[pos]];
          }
          check(sim::broadcast(x, M::rank_at(i), mask), want);
        }
      }
      // Shards of different sizes along one dim (zero included): all_gather, broadcast,
      // and all_to_all splitting the other dim.
      for (int d = 0; d < 3; ++d) {
        std::vector<std::vector<index_t>> shapes;
        for (index_t i = 0; i < M::size; ++i) {
          std::vector<index_t> s{2, 3, 2};
          s[d] = i % 3;
          shapes.push_back(s);
        }
        const auto x = random_local<T, M>(shapes, rng);
        const auto xr = refs_of(x);
        check(sim::all_gather(x, d, mask), ref_all_gather<M>(xr, d, mask));
        const int other = (d + 1) % 3;
        check(sim::all_to_all(x, other, d, mask), ref_all_to_all<M>(xr, other, d, mask));
        std::vector<ref> want(static_cast<std::size_t>(M::size));
        const index_t pos = M::group_of_rank(mask, M::rank_at(M::size - 1)).index;
        for (const auto& g : groups<M>(mask))
          for (index_t k : g) want[k] = xr[g[pos]];
        check(sim::broadcast(x, M::rank_at(M::size - 1), mask), want);
      }
    }
  };
  sweep(mesh<4>{});
  sweep(mesh<2, 2>{});
  sweep(mesh<2, 3>{});
}

TEST_CASE("bad inputs throw, naming the value", "[collectives]") {
  using M = mesh<2, 2>;
  const auto x = local_tensor<float, M>::replicated(ht<float>({2, 3}, {1, 2, 3, 4, 5, 6}));
  using E = std::out_of_range;
  using I = std::invalid_argument;
  CHECK(contains(message<E>([&] { sim::all_gather(x, 2); }), "dim 2"));
  CHECK(contains(message<E>([&] { sim::all_gather(x, -3); }), "dim -3"));
  CHECK(contains(message<E>([&] { sim::reduce_scatter(x, reduce_op::sum, 5); }), "dim 5"));
  CHECK(contains(message<E>([&] { sim::all_to_all(x, 2, 0); }), "split dim 2"));
  CHECK(contains(message<E>([&] { sim::all_to_all(x, 0, -7); }), "concat dim -7"));
  CHECK(contains(message<I>([&] { sim::broadcast(x, 4); }), "source rank 4"));
  CHECK(contains(message<I>([&] { sim::broadcast(x, -1); }), "source rank -1"));
  CHECK(contains(message<I>([&] { sim::all_reduce(x, reduce_op::sum, 0b100); }), "group mask 4"));

  // Mismatched shapes, named with their ranks.
  const local_tensor<float, M> y(std::vector<host_tensor<float>>{
      ht<float>({2, 2}, {1, 2, 3, 4}), ht<float>({2, 2}, {1, 2, 3, 4}),
      ht<float>({2, 2}, {1, 2, 3, 4}), ht<float>({1, 3}, {1, 2, 3})});
  const std::string ar = message<I>([&] { sim::all_reduce(y, reduce_op::sum); });
  CHECK(contains(ar, "rank 3"));
  CHECK(contains(ar, "[1, 3]"));
  CHECK(contains(ar, "rank 0"));
  // Over mesh dim 1 the group {0, 1} is fine; {2, 3} is not.
  const std::string rs = message<I>([&] { sim::reduce_scatter(y, reduce_op::sum, 0, 0b10); });
  CHECK(contains(rs, "rank 3"));
  CHECK(contains(rs, "rank 2"));
  const std::string ag = message<I>([&] { sim::all_gather(y, 0); });
  CHECK(contains(ag, "rank 3"));
  CHECK(contains(ag, "dim 1"));
  CHECK(message<I>([&] { sim::all_gather(y, 0, 0b01); }) != "");  // {1, 3} differ in dim 1
  CHECK(message<I>([&] { sim::all_gather(y, 1, 0b10); }) != "");  // {2, 3} differ in dim 0
  const std::string aa = message<I>([&] { sim::all_to_all(y, 0, 0); });
  CHECK(contains(aa, "rank 3"));
  // Scalars have no dim to gather along.
  const auto s = local_tensor<float, M>::replicated(ht<float>({}, {4}));
  CHECK(contains(message<E>([&] { sim::all_gather(s, 0); }), "0 dims"));
  CHECK(sim::all_reduce(s, reduce_op::sum).reconcile().data == std::vector<float>{16});
}

TEST_CASE("comm_counter counts collectives on local tensors", "[collectives][counter]") {
  using M = mesh<2, 3>;  // groups over mesh dim 1: {0,1,2}, {3,4,5}; over dim 0: pairs
  // Rank r holds 4 rows of 5 columns; the uneven dims below give zero-size pieces.
  const local_tensor<float, M> x = sim::rank_map<M>([](index_t r) {
    host_tensor<float> t{{4, 5}, std::vector<float>(20)};
    for (std::size_t k = 0; k < t.data.size(); ++k) t.data[k] = float(r) + float(k);
    return t;
  });
  // Bytes each collective moves, from shapes alone: what every rank holds afterwards that
  // it did not hold before. (The ring reductions: reduce_scatter moves all but the kept
  // piece; all_reduce twice the reduce_scatter of the flattened block.)
  const std::int64_t f = sizeof(float);
  auto numel_sum = [](const auto& t) {
    std::int64_t n = 0;
    for (index_t r = 0; r < M::size; ++r) n += t.numel()[r];
    return n;
  };
  sim::comm_counter outer;
  {
    sim::comm_counter c;
    const auto g = sim::all_gather(x, 0, 0b10);  // 12 rows on every rank
    CHECK(c.count(spmd::step_kind::all_gather) == 1);
    CHECK(c.count(spmd::step_kind::all_gather, 0b10) == 1);
    CHECK(c.count(spmd::step_kind::all_gather, 0b01) == 0);
    CHECK(c.bytes() == (numel_sum(g) - numel_sum(x)) * f);

    const auto rs = sim::reduce_scatter(x, reduce_op::sum, 1, 0b10);  // 5 cols: 2, 2, 1
    CHECK(rs.size(1) == sim::local_int<M>{2, 2, 1, 2, 2, 1});
    CHECK(c.bytes(spmd::step_kind::reduce_scatter) == (numel_sum(x) - numel_sum(rs)) * f);

    // all_reduce of 20 elements over pairs: member j keeps chunk j of 10, 10; receives 2 x 10.
    sim::all_reduce(x, reduce_op::max, 0b01);
    CHECK(c.count(spmd::step_kind::all_reduce, 0b01) == 1);
    CHECK(c.bytes(spmd::step_kind::all_reduce) == M::size * 2 * 10 * f);

    const auto a = sim::all_to_all(x, 0, 1);  // 4 rows over 6 ranks: 1,1,1,1,0,0
    std::int64_t kept = 0;  // the piece each rank keeps of its own shard
    for (index_t r = 0; r < M::size; ++r) kept += (r < 4 ? 1 : 0) * 5;
    CHECK(c.bytes(spmd::step_kind::all_to_all) == (numel_sum(a) - kept) * f);

    sim::broadcast(x, 4);  // 5 ranks receive 20 elements
    sim::broadcast(x, 0, 0b01);
    CHECK(c.count_broadcast() == 2);
    CHECK(c.count_broadcast(0b11) == 1);
    CHECK(c.count_broadcast(0b01) == 1);
    CHECK(c.bytes_broadcast() == (5 * 20 + 3 * 20) * f);
    CHECK(c.total() == 6);
  }
  CHECK(outer.total() == 6);  // nested scopes each see what ran inside them
  sim::all_reduce(x, reduce_op::sum);
  CHECK(outer.count(spmd::step_kind::all_reduce, 0b11) == 1);
}

// The collectives and redistribute's steps are one implementation: on a dtensor's shards, a
// collective over mesh dim 1 gives bit for bit what the one-step redistribute gives, and the
// counter sees the same kind, group and bytes.
TEST_CASE("collectives agree with redistribute steps bit for bit", "[collectives][redistribute]") {
  using M = mesh<2, 3>;
  using E = spmd::extents<5, 7>;  // 5 and 7 do not divide by 3: uneven pieces
  using spmd::partial;
  using spmd::placements;
  using spmd::replicate;
  using spmd::shard;
  std::mt19937 rng(99);
  std::normal_distribution<float> normal;
  std::vector<float> g(35);
  for (float& v : g) v = normal(rng);

  auto same_bits = [](const auto& a, const auto& b) {
    for (index_t r = 0; r < M::size; ++r) {
      const host_tensor<float> x = a.to_local(r), y = b.to_local(r);
      if (x.shape != y.shape || std::memcmp(x.data.data(), y.data.data(),
                                            x.data.size() * sizeof(float)) != 0)
        return false;
    }
    return true;
  };
  auto check_step = [&]<class Src, class Dst>(Src, Dst, spmd::step_kind kind, auto collective) {
    using LS = spmd::layout<M, Src, E>;
    const auto x = sim::distribute_tensor<LS>(g);
    std::int64_t plan_bytes = 0;
    auto y = [&] {
      sim::comm_counter by_plan;
      auto out = sim::to_local_tensor(sim::redistribute<Dst>(x));
      REQUIRE(by_plan.total() == 1);
      REQUIRE(by_plan.count(kind, 0b10) == 1);
      plan_bytes = by_plan.bytes();
      return out;
    }();
    sim::comm_counter by_collective;
    const auto z = collective(sim::to_local_tensor(x));
    CHECK(same_bits(y, z));
    CHECK(by_collective.total() == 1);
    CHECK(by_collective.count(kind, 0b10) == 1);
    CHECK(by_collective.bytes() == plan_bytes);
  };
  constexpr dim_mask dim1 = 0b10;
  check_step(placements<replicate, shard<0>>{}, placements<replicate, replicate>{},
             spmd::step_kind::all_gather, [](const auto& l) { return sim::all_gather(l, 0, dim1); });
  check_step(placements<shard<1>, shard<1>>{}, placements<shard<1>, replicate>{},
             spmd::step_kind::all_gather, [](const auto& l) { return sim::all_gather(l, 1, dim1); });
  check_step(placements<replicate, partial<reduce_op::sum>>{}, placements<replicate, replicate>{},
             spmd::step_kind::all_reduce,
             [](const auto& l) { return sim::all_reduce(l, reduce_op::sum, dim1); });
  check_step(placements<shard<0>, partial<reduce_op::max>>{}, placements<shard<0>, replicate>{},
             spmd::step_kind::all_reduce,
             [](const auto& l) { return sim::all_reduce(l, reduce_op::max, dim1); });
  check_step(placements<replicate, partial<reduce_op::sum>>{}, placements<replicate, shard<1>>{},
             spmd::step_kind::reduce_scatter,
             [](const auto& l) { return sim::reduce_scatter(l, reduce_op::sum, 1, dim1); });
  check_step(placements<replicate, shard<0>>{}, placements<replicate, shard<1>>{},
             spmd::step_kind::all_to_all,
             [](const auto& l) { return sim::all_to_all(l, 1, 0, dim1); });
}
