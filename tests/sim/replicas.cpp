// tests/sim/replicas.cpp — replicas stored once (backends/sim/replicas.hpp, local_set::share):
// ranks whose locals are equal by construction hold one buffer, `bytes_held()` counts it
// once, and writing one rank's local changes that rank only (copy on write), as LocalTensor's
// per-rank tensors do.
//
// The values are checked against a plain model: the global tensor each layout's box is cut
// from by index arithmetic written here, and "a write to rank r" applied to a copy of every
// rank's expected local. Memory is checked in whole buffers: a layout whose ranks hold k
// distinct blocks holds k pool blocks (the block of b bytes is the power of two >= b).
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/ops/rule.hpp"
#include "spmd/runtime/ops/apply.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/nn.hpp"

namespace {

using namespace spmd;
namespace sim = spmd::sim;

std::size_t block_of(std::size_t bytes) { return std::max<std::size_t>(64, std::bit_ceil(bytes)); }

std::vector<float> iota(std::size_t n) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.5f - 7.0f;
  return v;
}

/// Every rank's local, as plain vectors.
template <class D>
std::vector<std::vector<float>> locals_of(const D& x) {
  using M = typename D::mesh_type;
  std::vector<std::vector<float>> out;
  for (index_t i = 0; i < M::size; ++i) {
    const auto v = x.local(M::rank_at(i));
    out.emplace_back(v.data(), v.data() + v.size());
  }
  return out;
}

/// The number of distinct buffers among the ranks' locals.
template <class Set>
int distinct(const Set& s) {
  int n = 0;
  for (index_t i = 0; i < s.ranks(); ++i) {
    bool seen = false;
    for (index_t j = 0; j < i; ++j) seen = seen || s.shares(i, j);
    if (!seen && s.size(i) > 0) ++n;
  }
  return n;
}

template <class X>
void check_write_one(X& x, index_t rank) {
  using M = typename X::mesh_type;
  auto before = locals_of(x);
  const std::size_t held = x.bytes_held();
  auto v = x.local(rank);  // write access: rank's local becomes its own
  REQUIRE(v.size() > 0);
  v.data()[0] = 12345.0f;
  before[static_cast<std::size_t>(M::index_of(rank))][0] = 12345.0f;
  CHECK(locals_of(x) == before);  // the other ranks still hold what they held
  const std::size_t one = block_of(static_cast<std::size_t>(v.size()) * sizeof(float));
  CHECK(x.bytes_held() == held + one);
}

}  // namespace

TEST_CASE("replicated layouts hold one buffer; a write copies it for that rank only",
          "[replicas]") {
  using M = mesh<8>;
  using R = layout<M, placements<replicate>, extents<16, 8>>;
  const std::vector<float> g = iota(128);
  auto x = sim::distribute_tensor<R>(g);
  CHECK(distinct(x.locals()) == 1);
  CHECK(x.bytes_held() == 512);
  for (const auto& l : locals_of(x)) CHECK(l == g);
  check_write_one(x, 3);
  CHECK(distinct(x.locals()) == 2);
  CHECK(x.local(2).data()[0] == g[0]);

  auto z = sim::zeros<float, R>();
  CHECK(z.bytes_held() == 512);
  auto a = sim::arange<float, layout<M, placements<partial<reduce_op::sum>>, extents<16, 8>>>();
  CHECK(distinct(a.locals()) == 2);  // the value on rank 0, the identity shared by 1..7
  CHECK(a.full_tensor() == std::vector<float>(sim::arange<float, R>().full_tensor()));
}

TEST_CASE("a copy of a dtensor shares its buffers; writing either leaves the other alone",
          "[replicas]") {
  using M = mesh<2, 2>;
  using L = layout<M, placements<shard<0>, replicate>, extents<8, 4>>;
  const std::vector<float> g = iota(32);
  const auto x = sim::distribute_tensor<L>(g);
  CHECK(distinct(x.locals()) == 2);
  auto y = x;
  for (index_t i = 0; i < 4; ++i) CHECK(y.locals().data(i) == x.locals().data(i));
  check_write_one(y, 1);
  CHECK(x.full_tensor() == g);
  CHECK(locals_of(x)[1][0] == g[0]);
}

