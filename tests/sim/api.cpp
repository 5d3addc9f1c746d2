// tests/sim/api.cpp — the typed DTensor API of spmd::sim: distribute_tensor / full_tensor
// round trips for every placement, local / to_local / from_local and its errors,
// factories, the communication counter.
#include <stdexcept>
#include <tuple>

#include "api_common.hpp"
#include "spmd/runtime/copy_into.hpp"

namespace {

// ---------------------------------------------------------------------------
// distribute_tensor / full_tensor
// ---------------------------------------------------------------------------


/// Checks of a distributed tensor that depend on the element type only.
template <class T>
void check_distributed(const spmd::layout_spec& spec, const ivec& g, const std::vector<T>& data,
                       const sim::local_set<T>& locals, const std::vector<T>& full,
                       const std::vector<ivec>& shapes, failures& f) {
  const std::string where =
      simref::text(spec) + " on " + simref::text(g) + " " + sim::element_name<T>() + ": ";
  const auto before = locals_of(locals, spec, g);
  for (std::size_t i = 0; i < shapes.size(); ++i)
    if (before[i].shape != shapes[i]) f.add(where + "a local shape is not the layout's");
  if (!std::equal(full.begin(), full.end(), data.begin(), simref::same_bits<T>))
    f.add(where + "full_tensor differs from the data");
  bool partial = false;
  reduce_op op = reduce_op::sum;
  for (const auto& p : spec.placements)
    if (p.is_partial()) {
      partial = true;
      op = p.op;
    }
  if (!partial) {
    if (!simref::compare(simref::slice(spec, g, data), before).empty())
      f.add(where + "a local is not its block");
    return;
  }
  // The reference reduction of the locals gives the data back.
  const auto value = simref::global_value(spec, g, before);
  if (!std::equal(value.begin(), value.end(), data.begin(), simref::same_bits<T>))
    f.add(where + "the locals do not reduce to the data");
  // No rank holds the global value: sum and avg differ on every rank where x != 0; for
  // max and min no rank holds it everywhere.
  for (std::size_t r = 0; r < before.size(); ++r) {
    bool all_equal = true;
    int equal_nonzero = 0;
    for (const ivec& e : simref::elements(before[r].shape, before[r].offset)) {
      index_t i = 0;
      for (std::size_t d = 0; d < e.size(); ++d) i = i * g[d] + e[d];
      const T want = data[static_cast<std::size_t>(i)];
      const bool same = simref::same_bits(want, simref::at(before[r], e));
      all_equal &= same;
      equal_nonzero += same && !(want == T(0));
    }
    if ((op == reduce_op::sum || op == reduce_op::avg) && equal_nonzero > 0)
      f.add(where + "a rank holds the global value");
    if ((op == reduce_op::max || op == reduce_op::min) && all_equal &&
        simref::volume(before[r].shape) > 8)
      f.add(where + "a rank holds the global value everywhere");
  }
}

/// The element-type-specific half of a round trip; `dist` distributes with the typed API and
/// returns the locals, full_tensor and the locals after full_tensor.
template <class T, class Dist>
void round_trip(const spmd::layout_spec& spec, const ivec& g, const std::vector<ivec>& shapes,
                Dist dist, std::mt19937_64& rng, bool real_values, failures& f) {
  std::vector<T> data = integer_data<T>(static_cast<std::size_t>(simref::volume(g)), rng);
  // avg over a group whose size is not a power of two is exact only when n * x is
  // (distribute.hpp): give it integers.
  bool avg = false;
  for (const auto& p : spec.placements) avg |= p.is_partial() && p.op == reduce_op::avg;
  if (real_values && !std::is_integral_v<T> && !avg) {
    std::uniform_real_distribution<double> d(-1, 1);
    for (auto& x : data) x = T(d(rng));
  }
  const auto [before, full, after] = dist(data);
  check_distributed<T>(spec, g, data, before, full, shapes, f);
  if (!simref::compare(locals_of(before, spec, g), locals_of(after, spec, g)).empty())
    f.add(simref::text(spec) + ": full_tensor changed the dtensor");
}

template <class L, class T>
std::tuple<sim::local_set<T>, std::vector<T>, sim::local_set<T>> typed_dist(
    const std::vector<T>& data) {
  const auto x = sim::distribute_tensor<L>(data);
  sim::local_set<T> before = x.locals();
  std::vector<T> full = x.full_tensor();
  return {std::move(before), std::move(full), x.locals()};
}

template <class L>
void round_trip_all_types(std::mt19937_64& rng, failures& f) {
  const L l{};
  const ivec g = global_of(l);
  using M = typename L::mesh_type;
  std::vector<ivec> shapes;
  for (index_t i = 0; i < M::size; ++i) {
    const auto s = l.local_shape(M::rank_at(i));
    shapes.emplace_back(s.begin(), s.end());
  }
  const spmd::layout_spec spec = L::spec();
  round_trip<float>(spec, g, shapes, typed_dist<L, float>, rng, false, f);
  round_trip<float>(spec, g, shapes, typed_dist<L, float>, rng, true, f);
  round_trip<double>(spec, g, shapes, typed_dist<L, double>, rng, true, f);
  // Integer elements have no P(avg) (a compile error; docs/numerics.md).
  if constexpr (!spmd::holds_partial(L::spec().placements, spmd::reduce_op::avg)) {
    round_trip<std::int32_t>(spec, g, shapes, typed_dist<L, std::int32_t>, rng, false, f);
    round_trip<std::int64_t>(spec, g, shapes, typed_dist<L, std::int64_t>, rng, false, f);
  }
  round_trip<spmd::bfloat16>(spec, g, shapes, typed_dist<L, spmd::bfloat16>, rng, false, f);
}

template <class... L>
void round_trips(type_list<L...>, std::mt19937_64& rng, failures& f) {
  (round_trip_all_types<L>(rng, f), ...);
}

}  // namespace

