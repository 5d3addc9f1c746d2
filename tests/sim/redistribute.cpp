// tests/sim/redistribute.cpp — redistribute on the compile-time path, against the runtime
// path on the same plan and the reference model along it; dynamic extents, large meshes,
// another planner, forward_dtype.
#include "api_common.hpp"

// ---------------------------------------------------------------------------
// redistribute: the compile-time path against the runtime path and the reference
// ---------------------------------------------------------------------------

TEST_CASE("redistribute on 1-d meshes", "[api]") {
  std::mt19937_64 rng(2);
  failures f;
  using E = extents<10, 6>;  // uneven over 4 rows-wise, even column-wise... 6 over 4: 2,2,2,0
  using S0 = layout<M4, placements<shard<0>>, E>;
  using R = layout<M4, placements<replicate>, E>;
  using P = layout<M4, placements<P_sum>, E>;
  check_redistribute<S0, placements<replicate>, float>(rng, f);
  check_redistribute<S0, placements<shard<1>>, float>(rng, f);
  check_redistribute<S0, placements<P_max>, std::int32_t>(rng, f);
  check_redistribute<R, placements<shard<1>>, double>(rng, f);
  check_redistribute<R, placements<P_sum>, std::int64_t>(rng, f);
  check_redistribute<R, placements<P_avg>, float>(rng, f);
  check_redistribute<P, placements<replicate>, float>(rng, f);
  check_redistribute<P, placements<shard<0>>, spmd::bfloat16>(rng, f);
  check_redistribute<P, placements<P_min>, std::int64_t>(rng, f);  // via R
  check_redistribute<layout<M4, placements<P_avg>, E>, placements<shard<1>>, double>(rng, f);
  check_redistribute<layout<M4, placements<P_prod>, extents<3>>, placements<replicate>, float>(rng, f);
  // Zero-size tensors and shards.
  check_redistribute<layout<M4, placements<shard<0>>, extents<0, 3>>, placements<shard<1>>, float>(rng, f);
  check_redistribute<layout<M4, placements<shard<0>>, extents<2>>, placements<replicate>, float>(rng, f);
  // The same plan to the same layout: a copy.
  check_redistribute<S0, placements<shard<0>>, float>(rng, f);
  f.report();
}

TEST_CASE("redistribute on 2-d and 3-d meshes, nested and merged", "[api]") {
  std::mt19937_64 rng(3);
  failures f;
  using E = extents<7, 5>;
  using A = layout<M23, placements<shard<0>, shard<1>>, E>;
  check_redistribute<A, placements<replicate, replicate>, float>(rng, f);
  check_redistribute<A, placements<shard<1>, shard<0>>, std::int64_t>(rng, f);
  check_redistribute<A, placements<shard<0>, shard<0>>, float>(rng, f);
  check_redistribute<layout<M23, placements<shard<0>, shard<0>>, E>, placements<replicate, replicate>,
                     std::int32_t>(rng, f);
  check_redistribute<layout<M23, placements<shard<0, 1>, shard<0, 0>>, E>,
                     placements<shard<0>, shard<0>>, float>(rng, f);
  check_redistribute<layout<M23, placements<P_sum, P_sum>, E>, placements<shard<0>, shard<1>>,
                     double>(rng, f);
  check_redistribute<layout<M23, placements<shard<0>, P_sum>, E>, placements<replicate, replicate>,
                     float>(rng, f);
  check_redistribute<layout<M23, placements<replicate, replicate>, E>, placements<P_max, shard<0>>,
                     spmd::bfloat16>(rng, f);
  using H = extents<4, 6, 5>;
  check_redistribute<layout<M222, placements<shard<0>, shard<1>, shard<2>>, H>,
                     placements<shard<2>, shard<1>, shard<0>>, float>(rng, f);
  check_redistribute<layout<M222, placements<shard<0>, shard<0>, shard<0>>, H>,
                     placements<replicate, replicate, replicate>, std::int64_t>(rng, f);
  check_redistribute<layout<M222, placements<P_sum, shard<1>, P_sum>, H>,
                     placements<replicate, shard<0>, shard<2>>, float>(rng, f);
  check_redistribute<layout<mesh<2, 1, 3>, placements<shard<0>, shard<1>, replicate>, extents<5, 4>>,
                     placements<replicate, replicate, shard<1>>, float>(rng, f);
  f.report();
}

TEST_CASE("redistribute with dynamic extents and on a large mesh", "[api]") {
  std::mt19937_64 rng(4);
  failures f;
  using ED = extents<dyn, 5>;
  using A = layout<M23, placements<shard<0>, shard<1>>, ED>;
  check_redistribute<A, placements<shard<1>, replicate>, float>(rng, f, A{ED(9)});
  check_redistribute<A, placements<shard<1>, replicate>, float>(rng, f, A{ED(2)});  // other shape
  check_redistribute<A, placements<P_sum, replicate>, std::int64_t>(rng, f, A{ED(4)});
  // 32 ranks: the all_to_all has more ops than are unrolled (a loop over constant ops).
  using B = layout<mesh<32>, placements<shard<0>>, extents<40, 64>>;
  check_redistribute<B, placements<shard<1>>, float>(rng, f);
  check_redistribute<B, placements<replicate>, std::int32_t>(rng, f);
  // 2 MiB: the all_to_all's pieces run as a bundle (row by row, streaming stores).
  check_redistribute<layout<mesh<2>, placements<shard<0>>, extents<1024, 512>>,
                     placements<shard<1>>, float>(rng, f);
  // 128 ranks: more than the compile-time path takes; the runtime path with cached schedules.
  check_redistribute<layout<mesh<128>, placements<shard<0>>, extents<130, 2>>,
                     placements<replicate>, float>(rng, f);
  f.report();
}

