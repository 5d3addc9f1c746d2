// tests/runtime/mesh.cpp — coordinates and groups against a counting reference, typed
// meshes (explicit rank lists, names, 4-d) and with_rank.
#include <algorithm>
#include <stdexcept>
#include <string>
#include <vector>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <catch2/catch.hpp>

#include "reference.hpp"

namespace {

using ref::index_t;
using ref::ivec;

spmd::mesh_shape_vec mesh_vec(const ivec& mesh) {
  spmd::mesh_shape_vec v{};
  for (index_t s : mesh) v.push_back(s);
  return v;
}

// Every mesh of 1..4 dims with sizes 1..4.
std::vector<ivec> small_meshes() {
  std::vector<ivec> out;
  for (int k = 1; k <= 4; ++k)
    for (ivec c : ref::all_coords(ivec(static_cast<std::size_t>(k), 4))) {
      for (auto& s : c) s += 1;
      out.push_back(c);
    }
  return out;
}

}  // namespace

TEST_CASE("unravel and ravel count the mesh row-major", "[mesh]") {
  for (const ivec& mesh : small_meshes()) {
    const auto coords = ref::all_coords(mesh);
    const auto m = mesh_vec(mesh);
    for (std::size_t i = 0; i < coords.size(); ++i) {
      const spmd::coord_vec c = spmd::unravel(m, static_cast<index_t>(i));
      REQUIRE(ref::to_ivec(c) == coords[i]);
      REQUIRE(spmd::ravel(m, c) == static_cast<index_t>(i));
    }
  }
}

TEST_CASE("groups of every mask equal the reference grouping", "[mesh]") {
  for (const ivec& mesh : small_meshes()) {
    const auto m = mesh_vec(mesh);
    for (unsigned mask = 0; mask < (1u << mesh.size()); ++mask) {
      INFO("mesh " << ref::to_string(mesh) << " mask " << mask);
      const auto want = ref::groups(mesh, mask);
      REQUIRE(spmd::group_count(m, mask) == static_cast<index_t>(want.size()));
      REQUIRE(spmd::group_size(m, mask) == static_cast<index_t>(want[0].size()));
      for (std::size_t g = 0; g < want.size(); ++g)
        for (std::size_t j = 0; j < want[g].size(); ++j) {
          REQUIRE(spmd::group_member(m, mask, index_t(g), index_t(j)) == want[g][j]);
          const spmd::group_position p = spmd::group_of(m, mask, want[g][j]);
          REQUIRE(p.group == index_t(g));
          REQUIRE(p.index == index_t(j));
        }
    }
  }
}

// ---------------------------------------------------------------------------
// Typed meshes
// ---------------------------------------------------------------------------
namespace {

using typed_meshes =
    boost::mp11::mp_list<spmd::mesh<1>, spmd::mesh<5>, spmd::mesh<2, 4>,
                         spmd::mesh<2, 4>::named<"dp", "tp">, spmd::mesh<4>::with_ranks<0, 2, 4, 6>,
                         spmd::mesh<3, 2>::with_ranks<9, 1, 7, 3, 5, 11>::named<"a", "b">,
                         spmd::mesh<2, 1, 3, 2>,
                         spmd::mesh<2, 2, 1, 2>::with_ranks<15, 14, 13, 12, 11, 10, 9, 8>,
                         spmd::mesh<1, 2, 1, 2, 2>::named<"a", "b", "c", "d", "e">,
                         spmd::mesh<2, 2, 2, 2>::named<"pp", "dp", "cp", "tp">>;

template <class M>
ivec ranks_of() {
  ivec r;
  for (index_t i = 0; i < M::size; ++i) r.push_back(M::rank_at(i));
  return r;
}

}  // namespace