TEST_CASE("distribute_tensor and full_tensor round-trip every placement", "[api]") {
  std::mt19937_64 rng(1);
  failures f;
  using E = extents<10, 3>;
  round_trips(type_list<layout<M4, placements<replicate>, E>, layout<M4, placements<shard<0>>, E>,
                        layout<M4, placements<shard<1>>, E>, layout<M4, placements<P_sum>, E>,
                        layout<M4, placements<P_avg>, E>, layout<M4, placements<P_max>, E>,
                        layout<M4, placements<P_min>, E>, layout<M4, placements<P_prod>, E>>{},
              rng, f);
  using F = extents<7, 5>;
  round_trips(
      type_list<layout<M23, placements<shard<0>, shard<1>>, F>,
                layout<M23, placements<shard<0>, shard<0>>, F>,
                layout<M23, placements<shard<0, 1>, shard<0, 0>>, F>,
                layout<M23, placements<P_sum, shard<1>>, F>, layout<M23, placements<P_sum, P_sum>, F>,
                layout<M23, placements<replicate, P_avg>, F>, layout<M23, placements<P_max, P_max>, F>,
                layout<M23, placements<shard<1>, P_min>, F>, layout<M23, placements<P_prod, replicate>, F>>{},
      rng, f);
  using G = extents<3, 0, 4>;
  using H = extents<4, 6, 5>;
  round_trips(type_list<layout<M222, placements<shard<0>, shard<2>, shard<0>>, H>,
                        layout<M222, placements<P_sum, shard<1>, P_sum>, H>,
                        layout<M222, placements<replicate, P_max, shard<-1>>, H>,
                        layout<M222, placements<shard<1>, shard<0>, P_avg>, G>>{},
              rng, f);
  // Ranks that are not 0..n-1.
  round_trips(type_list<layout<mesh<3>::with_ranks<5, 1, 3>, placements<shard<0>>, extents<5>>,
                        layout<mesh<3>::with_ranks<5, 1, 3>, placements<P_sum>, extents<5>>>{},
              rng, f);
  f.report();
}

