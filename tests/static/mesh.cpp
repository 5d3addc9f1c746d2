// tests/static/mesh.cpp — spmd::mesh: shape, ranks, coordinates both ways, axis names.
#include <string_view>
#include <type_traits>

#include <spmd/spmd.hpp>

namespace {

using spmd::dims;
using spmd::index_t;

// coord_of and rank_of are inverse on every rank of M, and the coordinates walk the
// mesh row-major in the order of M's rank list.
template <class M>
constexpr bool round_trips() {
  dims<M::ndim> c{};  // odometer, last dim fastest
  for (index_t i = 0; i < M::size; ++i) {
    const index_t rank = M::rank_at(i);
    if (M::index_of(rank) != i || !M::contains(rank)) return false;
    const auto got = M::coord_of(rank);
    if (!got || !(*got == c) || M::rank_of(c) != rank) return false;
    for (int m = M::ndim - 1; m >= 0; --m) {
      if (++c[m] < M::extent(m)) break;
      c[m] = 0;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Plain meshes: ranks 0..size-1, row-major
// ---------------------------------------------------------------------------
using M = spmd::mesh<2, 4>;
static_assert(M::ndim == 2 && M::size == 8 && M::shape() == dims<2>{2, 4});
static_assert(M::extent(0) == 2 && M::extent(1) == 4 && M::shape_vec().size() == 2);
static_assert(M::coord_of(5).value == dims<2>{1, 1} && M::coord_of(5).valid);
static_assert(*M::coord_of(3) == dims<2>{0, 3});
static_assert(M::rank_of({1, 2}) == 6 && M::rank_of({0, 0}) == 0);
static_assert(!M::coord_of(8) && !M::coord_of(-1) && !M::contains(8) && M::index_of(8) == -1);
static_assert(!M::has_names && M::name(0).empty());
static_assert(round_trips<M>());
static_assert(std::is_empty_v<M> && spmd::is_mesh_v<M> && !spmd::is_mesh_v<int>);

using M1 = spmd::mesh<1>;
static_assert(M1::size == 1 && *M1::coord_of(0) == dims<1>{0} && !M1::coord_of(1));
static_assert(round_trips<M1>());

// 4-d and 5-d meshes (including size-1 dims)
using M4 = spmd::mesh<2, 3, 1, 2>;
static_assert(M4::ndim == 4 && M4::size == 12);
static_assert(*M4::coord_of(11) == dims<4>{1, 2, 0, 1});
static_assert(*M4::coord_of(7) == dims<4>{1, 0, 0, 1});
static_assert(M4::rank_of({1, 1, 0, 0}) == 8);
static_assert(round_trips<M4>());
using M5 = spmd::mesh<2, 2, 2, 2, 2>;
static_assert(M5::size == 32 && *M5::coord_of(19) == dims<5>{1, 0, 0, 1, 1});
static_assert(round_trips<M5>());
using M8 = spmd::mesh<1, 2, 1, 1, 2, 1, 1, 2>;  // max_mesh_dims
static_assert(M8::ndim == spmd::max_mesh_dims && M8::size == 8);
static_assert(*M8::coord_of(5) == dims<8>{0, 1, 0, 0, 0, 0, 0, 1});
static_assert(round_trips<M8>());

// ---------------------------------------------------------------------------
// Explicit rank lists
// ---------------------------------------------------------------------------
using Q = spmd::mesh<4>::with_ranks<0, 2, 4, 6>;
static_assert(Q::size == 4 && Q::rank_at(2) == 4);
static_assert(*Q::coord_of(6) == dims<1>{3} && *Q::coord_of(0) == dims<1>{0});
static_assert(!Q::coord_of(3) && !Q::coord_of(1) && !Q::coord_of(8) && !Q::contains(3));
static_assert(Q::index_of(4) == 2 && Q::index_of(5) == -1);
static_assert(round_trips<Q>());
static_assert(!std::is_same_v<Q, spmd::mesh<4>>);

using P = spmd::mesh<2, 3>::with_ranks<7, 3, 11, 0, 5, 9>;  // any order
static_assert(*P::coord_of(7) == dims<2>{0, 0} && *P::coord_of(0) == dims<2>{1, 0});
static_assert(*P::coord_of(9) == dims<2>{1, 2} && !P::coord_of(1) && !P::coord_of(6));
static_assert(P::rank_of({0, 2}) == 11 && P::rank_of({1, 1}) == 5);
static_assert(round_trips<P>());

using P4 = spmd::mesh<2, 1, 2, 2>::with_ranks<100, 101, 102, 103, 200, 201, 202, 203>;
static_assert(*P4::coord_of(202) == dims<4>{1, 0, 1, 0} && P4::rank_of({0, 0, 1, 1}) == 103);
static_assert(!P4::coord_of(0) && !P4::coord_of(104));
static_assert(round_trips<P4>());

// The explicit identity list is the same mesh (whether it is the same type is left open).
using I = spmd::mesh<2, 2>::with_ranks<0, 1, 2, 3>;
static_assert(I::coord_of(3).value == spmd::mesh<2, 2>::coord_of(3).value && !I::contains(4));

// ---------------------------------------------------------------------------
// Axis names
// ---------------------------------------------------------------------------
using N = spmd::mesh<2, 4>::named<"dp", "tp">;
static_assert(N::has_names && N::name(0) == "dp" && N::name(1) == "tp");
static_assert(N::dim<"dp">() == 0 && N::dim<"tp">() == 1);
static_assert(N::dim<spmd::axis<'t', 'p'>>() == 1);  // the spelling nvcc accepts
static_assert(std::is_same_v<spmd::axis_of<"tp">, spmd::axis<'t', 'p'>>);
static_assert(spmd::axis_of<"pipeline">::view() == "pipeline");
static_assert(
    std::is_same_v<N, spmd::mesh<2, 4>::named_axes<spmd::axis<'d', 'p'>, spmd::axis<'t', 'p'>>>);
static_assert(round_trips<N>() && *N::coord_of(6) == dims<2>{1, 2});

// Names and ranks in either order of application give one type.
using NR = spmd::mesh<2, 2>::named<"a", "b">::with_ranks<4, 5, 6, 7>;
using RN = spmd::mesh<2, 2>::with_ranks<4, 5, 6, 7>::named<"a", "b">;
static_assert(std::is_same_v<NR, RN>);
static_assert(NR::dim<"b">() == 1 && *NR::coord_of(6) == dims<2>{1, 0});

// Names of different lengths, one a prefix of another, on a 4-d mesh.
using N4 = spmd::mesh<1, 2, 2, 2>::named<"pp", "dp", "dp_shard", "t">;
static_assert(N4::dim<"pp">() == 0 && N4::dim<"dp">() == 1 && N4::dim<"dp_shard">() == 2 &&
              N4::dim<"t">() == 3);
static_assert(N4::name(2) == "dp_shard");

// ---------------------------------------------------------------------------
// fixed_string
// ---------------------------------------------------------------------------
static_assert(spmd::fixed_string("tp").size() == 2 && spmd::fixed_string("tp").view() == "tp");
static_assert(spmd::fixed_string("tp") == spmd::fixed_string("tp"));
static_assert(!(spmd::fixed_string("tp") == spmd::fixed_string("tpx")));

}  // namespace

int main() { return 0; }