TEST_CASE("redistribute leaves the source alone and works as a member", "[api]") {
  using L = layout<M4, placements<P_sum>, extents<6>>;
  const auto x = sim::arange<float, L>();
  const auto before = x.full_tensor();
  const float* p0 = x.local(0).data();
  const auto y = x.redistribute<placements<shard<0>>>();
  CHECK(x.full_tensor() == before);
  CHECK(x.local(0).data() == p0);
  CHECK(y.full_tensor() == before);
  auto z = sim::arange<float, L>().redistribute<placements<replicate>>();
  CHECK(z.local(3).size() == 6);
}

namespace {
// A hand-written planner: through R (gather every shard, then chunk), one mesh dim at a
// time. Works for default shard orders.
template <class Src, class Dst, class T>
struct through_replicate {
  static constexpr spmd::plan value() {
    spmd::plan p{};
    spmd::layout_spec cur = Src::spec();
    const spmd::layout_spec dst = Dst::spec();
    for (int m = cur.placements.size() - 1; m >= 0; --m) {
      if (!cur.placements[m].is_shard()) continue;
      spmd::placement_vec v = cur.placements;
      v[m] = spmd::make_replicate();
      for (auto& q : v)
        if (q.is_shard()) q.order = spmd::default_order;
      const auto next = spmd::make_spec(cur.mesh, v, cur.tensor_rank).spec;
      p.steps.push_back({step_kind::all_gather, 1u << m, reduce_op::sum, cur, next});
      cur = next;
    }
    for (int m = 0; m < cur.placements.size(); ++m) {
      if (!dst.placements[m].is_shard()) continue;
      spmd::placement_vec v = cur.placements;
      v[m] = dst.placements[m];
      v[m].order = spmd::default_order;
      for (auto& q : v)
        if (q.is_shard()) q.order = spmd::default_order;
      const auto next = spmd::make_spec(cur.mesh, v, cur.tensor_rank).spec;
      p.steps.push_back({step_kind::chunk, 1u << m, reduce_op::sum, cur, next});
      cur = next;
    }
    return p;
  }
};
}  // namespace

TEST_CASE("redistribute takes another planner", "[api]") {
  using L = layout<M23, placements<shard<0>, shard<1>>, extents<7, 5>>;
  std::vector<int> data(35);
  for (int i = 0; i < 35; ++i) data[static_cast<std::size_t>(i)] = i;
  const auto x = sim::distribute_tensor<L>(data);
  sim::comm_counter comm;
  const auto y = sim::redistribute<placements<shard<1>, shard<0>>, through_replicate>(x);
  CHECK(y.full_tensor() == data);
  CHECK(comm.count(step_kind::all_gather) == 2);  // not the planner's single all_to_all
  CHECK(comm.count(step_kind::all_to_all) == 0);
  const auto z = sim::redistribute<placements<shard<1>, shard<0>>>(x);
  CHECK(comm.count(step_kind::all_to_all) == 1);
  CHECK(simref::compare(locals_of(y.locals(), decltype(y)::layout_type::spec(), {7, 5}),
                        locals_of(z.locals(), decltype(z)::layout_type::spec(), {7, 5}))
            .empty());
}

// ---------------------------------------------------------------------------
// forward_dtype
// ---------------------------------------------------------------------------

TEST_CASE("forward_dtype communicates in another element type", "[api]") {
  using L = layout<M4, placements<P_sum>, extents<8, 3>>;
  std::vector<float> exact(24), fine(24);
  for (int i = 0; i < 24; ++i) {
    exact[static_cast<std::size_t>(i)] = static_cast<float>(i - 12);          // bf16-exact
    fine[static_cast<std::size_t>(i)] = 1.0f + static_cast<float>(i) / 1024;  // not
  }
  const auto x = sim::distribute_tensor<L>(exact);
  sim::comm_counter comm;
  const auto y = sim::redistribute<placements<replicate>>(x, sim::forward_dtype<spmd::bfloat16>);
  static_assert(std::is_same_v<decltype(y)::value_type, float>);
  CHECK(y.full_tensor() == exact);
  const std::int64_t bf16_bytes = comm.bytes();
  const auto y32 = sim::redistribute<placements<replicate>>(x);
  CHECK(comm.bytes() - bf16_bytes == 2 * bf16_bytes);  // float moves twice the bytes

  // Values bfloat16 cannot hold come back rounded, exactly as cast-run-cast.
  using R = layout<M4, placements<replicate>, extents<8, 3>>;
  const auto r = sim::distribute_tensor<R>(fine);
  const auto s = sim::redistribute<placements<shard<0>>>(r, sim::forward_dtype<spmd::bfloat16>);
  const auto full = s.full_tensor();
  for (std::size_t i = 0; i < 24; ++i)
    CHECK(full[i] == static_cast<float>(spmd::bfloat16{fine[i]}));
  // Wider and same types.
  CHECK(sim::redistribute<placements<shard<1>>>(r, sim::forward_dtype<double>).full_tensor() == fine);
  CHECK(sim::redistribute<placements<shard<1>>>(r, sim::forward_dtype<float>).full_tensor() == fine);
  const auto i32 = sim::redistribute<placements<replicate>>(sim::distribute_tensor<L>(exact),
                                                            sim::forward_dtype<std::int32_t>);
  CHECK(i32.full_tensor() == exact);
}