TEST_CASE("redistributes to replicated layouts write each distinct block once",
          "[replicas]") {
  const std::vector<float> g = iota(16 * 8);
  SECTION("S(0) -> R, P(sum) -> R, P(max) -> R on 8 ranks (static and dynamic extents)") {
    using M = mesh<8>;
    using S = layout<M, placements<shard<0>>, extents<16, 8>>;
    using P = layout<M, placements<partial<>>, extents<16, 8>>;
    using Pm = layout<M, placements<partial<reduce_op::max>>, extents<16, 8>>;
    using Sd = layout<M, placements<shard<0>>, extents<dyn, 8>>;
    auto r1 = sim::distribute_tensor<S>(g).redistribute<placements<replicate>>();
    auto r2 = sim::distribute_tensor<P>(g).redistribute<placements<replicate>>();
    auto r3 = sim::distribute_tensor<Pm>(g).redistribute<placements<replicate>>();
    auto r4 = sim::distribute_tensor<Sd>(g, Sd{extents<dyn, 8>{16}}).redistribute<placements<replicate>>();
    CHECK(distinct(r1.locals()) == 1);
    CHECK(distinct(r2.locals()) == 1);
    CHECK(distinct(r3.locals()) == 1);
    CHECK(distinct(r4.locals()) == 1);
    CHECK(r1.bytes_held() == 512);
    for (const auto& l : locals_of(r1)) CHECK(l == g);
    for (const auto& l : locals_of(r2)) CHECK(l == g);  // the split reduces exactly
    for (const auto& l : locals_of(r3)) CHECK(l == g);
    for (const auto& l : locals_of(r4)) CHECK(l == g);
    check_write_one(r2, 5);
    check_write_one(r4, 0);
  }
  SECTION("2x4: S(0),S(0) -> R,R (two all_gathers: the second step's groups read one pair)") {
    using M = mesh<2, 4>;
    using S = layout<M, placements<shard<0>, shard<0>>, extents<16, 8>>;
    using Sd = layout<M, placements<shard<0>, shard<0>>, extents<dyn, dyn>>;
    using P = layout<M, placements<partial<>, partial<>>, extents<16, 8>>;
    auto r1 = sim::distribute_tensor<S>(g).redistribute<placements<replicate, replicate>>();
    auto r2 = sim::distribute_tensor<Sd>(g, Sd{extents<dyn, dyn>{16, 8}})
                  .redistribute<placements<replicate, replicate>>();
    auto r3 = sim::distribute_tensor<P>(g).redistribute<placements<replicate, replicate>>();
    CHECK(distinct(r1.locals()) == 1);
    CHECK(distinct(r2.locals()) == 1);
    CHECK(distinct(r3.locals()) == 1);
    for (const auto& l : locals_of(r1)) CHECK(l == g);
    for (const auto& l : locals_of(r2)) CHECK(l == g);
    for (const auto& l : locals_of(r3)) CHECK(l == g);
    // R,R -> S(0),R: ranks of one row of the mesh read one buffer the same way
    auto s = r1.redistribute<placements<shard<0>, replicate>>();
    CHECK(distinct(s.locals()) == 2);
    CHECK(s.full_tensor() == g);
    check_write_one(s, 4);          // coordinate (1, 0): the block full_tensor reads
    CHECK(s.full_tensor() != g);
    CHECK(r1.full_tensor() == g);
  }
  SECTION("a const input is shared, never written: keep, chunk and in-place all_reduce") {
    using M = mesh<4>;
    using P = layout<M, placements<partial<>>, extents<16, 8>>;
    const auto x = sim::distribute_tensor<P>(g);
    const auto before = locals_of(x);
    auto same = x.redistribute<placements<partial<>>>();
    for (index_t i = 0; i < 4; ++i)
      CHECK(std::as_const(same.locals()).data(i) == x.locals().data(i));  // no copy
    auto y = x;                                            // shares every buffer with x
    auto r = std::move(y).redistribute<placements<replicate>>();  // all_reduce "in place"
    CHECK(locals_of(x) == before);                         // x's buffers were not written
    for (const auto& l : locals_of(r)) CHECK(l == g);
    auto xr = sim::distribute_tensor<layout<M, placements<replicate>, extents<16, 8>>>(g);
    auto xr2 = xr;
    auto c = std::move(xr2).redistribute<placements<shard<1>>>();  // chunk "in place"
    CHECK(xr.full_tensor() == g);
    CHECK(c.full_tensor() == g);
    CHECK(distinct(c.locals()) == 4);
  }
}