TEST_CASE("typed meshes: coordinates, ranks and groups match the reference", "[mesh]") {
  boost::mp11::mp_for_each<typed_meshes>([](auto mesh) {
    using M = decltype(mesh);
    const ivec shape = ref::to_ivec(M::shape());
    const ivec ranks = ranks_of<M>();
    INFO("mesh " << ref::to_string(shape) << " ranks " << ref::to_string(ranks));
    const auto coords = ref::all_coords(shape);
    REQUIRE(coords.size() == std::size_t(M::size));
    index_t max_rank = 0;
    for (std::size_t i = 0; i < coords.size(); ++i) {
      const index_t rank = ranks[i];
      max_rank = std::max(max_rank, rank);
      const auto c = M::coord_of(rank);
      REQUIRE(static_cast<bool>(c));
      REQUIRE(ref::to_ivec(*c) == coords[i]);
      REQUIRE(M::rank_of(*c) == rank);
      REQUIRE(M::contains(rank));
    }
    // Every other rank up to past the largest has no coordinate.
    for (index_t rank = -2; rank <= max_rank + 2; ++rank)
      if (std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) {
        REQUIRE_FALSE(M::coord_of(rank));
        REQUIRE_FALSE(M::contains(rank));
        REQUIRE(M::index_of(rank) == -1);
      }
    // Groups name ranks (not mesh indices).
    for (unsigned mask = 0; mask < (1u << M::ndim); ++mask) {
      const auto want = ref::groups(shape, mask);
      REQUIRE(M::group_count(mask) == index_t(want.size()));
      REQUIRE(M::group_size(mask) == index_t(want[0].size()));
      for (std::size_t g = 0; g < want.size(); ++g)
        for (std::size_t j = 0; j < want[g].size(); ++j) {
          const index_t rank = ranks[std::size_t(want[g][j])];
          REQUIRE(M::group_rank(mask, index_t(g), index_t(j)) == rank);
          REQUIRE(M::group_of_rank(mask, rank).group == index_t(g));
          REQUIRE(M::group_of_rank(mask, rank).index == index_t(j));
        }
    }
  });
}

TEST_CASE("sub-mesh types hold the groups' ranks", "[mesh]") {
  using Q = spmd::mesh<3, 2>::with_ranks<9, 1, 7, 3, 5, 11>::named<"a", "b">;
  // The group of each rank, as a type, lists the same ranks as the runtime group.
  boost::mp11::mp_for_each<boost::mp11::mp_iota_c<Q::size>>([](auto i) {
    constexpr index_t rank = Q::rank_at(decltype(i)::value);
    using A = Q::sub<"a">::containing<rank>;
    using B = Q::sub<"b">::containing<rank>;
    const auto ga = Q::group_of_rank(0b01, rank), gb = Q::group_of_rank(0b10, rank);
    REQUIRE(A::size == 3);
    REQUIRE(B::size == 2);
    for (index_t j = 0; j < 3; ++j) REQUIRE(A::rank_at(j) == Q::group_rank(0b01, ga.group, j));
    for (index_t j = 0; j < 2; ++j) REQUIRE(B::rank_at(j) == Q::group_rank(0b10, gb.group, j));
    REQUIRE(*A::coord_of(rank) == spmd::dims<1>{ga.index});
    REQUIRE(*B::coord_of(rank) == spmd::dims<1>{gb.index});
  });
}

// ---------------------------------------------------------------------------
// with_rank: from a run-time rank to a compile-time one
// ---------------------------------------------------------------------------
TEST_CASE("with_rank calls the per-rank instantiation of each rank in the mesh",
          "[mesh][with_rank]") {
  boost::mp11::mp_for_each<typed_meshes>([](auto mesh) {
    using M = decltype(mesh);
    for (index_t rank : ranks_of<M>()) {
      const index_t got = spmd::with_rank<M>(rank, [](auto r) {
        constexpr index_t R = decltype(r)::value;  // a constant expression
        static_assert(M::contains(R));
        return R;
      });
      REQUIRE(got == rank);
    }
  });
  // A reference comes back as a reference.
  int x = 0;
  int& y = spmd::with_rank<spmd::mesh<2>>(1, [&](auto) -> int& { return x; });
  CHECK(&y == &x);
}

TEST_CASE("with_rank throws std::out_of_range for a rank outside the mesh", "[mesh][with_rank]") {
  auto call = [](auto mesh, index_t rank) {
    using M = decltype(mesh);
    bool called = false;
    spmd::with_rank<M>(rank, [&](auto) { called = true; });
    return called;
  };
  CHECK_THROWS_AS(call(spmd::mesh<2, 4>{}, 8), std::out_of_range);
  CHECK_THROWS_AS(call(spmd::mesh<2, 4>{}, -1), std::out_of_range);
  using Q = spmd::mesh<4>::with_ranks<0, 2, 4, 6>;
  for (index_t rank : {-1, 1, 3, 5, 7, 8}) CHECK_THROWS_AS(call(Q{}, rank), std::out_of_range);
  for (index_t rank : {0, 2, 4, 6}) CHECK(call(Q{}, rank));
  CHECK_THROWS_WITH(call(Q{}, 3), Catch::Matchers::Contains("rank 3") &&
                                      Catch::Matchers::Contains("not in the mesh"));
  CHECK_THROWS_AS(call(spmd::mesh<2, 2>::with_ranks<15, 14, 13, 12>{}, 0), std::out_of_range);
}
