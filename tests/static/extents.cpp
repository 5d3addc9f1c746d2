// tests/static/extents.cpp — spmd::extents: static and dynamic extents in one type.
#include <array>
#include <type_traits>

#include <spmd/core/element_count.hpp>
#include <spmd/spmd.hpp>

namespace {

using spmd::dims;
using spmd::dyn;
using spmd::extents;

// ---------------------------------------------------------------------------
// Fully static
// ---------------------------------------------------------------------------
using S = extents<10, 5, 0>;
static_assert(S::rank() == 3 && S::rank_dynamic() == 0 && S::is_static());
static_assert(S::static_extent(0) == 10 && S::static_extent(1) == 5 && S::static_extent(2) == 0);
static_assert(S{}.extent(1) == 5);
static_assert(S{}.values() == dims<3>{10, 5, 0});
static_assert(S{}.to_vec().size() == 3 && S{}.to_vec()[0] == 10);
static_assert(std::is_empty_v<S> && sizeof(S) == 1);  // a static extents object stores nothing
static_assert(S::from_values({1, 2, 3}) == S{});      // the static values come from the type
static_assert(std::is_trivially_copyable_v<S>);

// Rank 0 (a scalar)
using Z = extents<>;
static_assert(Z::rank() == 0 && Z::rank_dynamic() == 0 && Z::is_static());
static_assert(Z{}.to_vec().empty() && std::is_empty_v<Z>);

// ---------------------------------------------------------------------------
// Dynamic and mixed: only the dynamic values are stored
// ---------------------------------------------------------------------------
using D = extents<dyn, 8, dyn>;
static_assert(D::rank() == 3 && D::rank_dynamic() == 2 && !D::is_static());
static_assert(D::static_extent(0) == dyn && D::static_extent(1) == 8);
static_assert(sizeof(D) == 2 * sizeof(spmd::index_t));
constexpr D d{9, 4};
static_assert(d.extent(0) == 9 && d.extent(1) == 8 && d.extent(2) == 4);
static_assert(d.values() == dims<3>{9, 8, 4});
static_assert(D::from_values({9, 123, 4}) == d);  // the static 8 is not read from the values
static_assert(D::from_values({9, 123, 4}).extent(1) == 8);
static_assert(!(D{9, 5} == d));
static_assert(D{}.values() == dims<3>{0, 8, 0});  // value-initialised dynamic extents are 0

// Not constructible from the wrong number of dynamic values, nor implicitly.
static_assert(!std::is_constructible_v<D, int>);
static_assert(!std::is_constructible_v<D, int, int, int>);
static_assert(std::is_constructible_v<D, int, long>);
static_assert(!std::is_convertible_v<int, extents<dyn>>);
static_assert(!std::is_constructible_v<S, int>);

using E1 = extents<dyn, 8>;
static_assert(E1{9}.extent(0) == 9 && sizeof(E1) == sizeof(spmd::index_t));

// ---------------------------------------------------------------------------
// dextents and extents_from
// ---------------------------------------------------------------------------
static_assert(std::is_same_v<spmd::dextents<0>, extents<>>);
static_assert(std::is_same_v<spmd::dextents<2>, extents<dyn, dyn>>);
static_assert(std::is_same_v<spmd::dextents<3>, extents<dyn, dyn, dyn>>);

constexpr dims<3> pattern{4, dyn, 0};
constexpr auto from = spmd::extents_from<pattern>(dims<3>{4, 11, 0});
static_assert(std::is_same_v<std::remove_const_t<decltype(from)>, extents<4, dyn, 0>>);
static_assert(from.extent(1) == 11);
constexpr dims<2> all_static{2, 3};
static_assert(
    std::is_same_v<decltype(spmd::extents_from<all_static>(dims<2>{2, 3})), extents<2, 3>>);

static_assert(spmd::is_extents_v<S> && spmd::is_extents_v<D> && spmd::is_extents_v<Z>);
static_assert(!spmd::is_extents_v<int> && !spmd::is_extents_v<dims<2>>);

// ---------------------------------------------------------------------------
// The small arrays under the results
// ---------------------------------------------------------------------------
static_assert(spmd::sarray{2, 5} == dims<2>{2, 5});  // across element types
static_assert(!(dims<2>{2, 5} == dims<2>{2, 4}));
static_assert(dims<0>{} == dims<0>{} && dims<0>::size() == 0);
static_assert(spmd::to_sarray<2>(spmd::to_svec(dims<2>{7, 8})) == dims<2>{7, 8});
constexpr spmd::shape_vec sv = [] {
  spmd::shape_vec v{};
  v.push_back(3);
  v.push_back(1);
  return v;
}();
static_assert(sv.size() == 2 && !sv.empty() && sv[1] == 1 && !(sv == d.to_vec()));

}  // namespace

int main() { return 0; }

// Element counts bounded factor by factor (core/element_count.hpp): the count, or -1 past the
// limit, with no product overflowing on the way; an empty tensor holds 0 however long its
// other dims.
static_assert(spmd::elements_within(std::array<spmd::index_t, 2>{6, 4}, 24) == 24);
static_assert(spmd::elements_within(std::array<spmd::index_t, 2>{6, 4}, 23) == -1);
static_assert(spmd::elements_within(std::array<spmd::index_t, 0>{}, 1) == 1);
static_assert(spmd::elements_within(std::array<spmd::index_t, 2>{spmd::index_t{1} << 31, spmd::index_t{1} << 31},
                                    spmd::max_elements) == spmd::max_elements);
static_assert(spmd::elements_within(std::array<spmd::index_t, 2>{4000000000000, 4000000000000}, spmd::max_elements) ==
              -1);
static_assert(spmd::elements_within(std::array<spmd::index_t, 3>{spmd::index_t{1} << 62, spmd::index_t{1} << 62, 0},
                                    spmd::max_elements) == 0);