TEST_CASE("local tensors: replicated(), all_reduce, all_gather and broadcast share",
          "[replicas]") {
  using M = mesh<2, 2>;
  using T = sim::local_tensor<float, M>;
  const sim::host_tensor<float> t{{2, 3}, {1, 2, 3, 4, 5, 6}};
  T r = T::replicated(t);
  CHECK(r.bytes_held() == 64);
  CHECK(distinct(r.shards()) == 1);
  r.local(2).data()[1] = -1;  // rank 2 only
  CHECK(r.to_local(2).data == std::vector<float>{1, -1, 3, 4, 5, 6});
  for (index_t k : {0, 1, 3}) CHECK(r.to_local(k).data == t.data);
  CHECK(r.bytes_held() == 128);

  const T s = sim::all_reduce(r, reduce_op::sum);
  CHECK(distinct(s.shards()) == 1);
  CHECK(s.to_local(3).data == std::vector<float>{4, 5, 12, 16, 20, 24});
  const T rows = sim::all_reduce(r, reduce_op::max, 0b01);  // groups {0,2} and {1,3}
  CHECK(distinct(rows.shards()) == 2);
  CHECK(rows.to_local(0).data == std::vector<float>{1, 2, 3, 4, 5, 6});
  const T b = sim::broadcast(r, 2);
  CHECK(distinct(b.shards()) == 1);
  CHECK(b.shards().data(0) == r.shards().data(2));  // the source's own block
  const T gth = sim::all_gather(r, 0, 0b10);         // groups {0,1} and {2,3}
  CHECK(distinct(gth.shards()) == 2);
  CHECK(gth.to_local(3).data ==
        std::vector<float>{1, -1, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6});
}

TEST_CASE("64 ranks (8x8): a replicated weight is held once", "[replicas]") {
  using M = mesh<8, 8>;
  using R = layout<M, placements<replicate, replicate>, extents<dyn, dyn>>;
  const std::vector<float> g = iota(256 * 64);
  auto w = sim::distribute_tensor<R>(g, R{extents<dyn, dyn>{256, 64}});
  CHECK(w.bytes_held() == 256 * 64 * 4);
  auto s = w.redistribute<placements<shard<0>, replicate>>();  // 8 distinct blocks
  CHECK(distinct(s.locals()) == 8);
  auto back = s.redistribute<placements<replicate, replicate>>();
  CHECK(distinct(back.locals()) == 1);
  CHECK(back.full_tensor() == g);
}

namespace {

/// A user's op whose result depends on the rank: replicas must not share its results.
struct plus_rank {
  static constexpr ops::op_rule rule(const ops::op_context&) { return ops::einsum("ij->ij"); }
  static constexpr shape_vec out_shape(const svec<shape_vec, ops::max_op_inputs>& in) {
    return in[0];
  }
  template <class T>
  void local(sim::strided_view<T> out, const sim::op_rank_info& info,
             sim::strided_view<const T> x) const {
    for (index_t k = 0; k < x.size(); ++k) out.data()[k] = x.data()[k] + static_cast<T>(info.rank);
  }
};

}  // namespace

