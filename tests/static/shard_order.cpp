// tests/static/shard_order.cpp — nested sharding: chunk of chunk, in shard order.
#include <type_traits>

#include <spmd/spmd.hpp>

namespace {

using spmd::dims;
using spmd::extents;
using spmd::index_t;
using spmd::placements;
using spmd::replicate;
using spmd::shard;

// Rank r's extent / offset along tensor dim D, for every rank of the mesh in order.
template <class L, std::size_t D, std::size_t N>
constexpr bool extents_are(const index_t (&want)[N]) {
  static_assert(N == L::mesh_type::size);
  for (std::size_t i = 0; i < N; ++i)
    if (L{}.local_shape(L::mesh_type::rank_at(static_cast<index_t>(i)))[D] != want[i]) return false;
  return true;
}
template <class L, std::size_t D, std::size_t N>
constexpr bool offsets_are(const index_t (&want)[N]) {
  static_assert(N == L::mesh_type::size);
  for (std::size_t i = 0; i < N; ++i)
    if (L{}.global_offset(L::mesh_type::rank_at(static_cast<index_t>(i)))[D] != want[i])
      return false;
  return true;
}

// ---------------------------------------------------------------------------
// Default order: left to right over mesh dims
// ---------------------------------------------------------------------------
// Size 4 on mesh (2, 3) with [S0, S0]: 4 → 2 | 2, then 2 → 1, 1, 0.
using A = spmd::layout<spmd::mesh<2, 3>, placements<shard<0>, shard<0>>, extents<4>>;
static_assert(extents_are<A, 0>({1, 1, 0, 1, 1, 0}));
static_assert(offsets_are<A, 0>({0, 1, 4, 2, 3, 4}));
static_assert(A::spec().default_order(0));
static_assert(A::spec().shard_order(0) == spmd::svec<int, 8>{{0, 1}, 2});

// (9, 5) on (2, 2) with [S0, S0]: 9 → 5 | 4, then 5 → 3, 2 and 4 → 2, 2.
using B = spmd::layout<spmd::mesh<2, 2>, placements<shard<0>, shard<0>>, extents<9, 5>>;
static_assert(extents_are<B, 0>({3, 2, 2, 2}) && extents_are<B, 1>({5, 5, 5, 5}));
static_assert(offsets_are<B, 0>({0, 3, 5, 7}) && offsets_are<B, 1>({0, 0, 0, 0}));
static_assert(std::is_same_v<decltype(B{}.local_extents<0>()), extents<3, 5>>);
static_assert(std::is_same_v<decltype(B{}.local_extents<3>()), extents<2, 5>>);
static_assert(std::is_same_v<decltype(B{}.uniform_local_extents()), extents<spmd::dyn, 5>>);

// Nested sharding is not a flat split over the product: 6 on (2, 2) nested → 2, 1, 2, 1,
// where chunk(6, 4) would give 2, 2, 2, 0.
using C = spmd::layout<spmd::mesh<2, 2>, placements<shard<0>, shard<0>>, extents<6>>;
static_assert(extents_are<C, 0>({2, 1, 2, 1}) && offsets_are<C, 0>({0, 2, 3, 5}));
// Empty at the first level stays empty, at offset = global extent: 1 on (2, 2).
using D1 = spmd::layout<spmd::mesh<2, 2>, placements<shard<0>, shard<0>>, extents<1>>;
static_assert(extents_are<D1, 0>({1, 0, 0, 0}) && offsets_are<D1, 0>({0, 1, 1, 1}));

// ---------------------------------------------------------------------------
// Explicit orders: shard<D, K> — K is this mesh dim's position in D's order
// ---------------------------------------------------------------------------
// Reversed on (2, 3), size 4: mesh dim 1 splits first (4 → 2, 2, 0), then mesh dim 0.
// Same sizes as the default order, different blocks.
using R = spmd::layout<spmd::mesh<2, 3>, placements<shard<0, 1>, shard<0, 0>>, extents<4>>;
static_assert(extents_are<R, 0>({1, 1, 0, 1, 1, 0}));
static_assert(offsets_are<R, 0>({0, 2, 4, 1, 3, 4}));
static_assert(R::spec().shard_order(0) == spmd::svec<int, 8>{{1, 0}, 2});
static_assert(!R::spec().default_order(0));
static_assert(!(R::spec() == A::spec()));

// Explicit positions equal to the default order give the default layout.
using AE = spmd::layout<spmd::mesh<2, 3>, placements<shard<0, 0>, shard<0, 1>>, extents<4>>;
static_assert(AE::spec() == A::spec() && AE::spec().default_order(0));
using One = spmd::layout<spmd::mesh<3>, placements<shard<0, 0>>, extents<4>>;
static_assert(One::spec() == spmd::layout<spmd::mesh<3>, placements<shard<0>>, extents<4>>::spec());

// DTensor's S(1)[1] S(1)[2] S(1)[0] on mesh (2, 2, 2): tensor dim 1 split by mesh dims
// 2, 0, 1 in that order. Size 8: offset = 4*c2 + 2*c0 + c1 (default: 4*c0 + 2*c1 + c2).
using M3 = spmd::mesh<2, 2, 2>;
using X = spmd::layout<M3, placements<shard<1, 1>, shard<1, 2>, shard<1, 0>>, extents<3, 8>>;
static_assert(X::spec().shard_order(1) == spmd::svec<int, 8>{{2, 0, 1}, 3});
static_assert(X::spec().shard_order(0).empty());
static_assert(extents_are<X, 1>({1, 1, 1, 1, 1, 1, 1, 1}) &&
              extents_are<X, 0>({3, 3, 3, 3, 3, 3, 3, 3}));
static_assert(offsets_are<X, 1>({0, 4, 1, 5, 2, 6, 3, 7}));
static_assert(X{}.global_offset(M3::rank_of({0, 0, 1}))[1] == 4);  // mesh dim 2 splits first
using XD = spmd::layout<M3, placements<shard<1>, shard<1>, shard<1>>, extents<3, 8>>;
static_assert(offsets_are<XD, 1>({0, 1, 2, 3, 4, 5, 6, 7}));
// Uneven, size 7: mesh dim 2 → 4 | 3; mesh dim 0 → 2, 2 | 2, 1; mesh dim 1 → 1, 1 | 1, 1 | 1, 1 |
// 1, 0.
using X7 = spmd::layout<M3, placements<shard<1, 1>, shard<1, 2>, shard<1, 0>>, extents<3, 7>>;
static_assert(extents_are<X7, 1>({1, 1, 1, 1, 1, 1, 1, 0}));
static_assert(offsets_are<X7, 1>({0, 4, 1, 5, 2, 6, 3, 7}));
static_assert(std::is_same_v<decltype(X7{}.local_extents<7>()), extents<3, 0>>);

// The order is per tensor dim: dim 0 split by mesh dims 2 then 0, dim 1 by mesh dim 1.
using Y = spmd::layout<M3, placements<shard<0, 1>, shard<1>, shard<0, 0>>, extents<5, 3>>;
static_assert(Y::spec().shard_order(0) == spmd::svec<int, 8>{{2, 0}, 2});
static_assert(Y::spec().shard_order(1) == spmd::svec<int, 8>{{1}, 1});
// dim 0: 5 → 3 | 2 over mesh dim 2, then 3 → 2, 1 and 2 → 1, 1 over mesh dim 0.
static_assert(extents_are<Y, 0>({2, 1, 2, 1, 1, 1, 1, 1}));
static_assert(offsets_are<Y, 0>({0, 3, 0, 3, 2, 4, 2, 4}));
static_assert(extents_are<Y, 1>({2, 2, 1, 1, 2, 2, 1, 1}));

// Negative dims and explicit positions together: shard<-1, 1> and shard<1, 0> are one dim.
using NegOrder =
    spmd::layout<spmd::mesh<2, 3>, placements<shard<-1, 1>, shard<1, 0>>, extents<2, 4>>;
static_assert(
    NegOrder::spec() ==
    spmd::layout<spmd::mesh<2, 3>, placements<shard<1, 1>, shard<1, 0>>, extents<2, 4>>::spec());
static_assert(offsets_are<NegOrder, 1>({0, 2, 4, 1, 3, 4}));

// Replicate between nested shards does not take part in the order.
using Gap = spmd::layout<M3, placements<shard<0, 1>, replicate, shard<0, 0>>, extents<4>>;
static_assert(Gap::spec().shard_order(0) == spmd::svec<int, 8>{{2, 0}, 2});
static_assert(offsets_are<Gap, 0>({0, 2, 0, 2, 1, 3, 1, 3}));

// An explicit order on a mesh with an explicit rank list follows the coordinates.
using QM = spmd::mesh<2, 2>::with_ranks<7, 5, 3, 1>;
using QL = spmd::layout<QM, placements<shard<0, 1>, shard<0, 0>>, extents<4>>;
static_assert(offsets_are<QL, 0>({0, 2, 1, 3}));
static_assert(QL{}.global_offset(5) == dims<1>{2} && QL{}.global_offset(3) == dims<1>{1});

}  // namespace

int main() { return 0; }
