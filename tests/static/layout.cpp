// tests/static/layout.cpp — spmd::layout: local shapes, offsets and extents types.
#include <type_traits>

#include <spmd/spmd.hpp>

namespace {

using spmd::dims;
using spmd::dyn;
using spmd::extents;
using spmd::partial;
using spmd::placements;
using spmd::reduce_op;
using spmd::replicate;
using spmd::shard;

template <class A, class B>
inline constexpr bool same = std::is_same_v<std::remove_cvref_t<A>, B>;

// ---------------------------------------------------------------------------
// The tour: (10, 5) on mesh (2, 4) with [S0, S0] → rows 5 | 5, then 2, 2, 1, 0
// ---------------------------------------------------------------------------
using M = spmd::mesh<2, 4>;
using L = spmd::layout<M, placements<shard<0>, shard<0>>, extents<10, 5>>;
static_assert(L::rank == 2 && L{}.global_shape() == dims<2>{10, 5});
static_assert(L{}.local_shape(0) == dims<2>{2, 5} && L{}.global_offset(0) == dims<2>{0, 0});
static_assert(L{}.local_shape(1) == dims<2>{2, 5} && L{}.global_offset(1) == dims<2>{2, 0});
static_assert(L{}.local_shape(2) == dims<2>{1, 5} && L{}.global_offset(2) == dims<2>{4, 0});
static_assert(L{}.local_shape(3) == dims<2>{0, 5});
static_assert(L{}.global_offset(3) == dims<2>{10, 0});  // zero-size shard: offset = global extent
static_assert(L{}.local_shape(5) == dims<2>{2, 5} && L{}.global_offset(5) == dims<2>{7, 0});
static_assert(L{}.local_shape(6) == dims<2>{1, 5} && L{}.global_offset(6) == dims<2>{9, 0});
static_assert(L{}.global_offset(7) == dims<2>{10, 0});
static_assert(L{}.block_at({1, 2}) == L{}.block_of(6));
static_assert(L{}.block_of(6).shape == dims<2>{1, 5} && L{}.block_of(6).offset == dims<2>{9, 0});
static_assert(L{}.local_size(1) == 10 && L{}.local_size(3) == 0);

// Static extents: every local_extents<Rank> is a fully static type.
static_assert(same<decltype(L{}.local_extents<1>()), extents<2, 5>>);
static_assert(same<decltype(L{}.local_extents<2>()), extents<1, 5>>);
static_assert(same<decltype(L{}.local_extents<3>()), extents<0, 5>>);
static_assert(same<decltype(L{}.local_extents<6>()), extents<1, 5>>);
// Not uniform along dim 0 (5 rows over 4), uniform along dim 1.
static_assert(!L{}.uniform(0) && L{}.uniform(1));
static_assert(same<decltype(L{}.uniform_local_extents()), extents<dyn, 5>>);
static_assert(L{}.uniform_local_extents().extent(0) == 2);  // rank 0's value

// A fully static layout is an empty object.
static_assert(std::is_empty_v<L> && sizeof(L) == 1);
static_assert(std::is_trivially_copyable_v<L>);
static_assert(same<L::mesh_type, M> && same<L::extents_type, extents<10, 5>>);
static_assert(same<L::placements_type, placements<shard<0>, shard<0>>>);

// ---------------------------------------------------------------------------
// Replicate and partial do not split
// ---------------------------------------------------------------------------
using RP =
    spmd::layout<spmd::mesh<2, 3>, placements<replicate, partial<reduce_op::max>>, extents<7, 3>>;
constexpr bool whole_everywhere() {
  for (spmd::index_t r = 0; r < 6; ++r)
    if (!(RP{}.local_shape(r) == dims<2>{7, 3}) || !(RP{}.global_offset(r) == dims<2>{0, 0}))
      return false;
  return true;
}
static_assert(whole_everywhere());
static_assert(RP{}.uniform(0) && RP{}.uniform(1));
static_assert(same<decltype(RP{}.uniform_local_extents()), extents<7, 3>>);
static_assert(same<decltype(RP{}.local_extents<4>()), extents<7, 3>>);
// A shard next to partial / replicate splits only over its own mesh dim.
using SP = spmd::layout<spmd::mesh<2, 3>, placements<partial<>, shard<1>>, extents<4, 7>>;
static_assert(SP{}.local_shape(0) == dims<2>{4, 3} && SP{}.local_shape(3) == dims<2>{4, 3});
static_assert(SP{}.local_shape(5) == dims<2>{4, 1} && SP{}.global_offset(5) == dims<2>{0, 6});
static_assert(same<decltype(SP{}.uniform_local_extents()), extents<4, dyn>>);
// Two partials with the same op are fine.
using PP = spmd::layout<spmd::mesh<2, 2>,
                        placements<partial<reduce_op::avg>, partial<reduce_op::avg>>, extents<3>>;
static_assert(PP{}.local_shape(3) == dims<1>{3});

// ---------------------------------------------------------------------------
// Both dims sharded; uniform_local_extents keeps exactly the dims that split evenly
// ---------------------------------------------------------------------------
using B = spmd::layout<M, placements<shard<0>, shard<1>>, extents<8, 6>>;
static_assert(B{}.local_shape(7) == dims<2>{4, 0} && B{}.global_offset(7) == dims<2>{4, 6});
static_assert(B{}.local_shape(6) == dims<2>{4, 2} && B{}.global_offset(6) == dims<2>{4, 4});
static_assert(same<decltype(B{}.uniform_local_extents()), extents<4, dyn>>);
static_assert(same<decltype(B{}.local_extents<7>()), extents<4, 0>>);
using E = spmd::layout<M, placements<shard<1>, shard<0>>, extents<12, 6>>;
static_assert(same<decltype(E{}.uniform_local_extents()), extents<3, 3>>);
static_assert(E{}.uniform(0) && E{}.uniform(1));

// ---------------------------------------------------------------------------
// Negative shard dims count from the end
// ---------------------------------------------------------------------------
using Neg = spmd::layout<spmd::mesh<4>, placements<shard<-1>>, extents<3, 5>>;
using Pos = spmd::layout<spmd::mesh<4>, placements<shard<1>>, extents<3, 5>>;
static_assert(Neg::spec() == Pos::spec());
static_assert(Neg::spec().placements[0].dim == 1);
static_assert(Neg{}.local_shape(3) == dims<2>{3, 0} && Neg{}.global_offset(3) == dims<2>{0, 5});
static_assert(Neg{}.block_of(2) == Pos{}.block_of(2));
using Neg2 = spmd::layout<M, placements<shard<-2>, shard<-1>>, extents<3, 5>>;
static_assert(Neg2::spec() ==
              spmd::layout<M, placements<shard<0>, shard<1>>, extents<3, 5>>::spec());
static_assert(Neg2{}.local_shape(5) == dims<2>{1, 2} && Neg2{}.global_offset(5) == dims<2>{2, 2});

// ---------------------------------------------------------------------------
// Zero-size shards and zero extents
// ---------------------------------------------------------------------------
using Z = spmd::layout<spmd::mesh<4>, placements<shard<0>>, extents<3, 2>>;
static_assert(Z{}.local_shape(3) == dims<2>{0, 2} && Z{}.global_offset(3) == dims<2>{3, 0});
using Z0 = spmd::layout<spmd::mesh<3>, placements<shard<0>>, extents<0, 4>>;
static_assert(Z0{}.local_shape(1) == dims<2>{0, 4} && Z0{}.global_offset(1) == dims<2>{0, 0});
static_assert(same<decltype(Z0{}.uniform_local_extents()), extents<0, 4>>);  // 0 splits evenly
using Z1 = spmd::layout<spmd::mesh<2, 2>, placements<shard<0>, shard<0>>, extents<1>>;
static_assert(Z1{}.local_shape(0) == dims<1>{1} && Z1{}.global_offset(0) == dims<1>{0});
static_assert(Z1{}.local_shape(1) == dims<1>{0} && Z1{}.global_offset(1) == dims<1>{1});
static_assert(Z1{}.local_shape(2) == dims<1>{0} && Z1{}.global_offset(2) == dims<1>{1});
static_assert(Z1{}.global_offset(3) == dims<1>{1});  // empty at the first level, stays at 1

// A scalar (rank-0 tensor) on a mesh: every rank holds it.
using S0 = spmd::layout<spmd::mesh<2>, placements<partial<>>, extents<>>;
static_assert(S0::rank == 0 && S0{}.local_size(1) == 1 && S0{}.local_shape(1) == dims<0>{});
static_assert(same<decltype(S0{}.local_extents<1>()), extents<>>);

// ---------------------------------------------------------------------------
// Meshes over some ranks: ranks outside hold an empty block
// ---------------------------------------------------------------------------
using Q = spmd::mesh<4>::with_ranks<0, 2, 4, 6>;
using LQ = spmd::layout<Q, placements<shard<0>>, extents<5, 2>>;
static_assert(LQ{}.local_shape(4) == dims<2>{1, 2} && LQ{}.global_offset(4) == dims<2>{4, 0});
static_assert(LQ{}.local_shape(6) == dims<2>{0, 2} && LQ{}.global_offset(6) == dims<2>{5, 0});
static_assert(LQ{}.local_shape(1) == dims<2>{0, 0} && LQ{}.global_offset(1) == dims<2>{5, 2});
static_assert(LQ{}.local_size(3) == 0 && LQ{}.local_size(2) == 4);
static_assert(same<decltype(LQ{}.local_extents<2>()), extents<2, 2>>);
static_assert(same<decltype(LQ{}.local_extents<6>()), extents<0, 2>>);

// ---------------------------------------------------------------------------
// Dynamic extents: the same answers, in constant expressions too
// ---------------------------------------------------------------------------
using DE = extents<dyn, 8>;
using LD = spmd::layout<M, placements<shard<0>, shard<1>>, DE>;
constexpr LD ld{DE{9}};
static_assert(ld.global_shape() == dims<2>{9, 8} && ld.extents() == DE{9});
static_assert(ld.local_shape(3) == dims<2>{5, 2} && ld.global_offset(3) == dims<2>{0, 6});
static_assert(ld.local_shape(7) == dims<2>{4, 2} && ld.global_offset(7) == dims<2>{5, 6});
static_assert(
    same<decltype(ld.local_extents<7>()), extents<dyn, 2>>);  // the static dim stays static
static_assert(ld.local_extents<7>().extent(0) == 4);
static_assert(same<decltype(ld.uniform_local_extents()), extents<dyn, 2>>);
static_assert(ld.uniform_local_extents().extent(0) == 5);
static_assert(!ld.uniform(0) && ld.uniform(1) && LD{DE{10}}.uniform(0));
static_assert(sizeof(LD) == sizeof(spmd::index_t));   // stores the one dynamic extent
static_assert(LD{}.global_shape() == dims<2>{0, 8});  // default: dynamic extents are 0
// The same values as the static layout of the same shape.
using LS = spmd::layout<M, placements<shard<0>, shard<1>>, extents<9, 8>>;
constexpr bool dyn_matches_static() {
  for (spmd::index_t r = 0; r < M::size; ++r)
    if (!(ld.block_of(r) == LS{}.block_of(r))) return false;
  return true;
}
static_assert(dyn_matches_static());
// All dims dynamic.
using DD = spmd::layout<spmd::mesh<3>, placements<shard<1>>, spmd::dextents<2>>;
constexpr DD dd{spmd::dextents<2>{2, 10}};
static_assert(dd.local_shape(2) == dims<2>{2, 2} && dd.global_offset(2) == dims<2>{0, 8});
static_assert(same<decltype(dd.local_extents<0>()), spmd::dextents<2>>);

// ---------------------------------------------------------------------------
// spec(): the validated value form
// ---------------------------------------------------------------------------
constexpr spmd::layout_spec spec = L::spec();
static_assert(spec.mesh == M::shape_vec() && spec.tensor_rank == 2 && spec.mesh_size() == 8);
static_assert(spec.placements[0] == spmd::make_shard(0, 0) &&
              spec.placements[1] == spmd::make_shard(0, 1));
static_assert(RP::spec().placements[1] == spmd::make_partial(reduce_op::max));
static_assert(!(RP::spec().placements[1] == spmd::make_partial(reduce_op::sum)));
static_assert(RP::spec().placements[0].is_replicate() && RP::spec().placements[1].is_partial());

// make_spec and box_at directly, at compile time.
constexpr spmd::spec_result sr =
    spmd::make_spec({{2, 4}, 2}, {{spmd::make_shard(0), spmd::make_shard(0)}, 2}, 2);
static_assert(sr.ok() && sr.spec == spec && sr.where == -1);
static_assert(spmd::box_at(sr.spec, {{10, 5}, 2}, {{0, 3}, 2}) ==
              spmd::local_box{{{0, 5}, 2}, {{10, 0}, 2}});
static_assert(spmd::make_spec({{2, 4}, 2}, {{spmd::make_shard(2)}, 1}, 2).error ==
              spmd::layout_error::placement_count_mismatch);

// Placement types carry their values.
static_assert(shard<-1, 2>::value() == spmd::make_shard(-1, 2) && shard<3>::value().order == -1);
static_assert(replicate::value().is_replicate() && partial<>::value().op == reduce_op::sum);
static_assert(spmd::placement_type<shard<0>> && !spmd::placement_type<int>);
static_assert(placements<shard<0>, replicate, partial<>>::size == 3);

}  // namespace

int main() { return 0; }