TEST_CASE("operators on replicas compute each distinct block once", "[replicas]") {
  using M = mesh<2, 4>;
  using L = layout<M, placements<shard<0>, replicate>, extents<8, 6>>;
  using R = layout<M, placements<replicate, replicate>, extents<6>>;
  const std::vector<float> g = iota(48), b = iota(6);
  const auto x = sim::distribute_tensor<L>(g);
  const auto bias = sim::distribute_tensor<R>(b);
  REQUIRE(distinct(x.locals()) == 2);
  auto y = sim::relu(x + bias);  // replicated over mesh dim 1: one block per row of the mesh
  CHECK(distinct(y.locals()) == 2);
  std::vector<float> want(48);
  for (std::size_t i = 0; i < 48; ++i) want[i] = std::max(0.0f, g[i] + b[i % 6]);
  CHECK(y.full_tensor() == want);
  for (index_t r = 0; r < 8; ++r) {
    const auto v = y.local(r);
    const std::size_t row0 = static_cast<std::size_t>(r / 4) * 24;
    CHECK(std::vector<float>(v.data(), v.data() + v.size()) ==
          std::vector<float>(want.begin() + static_cast<std::ptrdiff_t>(row0),
                             want.begin() + static_cast<std::ptrdiff_t>(row0 + 24)));
  }
  // a rank whose input was written holds its own input: it computes its own result
  auto x2 = x;
  x2.local(5).data()[0] = 100.0f;
  auto y2 = sim::relu(x2 + bias);
  CHECK(distinct(y2.locals()) == 3);
  CHECK(y2.local(5).data()[0] == 100.0f + b[0]);
  CHECK(y2.local(4).data()[0] == want[24]);
  // a user's op may depend on the rank: never shared
  const auto s = sim::apply(plus_rank{}, x);
  CHECK(distinct(s.locals()) == 8);
  for (index_t r = 0; r < 8; ++r) CHECK(s.local(r).data()[1] == g[static_cast<std::size_t>(r / 4) * 24 + 1] + static_cast<float>(r));
}

TEST_CASE("an embedding on a replicated mesh dim computes each distinct block once", "[replicas]") {
  // The op reads its weight block's offset (which vocabulary rows it holds): on a Replicate
  // dim that offset is the same for every rank, so the twins' blocks are still equal.
  using M = mesh<2, 4>;
  constexpr index_t V = 5, H = 3;
  const std::vector<std::int64_t> ids{4, 0, 2, 2, 1, 3, 0, 4};
  const std::vector<float> w = iota(V * H);
  std::vector<float> want;
  for (const std::int64_t id : ids)
    for (index_t k = 0; k < H; ++k) want.push_back(w[static_cast<std::size_t>(id * H + k)]);
  const auto tokens = sim::distribute_tensor<layout<M, placements<shard<0>, replicate>, extents<8>>>(ids);
  const auto y = sim::embedding(tokens, sim::distribute_tensor<layout<M, placements<replicate, replicate>, extents<V, H>>>(w));
  CHECK(distinct(y.locals()) == 2);
  CHECK(y.full_tensor() == want);
  // Vocabulary rows split over mesh dim 1: each rank's masked block is its own.
  const auto rows = sim::embedding(
      tokens, sim::distribute_tensor<layout<M, placements<replicate, shard<0>>, extents<V, H>>>(w));
  static_assert(std::is_same_v<decltype(rows)::placements_type, placements<shard<0>, partial<reduce_op::sum>>>);
  CHECK(distinct(rows.locals()) == 8);
  CHECK(rows.full_tensor() == want);
}

namespace {

/// The rule the twin search follows, as it was written before it was sorted by key: for each
/// held r, the first held q < r with same(q, r), by comparing every earlier rank.
template <class Same>
std::vector<index_t> twins_by_scan(host::held_range held, index_t n, Same&& same) {
  std::vector<index_t> out(static_cast<std::size_t>(n), -1);
  for (index_t r = held.lo; r < held.hi; ++r)
    for (index_t q = held.lo; q < r; ++q)
      if (same(q, r)) {
        out[static_cast<std::size_t>(r)] = q;
        break;
      }
  return out;
}

}  // namespace