TEST_CASE("distribute_tensor checks the size and takes dynamic extents", "[api]") {
  using L = layout<M4, placements<shard<0>>, extents<dyn, 3>>;
  const L l{extents<dyn, 3>(5)};
  std::vector<int> data(15);
  for (int i = 0; i < 15; ++i) data[static_cast<std::size_t>(i)] = i;
  const auto x = sim::distribute_tensor<L>(data, l);
  CHECK(x.local(0).extent(0) == 2);
  CHECK(x.local(3).extent(0) == 0);
  CHECK(x.full_tensor() == data);
  data.pop_back();
  CHECK_THROWS_WITH(sim::distribute_tensor<L>(data, l),
                    "spmd::sim::distribute_tensor: the global data has 14 elements, the shape "
                    "[5, 3] needs 15");
}

TEST_CASE("copy_into writes the source's values into the destination's own memory", "[api]") {
  using L = layout<M4, placements<shard<0>>, extents<dyn, 3>>;
  const L l{extents<dyn, 3>(5)};
  std::vector<int> a(15), b(15);
  for (int i = 0; i < 15; ++i) {
    a[static_cast<std::size_t>(i)] = i;
    b[static_cast<std::size_t>(i)] = 100 - i;
  }
  auto dst = sim::distribute_tensor<L>(a, l);
  const auto alias = dst;  // shares dst's blocks: copy_into must not write through it
  const auto src = sim::distribute_tensor<L>(b, l);
  spmd::runtime::copy_into(dst, src);
  CHECK(dst.full_tensor() == b);
  CHECK(alias.full_tensor() == a);
  CHECK(src.full_tensor() == b);
  CHECK(dst.locals().cdata(0) != src.locals().cdata(0));  // its own memory, not src's
  // Run-time extents: blocks of other sizes are refused, naming the rank and both counts.
  const auto other = sim::distribute_tensor<L>(std::vector<int>(12, 7), L{extents<dyn, 3>(4)});
  CHECK_THROWS_WITH(spmd::runtime::copy_into(dst, other),
                    Catch::Contains("mesh index 0's block has 6 elements in the destination and 3 in the source"));
}

// ---------------------------------------------------------------------------
// local, to_local, from_local
// ---------------------------------------------------------------------------

TEST_CASE("local and to_local by rank id", "[api]") {
  using Q = mesh<3>::with_ranks<5, 1, 3>;
  using L = layout<Q, placements<shard<0>>, extents<5, 2>>;
  const auto x = sim::arange<std::int64_t, L>();
  // Rank 1 is mesh index 1: rows 2..3.
  const auto v = x.local(1);
  CHECK(v.extent(0) == 2);
  CHECK(v(0, 0) == 4);
  CHECK(v(1, 1) == 7);
  const auto t = x.to_local(3);
  CHECK(t.shape == ivec{1, 2});
  CHECK(t.data == std::vector<std::int64_t>{8, 9});
  // A rank outside the mesh holds an empty local.
  CHECK(x.local(0).size() == 0);
  CHECK(x.local(0).rank() == 2);
  CHECK(x.to_local(7).data.empty());
  // A negative rank is no process's: refused, naming it.
  CHECK_THROWS_WITH(x.to_local(-1), Catch::Contains("rank -1 is negative"));
  CHECK_THROWS_AS(x.local(-2), std::out_of_range);
  // Views write through.
  auto y = sim::zeros<float, L>();
  y.local(5)(1, 0) = 3.f;
  CHECK(y.full_tensor()[2] == 3.f);
}

