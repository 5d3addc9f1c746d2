// tests/static/groups.cpp — groups of ranks over some mesh dims, and sub-mesh types.
#include <type_traits>

#include <spmd/spmd.hpp>

namespace {

using spmd::index_t;

// ---------------------------------------------------------------------------
// Groups on mesh (2, 4): bit m of a mask = mesh dim m
// ---------------------------------------------------------------------------
using M = spmd::mesh<2, 4>::named<"dp", "tp">;
static_assert(M::mask<"dp">() == 0b01 && M::mask<"tp">() == 0b10 && M::mask<"dp", "tp">() == 0b11);

// tp groups: the rows {0,1,2,3} and {4,5,6,7}
static_assert(M::group_count(0b10) == 2 && M::group_size(0b10) == 4);
static_assert(M::group_rank(0b10, 1, 0) == 4 && M::group_rank(0b10, 1, 3) == 7);
static_assert(M::group_of_rank(0b10, 5).group == 1 && M::group_of_rank(0b10, 5).index == 1);
// dp groups: the columns {0,4}, {1,5}, {2,6}, {3,7}
static_assert(M::group_count(0b01) == 4 && M::group_size(0b01) == 2);
static_assert(M::group_rank(0b01, 2, 0) == 2 && M::group_rank(0b01, 2, 1) == 6);
static_assert(M::group_of_rank(0b01, 7).group == 3 && M::group_of_rank(0b01, 7).index == 1);
// all dims: one group, the whole mesh; no dims: one group per rank
static_assert(M::group_count(0b11) == 1 && M::group_size(0b11) == 8 &&
              M::group_rank(0b11, 0, 6) == 6);
static_assert(M::group_count(0) == 8 && M::group_size(0) == 1 && M::group_rank(0, 5, 0) == 5);

// group_rank and group_of_rank are inverse for every mask, group and member.
template <class Mesh>
constexpr bool groups_invert() {
  for (spmd::dim_mask mask = 0; mask < (1u << Mesh::ndim); ++mask) {
    if (Mesh::group_count(mask) * Mesh::group_size(mask) != Mesh::size) return false;
    for (index_t g = 0; g < Mesh::group_count(mask); ++g)
      for (index_t j = 0; j < Mesh::group_size(mask); ++j) {
        const index_t rank = Mesh::group_rank(mask, g, j);
        if (!Mesh::contains(rank)) return false;
        const spmd::group_position p = Mesh::group_of_rank(mask, rank);
        if (p.group != g || p.index != j) return false;
        // members of one group agree on every coordinate outside the mask
        const auto c = *Mesh::coord_of(rank), c0 = *Mesh::coord_of(Mesh::group_rank(mask, g, 0));
        for (int m = 0; m < Mesh::ndim; ++m)
          if (!spmd::in_mask(mask, m) && c[m] != c0[m]) return false;
      }
  }
  return true;
}
static_assert(groups_invert<M>());
static_assert(groups_invert<spmd::mesh<2, 3, 2>>());
static_assert(
    groups_invert<spmd::mesh<3, 1, 2, 2>::with_ranks<11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0>>());

// ---------------------------------------------------------------------------
// Flattened dims: mesh (2, 3, 2), dims {0, 2} form groups of 4, row-major in (d0, d2)
// ---------------------------------------------------------------------------
using F = spmd::mesh<2, 3, 2>::named<"a", "b", "c">;
static_assert(F::mask<"a", "c">() == 0b101);
static_assert(F::group_count(0b101) == 3 && F::group_size(0b101) == 4);
static_assert(F::group_rank(0b101, 1, 0) == 2 && F::group_rank(0b101, 1, 1) == 3 &&
              F::group_rank(0b101, 1, 2) == 8 && F::group_rank(0b101, 1, 3) == 9);
static_assert(F::group_of_rank(0b101, 9).group == 1 && F::group_of_rank(0b101, 9).index == 3);
// The same groups at the value level.
constexpr spmd::mesh_shape_vec fshape{{2, 3, 2}, 3};
static_assert(spmd::group_member(fshape, 0b101, 2, 1) == 5);
static_assert(spmd::group_of(fshape, 0b110, 7).group == 1 &&
              spmd::group_of(fshape, 0b110, 7).index == 1);
static_assert(spmd::unravel(fshape, 7) == spmd::coord_vec{{1, 0, 1}, 3});
static_assert(spmd::ravel(fshape, spmd::coord_vec{{1, 2, 1}, 3}) == 11);

// ---------------------------------------------------------------------------
// Sub-mesh types (DTensor's mesh["tp"], mesh["dp", "tp"])
// ---------------------------------------------------------------------------
using TP = M::sub<"tp">;
static_assert(TP::ndim == 1 && TP::group_size == 4 && TP::group_count == 2 && TP::mask == 0b10);
static_assert(
    std::is_same_v<TP::containing<5>, spmd::mesh<4>::named<"tp">::with_ranks<4, 5, 6, 7>>);
static_assert(std::is_same_v<TP::containing<0>, TP::group<0>>);
static_assert(TP::group_index<6>() == 1);
static_assert(
    std::is_same_v<M::sub<"dp">::containing<6>, spmd::mesh<2>::named<"dp">::with_ranks<2, 6>>);
static_assert(
    std::is_same_v<M::sub<"dp", "tp">::containing<3>,
                   spmd::mesh<2, 4>::named<"dp", "tp">::with_ranks<0, 1, 2, 3, 4, 5, 6, 7>>);

// Flattened sub-mesh: 2-d, keeps both names.
using AC = F::sub<"a", "c">;
static_assert(AC::ndim == 2 && AC::group_size == 4 && AC::group_count == 3);
static_assert(
    std::is_same_v<AC::containing<9>, spmd::mesh<2, 2>::named<"a", "c">::with_ranks<2, 3, 8, 9>>);
static_assert(
    std::is_same_v<AC::group<2>, spmd::mesh<2, 2>::named<"a", "c">::with_ranks<4, 5, 10, 11>>);

// Unnamed meshes: by dim index.
static_assert(std::is_same_v<spmd::mesh<2, 4>::sub_dims<1>::containing<5>,
                             spmd::mesh<4>::with_ranks<4, 5, 6, 7>>);
static_assert(std::is_same_v<spmd::mesh<2, 3, 2>::sub_dims<0, 2>::containing<9>,
                             spmd::mesh<2, 2>::with_ranks<2, 3, 8, 9>>);
static_assert(std::is_same_v<F::sub_dims<0, 2>, F::sub<"a", "c">>);

// Explicit rank list: the sub-mesh carries the parent's ranks.
using R = spmd::mesh<2, 2>::with_ranks<10, 11, 12, 13>::named<"x", "y">;
static_assert(
    std::is_same_v<R::sub<"y">::containing<12>, spmd::mesh<2>::named<"y">::with_ranks<12, 13>>);
static_assert(
    std::is_same_v<R::sub<"x">::containing<13>, spmd::mesh<2>::named<"x">::with_ranks<11, 13>>);
static_assert(R::group_rank(0b01, 1, 1) == 13 && R::group_of_rank(0b01, 11).group == 1);

using Q = spmd::mesh<2, 3, 2>::with_ranks<0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20,
                                          22>::named<"a", "b", "c">;
static_assert(std::is_same_v<Q::sub<"a", "c">::containing<18>,
                             spmd::mesh<2, 2>::named<"a", "c">::with_ranks<4, 6, 16, 18>>);
static_assert(
    std::is_same_v<Q::sub<"b">::containing<18>, spmd::mesh<3>::named<"b">::with_ranks<14, 18, 22>>);

// A sub-mesh of a sub-mesh.
using QAC = Q::sub<"a", "c">::containing<18>;
static_assert(
    std::is_same_v<QAC::sub<"c">::containing<16>, spmd::mesh<2>::named<"c">::with_ranks<16, 18>>);

// Groups on a 4-d mesh, flattening three dims.
using G4 = spmd::mesh<2, 2, 2, 2>::named<"pp", "dp", "cp", "tp">;
static_assert(G4::mask<"pp", "cp", "tp">() == 0b1101);
static_assert(
    std::is_same_v<
        G4::sub<"pp", "cp", "tp">::containing<5>,
        spmd::mesh<2, 2, 2>::named<"pp", "cp", "tp">::with_ranks<4, 5, 6, 7, 12, 13, 14, 15>>);

}  // namespace

int main() { return 0; }