TEST_CASE("many ranks: each rank shares the first equal block, found by key", "[replicas]") {
  // distribute and the factories find replicas by sorting the ranks on a key of their block
  // (n log n; comparing every earlier rank took 87 s at 65,536 ranks). Against the scan, on a
  // 2-d mesh of 1,536 ranks, uneven and empty blocks, Partial splits, and a process's part.
  const mesh_shape_vec mesh = parse_mesh("48x32");
  const shape_vec global = parse_shape("100,7");
  int layouts = 0;
  for (const char* p : {"S(0),R", "R,S(1)", "S(0),S(0)", "S(1),S(0)", "P,S(1)", "S(0),P(max)", "R,R", "P,P"}) {
    const layout_spec spec = checked_spec(mesh, parse_placements(p), 2);
    const index_t n = spec.mesh_size();
    const std::vector<host::detail::rank_slice> plan = host::detail::slices(spec, global);
    for (const host::held_range held : {host::held_range{0, n}, host::held_range{517, 1203}}) {
      const auto same_slice = [&](index_t q, index_t r) {
        const auto& a = plan[static_cast<std::size_t>(q)];
        const auto& b = plan[static_cast<std::size_t>(r)];
        return a.part == b.part && a.shape == b.shape && a.geo == b.geo;
      };
      CHECK(host::detail::slice_twins(plan, n, held) == twins_by_scan(held, n, same_slice));
      const auto same_generated = [&](index_t q, index_t r) {
        const local_box a = box_at(spec, global, unravel(spec.mesh, q));
        const local_box b = box_at(spec, global, unravel(spec.mesh, r));
        const bool ia = host::holds_identity(spec, q), ib = host::holds_identity(spec, r);
        return ia == ib && a.shape == b.shape && (ia || a.offset == b.offset);
      };
      CHECK(host::generated_twins(spec, global, held) == twins_by_scan(held, n, same_generated));
    }
    // And the data: every rank's block is the global tensor's, replicas held once.
    const std::vector<float> g = iota(700);
    const host::local_set<float> set = sim::distribute<float>(std::span<const float>(g), spec, global);
    CHECK(host::full_tensor<float>(set, spec, global) == g);
    ++layouts;
  }
  CHECK(layouts == 8);
  // Keys that all collide still give the scan's answer: equal ranks are compared, not keys.
  const auto same_mod = [](index_t q, index_t r) { return q % 7 == r % 7; };
  CHECK(first_equal(300, [](index_t r) { return r >= 40; }, [](index_t) { return std::uint64_t{1}; }, same_mod) ==
        twins_by_scan(host::held_range{40, 300}, 300, same_mod));
}

TEST_CASE("a step's twins: the first earlier rank with the same shape and ops, found by key", "[replicas]") {
  // build_replica_plan's candidates against the scan that defines them, on the steps of
  // plans between layouts of a 2-d mesh (uneven blocks, empty ones, every step kind).
  const mesh_shape_vec mesh = parse_mesh("12x8");
  const shape_vec global = parse_shape("50,30");
  const char* layouts[] = {"R,R", "S(0),R", "R,S(0)", "S(0),S(1)", "S(1),S(0)", "P,R", "R,P", "S(0),S(0)"};
  int steps = 0, with_twins = 0;
  for (const char* a : layouts)
    for (const char* b : layouts) {
      const plan_result r = make_plan(checked_spec(mesh, parse_placements(a), 2),
                                      checked_spec(mesh, parse_placements(b), 2), 6000.0);
      REQUIRE(r.ok());
      for (const step_schedule& s : build_schedules(r.value, global)) {
        const sim::replica_plan p = sim::build_replica_plan(s);
        const index_t n = static_cast<index_t>(s.ranks.size());
        const auto ops_of = [&](index_t x) {
          std::vector<sched_op> v;
          for (const sched_op& o : s.ops)
            if (o.code != op_code::replicate && o.dst == x) v.push_back(o);
          return v;
        };
        const auto same_ops = [&](index_t q, index_t x) {
          const std::vector<sched_op> u = ops_of(q), v = ops_of(x);
          if (u.empty() || u.size() != v.size()) return false;
          for (std::size_t k = 0; k < u.size(); ++k)
            if (u[k].code != v[k].code || !(u[k].geo == v[k].geo)) return false;
          return true;
        };
        std::vector<index_t> want(static_cast<std::size_t>(n), -1);
        for (index_t x = 0; x < n; ++x) {
          const rank_plan& px = s.ranks[static_cast<std::size_t>(x)];
          if (p.from[static_cast<std::size_t>(x)] >= 0 || px.how == disposition::keep || px.elems == 0) continue;
          for (index_t q = 0; q < x; ++q) {
            const rank_plan& pq = s.ranks[static_cast<std::size_t>(q)];
            if (p.from[static_cast<std::size_t>(q)] < 0 && pq.how != disposition::keep && pq.shape == px.shape &&
                same_ops(q, x)) {
              want[static_cast<std::size_t>(x)] = q;
              break;
            }
          }
        }
        CHECK(p.twin == want);
        ++steps;
        with_twins += std::any_of(want.begin(), want.end(), [](index_t t) { return t >= 0; });
      }
    }
  CHECK(steps > 50);
  CHECK(with_twins > 5);  // the cases exercise the search, not only its empty answer
}