TEST_CASE("from_local checks every rank's shape", "[api]") {
  using M = mesh<2, 4>;
  using L = layout<M, placements<shard<0>, shard<0>>, extents<10, 5>>;  // rows 2,2,1,0 per half
  std::vector<sim::host_tensor<float>> locals;
  std::vector<float> global(50);
  for (int i = 0; i < 50; ++i) global[static_cast<std::size_t>(i)] = static_cast<float>(i);
  const auto x = sim::distribute_tensor<L>(global);
  for (index_t r = 0; r < 8; ++r) locals.push_back(x.to_local(r));
  const auto y = sim::from_local<L>(locals);
  CHECK(y.full_tensor() == global);

  auto bad = locals;
  bad[2] = {{2, 5}, std::vector<float>(10)};
  CHECK_THROWS_WITH(sim::from_local<L>(bad),
                    "spmd::sim::from_local: rank 2 has local shape [2, 5], the layout needs "
                    "[1, 5] (dim 0 differs)");
  bad = locals;
  bad[6] = {{1, 4}, std::vector<float>(4)};
  CHECK_THROWS_WITH(sim::from_local<L>(bad),
                    "spmd::sim::from_local: rank 6 has local shape [1, 4], the layout needs "
                    "[1, 5] (dim 1 differs)");
  bad = locals;
  bad[0] = {{10}, std::vector<float>(10)};
  CHECK_THROWS_WITH(sim::from_local<L>(bad),
                    "spmd::sim::from_local: rank 0 has a local of 1 dims, the layout needs 2 "
                    "([2, 5])");
  bad = locals;
  bad[1].data.pop_back();
  CHECK_THROWS_WITH(sim::from_local<L>(bad),
                    "spmd::sim::from_local: rank 1's local holds 9 elements, its shape [2, 5] "
                    "needs 10");
  bad = locals;
  bad.pop_back();
  CHECK_THROWS_WITH(sim::from_local<L>(bad),
                    "spmd::sim::from_local: got 7 locals, the mesh has 8 ranks");

  // By rank id, on a mesh over other ranks, with dynamic extents.
  using Q = mesh<2>::with_ranks<4, 2>;
  using D = layout<Q, placements<shard<1>>, extents<2, dyn>>;
  const D d{extents<2, dyn>(3)};
  std::map<index_t, sim::host_tensor<int>> by_rank{{4, {{2, 2}, {0, 1, 3, 4}}}, {2, {{2, 1}, {2, 5}}}};
  CHECK(sim::from_local<D>(by_rank, d).full_tensor() == std::vector<int>{0, 1, 2, 3, 4, 5});
  auto missing = by_rank;
  missing.erase(2);
  CHECK_THROWS_WITH(sim::from_local<D>(missing, d), "spmd::sim::from_local: no local for rank 2");
  auto foreign = by_rank;
  foreign[0] = {{2, 1}, {0, 0}};
  CHECK_THROWS_WITH(sim::from_local<D>(foreign, d),
                    "spmd::sim::from_local: rank 0 is not in the mesh");
}

// ---------------------------------------------------------------------------
// Factories
// ---------------------------------------------------------------------------

TEST_CASE("factories hold the asked global value under every placement", "[api]") {
  using E = extents<3, 4>;
  using LS = layout<M23, placements<shard<0>, shard<1>>, E>;
  using LP = layout<M23, placements<P_sum, shard<1>>, E>;
  using LX = layout<M23, placements<replicate, P_max>, E>;
  using LQ = layout<M23, placements<P_prod, P_prod>, E>;
  const std::vector<float> zeros(12, 0.f), ones(12, 1.f), sevens(12, 7.f);
  std::vector<float> iota(12);
  for (int i = 0; i < 12; ++i) iota[static_cast<std::size_t>(i)] = static_cast<float>(i);

  CHECK(sim::zeros<float, LS>().full_tensor() == zeros);
  CHECK(sim::ones<float, LP>().full_tensor() == ones);
  CHECK(sim::full<float, LX>(7.f).full_tensor() == sevens);
  CHECK(sim::full<float, LQ>(7.f).full_tensor() == sevens);
  CHECK(sim::arange<float, LS>().full_tensor() == iota);
  CHECK(sim::arange<float, LP>().full_tensor() == iota);
  CHECK(sim::arange<float, LX>().full_tensor() == iota);
  // arange shards the global index: rank 4, at (1, 1), holds row 2 and columns 2..3 (4
  // columns over 3 ranks: 2, 2, 0).
  const auto a = sim::arange<std::int32_t, LS>();
  CHECK(a.local(4).extent(0) == 1);
  CHECK(a.local(4)(0, 0) == 10);
  CHECK(a.local(4)(0, 1) == 11);
  CHECK(a.local(5).size() == 0);
  // Partial sum: the first member of each group holds the value, the others 0.
  const auto p = sim::ones<std::int64_t, LP>();
  CHECK(p.local(0)(0, 0) == 1);
  CHECK(p.local(3)(0, 0) == 0);
  // Partial max: every rank holds it.
  CHECK(sim::full<double, LX>(2.5).local(4)(1, 1) == 2.5);
  // Partial product: the identity is 1.
  CHECK(sim::full<std::int32_t, LQ>(3).local(4)(0, 0) == 1);
  // empty: shapes only.
  const auto e = sim::empty<spmd::bfloat16, LS>();
  CHECK(e.local(3).extent(0) == 1);
  CHECK(e.local(3).extent(1) == 2);
  // dynamic extents.
  using LD = layout<M4, placements<shard<0>>, extents<dyn>>;
  CHECK(sim::arange<int, LD>(LD{extents<dyn>(6)}).local(2).size() == 2);
}

