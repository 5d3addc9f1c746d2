// tests/ops/views/relabel.cpp — the views that relabel dims: transpose, permute, squeeze and
// unsqueeze, over layouts on 1-d meshes (mesh<4> even, mesh<3> uneven: every placement list
// with P(sum) and P(max)) and mesh<2, 2> (a representative subset), against one device.
#include "view_test.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace {

using namespace spmd;
using view_test::host_tensor;
using view_test::index_t;

template <class Mesh, index_t A, index_t B>
void sweep_2d() {
  const auto a = op_test::random<float>({A, B}, 31);
  const auto w = view_test::widen(a);
  const auto want_t = view_test::ref_permute(w, {1, 0});
  const auto want_u0 = view_test::ref_reshape(w, {1, A, B});
  const auto want_u1 = view_test::ref_reshape(w, {A, 1, B});
  view_test::for_each_layout<Mesh, 2>([&]<class P>() {
    INFO("mesh " << Mesh::size << " x (" << A << ", " << B << ") " << op_test::placements_text<P>());
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<A, B>>>(a.data);
    op_test::check_close(sim::transpose<0, 1>(x), want_t, 1e-6);
    op_test::check_close(sim::transpose<-1, 0>(x), want_t, 1e-6);
    op_test::check_close(sim::permute<1, 0>(x), want_t, 1e-6);
    op_test::check_close(sim::unsqueeze<0>(x), want_u0, 1e-6);
    op_test::check_close(sim::unsqueeze<1>(x), want_u1, 1e-6);
  });
}

template <class Mesh, index_t A, index_t B, index_t C>
void sweep_3d() {
  const auto a = op_test::random<float>({A, B, C}, 32);
  const auto w = view_test::widen(a);
  const auto want_p = view_test::ref_permute(w, {2, 0, 1});
  const auto want_t = view_test::ref_permute(w, {0, 2, 1});
  view_test::for_each_layout<Mesh, 3>([&]<class P>() {
    INFO("mesh " << Mesh::size << " x (" << A << ", " << B << ", " << C << ") "
                 << op_test::placements_text<P>());
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<A, B, C>>>(a.data);
    op_test::check_close(sim::permute<2, 0, 1>(x), want_p, 1e-6);
    op_test::check_close(sim::transpose<1, 2>(x), want_t, 1e-6);
  });
}

// (A, 1, B): squeeze<1> and squeeze<-2>; a sharded size-1 dim is gathered first.
template <class Mesh, index_t A, index_t B>
void sweep_squeeze() {
  const auto a = op_test::random<float>({A, 1, B}, 33);
  const auto want = view_test::ref_reshape(view_test::widen(a), {A, B});
  view_test::for_each_layout<Mesh, 3>([&]<class P>() {
    INFO("mesh " << Mesh::size << " x (" << A << ", 1, " << B << ") " << op_test::placements_text<P>());
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<A, 1, B>>>(a.data);
    op_test::check_close(sim::squeeze<1>(x), want, 1e-6);
  });
}

}  // namespace

TEST_CASE("transpose, permute, unsqueeze of a matrix", "[views]") {
  sweep_2d<mesh<4>, 8, 4>();   // even
  sweep_2d<mesh<3>, 5, 7>();   // uneven: 2, 2, 1 rows; 3, 3, 1 columns
  sweep_2d<mesh<2, 2>, 5, 6>();
}

TEST_CASE("permute and transpose of a 3-d tensor", "[views]") {
  sweep_3d<mesh<4>, 4, 8, 2>();
  sweep_3d<mesh<3>, 5, 2, 4>();
  sweep_3d<mesh<2, 2>, 3, 4, 5>();
}

TEST_CASE("squeeze", "[views]") {
  sweep_squeeze<mesh<4>, 8, 4>();
  sweep_squeeze<mesh<3>, 5, 4>();
  sweep_squeeze<mesh<2, 2>, 5, 6>();
}

TEST_CASE("forced output placements", "[views]") {
  using Mesh = mesh<2, 2>;
  const auto a = op_test::random<double>({4, 6}, 34);
  const auto x = sim::distribute_tensor<layout<Mesh, placements<shard<0>, replicate>, extents<4, 6>>>(a.data);
  const auto y = sim::transpose<placements<replicate, shard<0>>, 0, 1>(x);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>::placements_type, placements<replicate, shard<0>>>);
  op_test::check_close(y, view_test::ref_permute(view_test::widen(a), {1, 0}), 0);
}
