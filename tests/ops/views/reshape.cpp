// tests/ops/views/reshape.cpp — flatten and reshape (= view), over layouts on 1-d meshes
// (mesh<4> even, mesh<3> uneven: every placement list with P(sum) and P(max)) and
// mesh<2, 2> (a representative subset), against one device. The uneven cases are where a
// relabelled shard would give wrong numbers (pytorch #143372): here they are redistributed
// first, and every result is compared with the one-device reshape.
#include "view_test.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace {

using namespace spmd;
using view_test::host_tensor;
using view_test::index_t;

// (A, B): flatten<0, 1>, reshape to (B, A) (one flatten-then-split group), and view to
// (A, B / 2, 2) (a relabel of dim 0 and a split of dim 1).
template <class Mesh, index_t A, index_t B>
void sweep_matrix() {
  static_assert(B % 2 == 0);
  const auto a = op_test::random<float>({A, B}, 41);
  const auto w = view_test::widen(a);
  view_test::for_each_layout<Mesh, 2>([&]<class P>() {
    INFO("mesh " << Mesh::size << " x (" << A << ", " << B << ") " << op_test::placements_text<P>());
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<A, B>>>(a.data);
    op_test::check_close(sim::flatten<0, 1>(x), view_test::ref_reshape(w, {A * B}), 1e-6);
    op_test::check_close(sim::reshape<B, A>(x), view_test::ref_reshape(w, {B, A}), 1e-6);
    op_test::check_close(sim::view<A, B / 2, 2>(x), view_test::ref_reshape(w, {A, B / 2, 2}), 1e-6);
  });
}

// (A, B, C): flatten of the trailing pair and of all three, and a reshape that merges the
// leading pair and inserts a size-1 dim.
template <class Mesh, index_t A, index_t B, index_t C>
void sweep_3d() {
  const auto a = op_test::random<float>({A, B, C}, 42);
  const auto w = view_test::widen(a);
  view_test::for_each_layout<Mesh, 3>([&]<class P>() {
    INFO("mesh " << Mesh::size << " x (" << A << ", " << B << ", " << C << ") "
                 << op_test::placements_text<P>());
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<A, B, C>>>(a.data);
    op_test::check_close(sim::flatten<1, 2>(x), view_test::ref_reshape(w, {A, B * C}), 1e-6);
    op_test::check_close(sim::flatten(x), view_test::ref_reshape(w, {A * B * C}), 1e-6);
    op_test::check_close(sim::reshape<A * B, 1, C>(x), view_test::ref_reshape(w, {A * B, 1, C}), 1e-6);
  });
}

}  // namespace

TEST_CASE("flatten and reshape of a matrix", "[views]") {
  sweep_matrix<mesh<4>, 8, 6>();   // even: (8, 6) S(0) flattens to S(0); (6, 8) needs 6 % 4
  sweep_matrix<mesh<3>, 5, 4>();   // uneven rows 2, 2, 1: never relabelled
  sweep_matrix<mesh<2, 2>, 4, 6>();
}

TEST_CASE("flatten and reshape of a 3-d tensor", "[views]") {
  sweep_3d<mesh<4>, 4, 2, 3>();
  sweep_3d<mesh<3>, 5, 3, 2>();
  sweep_3d<mesh<2, 2>, 4, 3, 2>();
}

TEST_CASE("the brief's cases keep their shards and give the right numbers", "[views]") {
  const auto a = op_test::random<double>({8, 3}, 43);
  const auto x = sim::distribute_tensor<layout<mesh<4>, placements<shard<0>>, extents<8, 3>>>(a.data);
  const auto f = sim::flatten<0, 1>(x);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(f)>::placements_type, placements<shard<0>>>);
  // Rank r's piece is its 2 rows, flattened: 6 elements, no communication.
  for (index_t r = 0; r < 4; ++r) CHECK(f.local(r).extent(0) == 6);
  op_test::check_close(f, view_test::ref_reshape(view_test::widen(a), {24}), 0);

  const auto b = op_test::random<double>({5, 3}, 44);
  const auto y = sim::distribute_tensor<layout<mesh<4>, placements<shard<0>>, extents<5, 3>>>(b.data);
  const auto g = sim::flatten<0, 1>(y);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(g)>::placements_type, placements<replicate>>);
  op_test::check_close(g, view_test::ref_reshape(view_test::widen(b), {15}), 0);

  const auto c = op_test::random<double>({4, 6}, 45);
  const auto z = sim::distribute_tensor<layout<mesh<2>, placements<shard<0>>, extents<4, 6>>>(c.data);
  const auto s = sim::reshape<2, 2, 6>(z);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(s)>::placements_type, placements<shard<0>>>);
  op_test::check_close(s, view_test::ref_reshape(view_test::widen(c), {2, 2, 6}), 0);
}

TEST_CASE("reshape of a dynamic-extent tensor", "[views]") {
  using L = layout<mesh<3>, placements<shard<0>>, extents<dyn, 4>>;
  const auto a = op_test::random<double>({5, 4}, 46);
  const auto x = sim::distribute_tensor<L>(a.data, L(extents<dyn, 4>(5)));
  // No groups for a dynamic input: replicated first, then reshaped.
  op_test::check_close(sim::reshape<2, 10>(x), view_test::ref_reshape(view_test::widen(a), {2, 10}), 0);
  op_test::check_close(sim::flatten(x), view_test::ref_reshape(view_test::widen(a), {20}), 0);
}

TEST_CASE("reshape of an empty tensor", "[views]") {
  using L = layout<mesh<3>, placements<shard<0>>, extents<0, 4>>;
  const auto x = sim::distribute_tensor<L>(std::vector<float>{});
  const auto y = sim::reshape<4, 0>(x);
  CHECK(y.shape()[0] == 4);
  CHECK(y.full_tensor().empty());
}