// ---------------------------------------------------------------------------
// comm_counter
// ---------------------------------------------------------------------------

namespace {
template <class Src, class Dst, class T>
std::int64_t traffic_bytes() {
  std::int64_t b = 0;
  for (const auto& s : spmd::plan_of<Src, Dst, T>::value().steps)
    b += spmd::traffic(s, Src{}.extents().to_vec(), sizeof(T)).total_bytes;
  return b;
}
}  // namespace

TEST_CASE("comm_counter counts collectives by kind, mesh dims and bytes", "[api]") {
  using M = mesh<2, 2>;
  using E = extents<9, 4>;
  using A = layout<M, placements<shard<0>, shard<0>>, E>;
  using RR = layout<M, placements<replicate, replicate>, E>;
  const auto x = sim::arange<float, A>();
  {
    sim::comm_counter outer;
    {
      sim::comm_counter inner;
      const auto y = sim::redistribute<placements<replicate, replicate>>(x);  // one merged gather
      CHECK(inner.count(step_kind::all_gather) == 1);
      CHECK(inner.count(step_kind::all_gather, 0b11) == 1);
      CHECK(inner.count(step_kind::all_gather, 0b01) == 0);
      CHECK(inner.total() == 1);
      // Every rank receives the 36 elements minus its own block (3,2,2,2 rows of 4).
      CHECK(inner.bytes() == 4 * (4 * 36 - 36));
      CHECK(inner.bytes() == traffic_bytes<A, RR, float>());
      CHECK(inner.bytes(step_kind::all_gather) == inner.bytes());
      const auto z = sim::redistribute<placements<shard<1>, replicate>>(y);  // chunk: local
      CHECK(inner.total() == 1);
      CHECK(inner.count(step_kind::chunk) == 0);
    }
    const auto p = sim::arange<std::int64_t, layout<M, placements<P_sum, replicate>, E>>();
    const auto q = sim::redistribute<placements<replicate, replicate>>(p);
    CHECK(outer.count(step_kind::all_reduce, 0b01) == 1);
    CHECK(outer.total() == 2);  // the inner scope's gather too
    CHECK(outer.bytes(step_kind::all_reduce) ==
          traffic_bytes<layout<M, placements<P_sum, replicate>, E>, RR, std::int64_t>());
    // all_reduce over 2 ranks of 36 elements: each receives 2 (36 - 18) elements.
    CHECK(outer.bytes(step_kind::all_reduce) == 4 * 2 * (36 - 18) * 8);
    outer.reset();
    CHECK(outer.total() == 0);
    // The runtime path counts the same.
    const auto rt = sim::execute(spmd::plan_of<A, RR, float>::value(), E{}.to_vec(), x.locals());
    CHECK(outer.count(step_kind::all_gather, 0b11) == 1);
    CHECK(outer.bytes() == traffic_bytes<A, RR, float>());
  }
  // Nothing is counted without a live counter, and counters start at zero.
  const auto y = sim::redistribute<placements<replicate, replicate>>(x);
  sim::comm_counter later;
  CHECK(later.total() == 0);
  CHECK(later.bytes() == 0);
}
