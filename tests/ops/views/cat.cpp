// tests/ops/views/cat.cpp — cat of 2, 3 and 4 dtensors, over placement pairs on 1-d meshes
// (mesh<4> even, mesh<3> uneven) and mesh<2, 2>, partial inputs included, against one device.
#include "view_test.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/cat.hpp"

namespace {

using namespace spmd;
using view_test::host_tensor;
using view_test::index_t;

// The second input's placements: a few per mesh (each pair instantiates its redistributions).
template <class Mesh>
void for_each_second(auto&& f) {
  using psum = partial<reduce_op::sum>;
  if constexpr (Mesh::ndim == 1) {
    f.template operator()<placements<replicate>>();
    f.template operator()<placements<shard<0>>>();
    f.template operator()<placements<shard<1>>>();
    f.template operator()<placements<psum>>();
  } else {
    f.template operator()<placements<replicate, shard<1>>>();
    f.template operator()<placements<shard<0>, replicate>>();
    f.template operator()<placements<psum, shard<1>>>();
  }
}

// a (A, C) and b (B, C) along dim 0; a and b' (A, B) along dim 1.
template <class Mesh, index_t A, index_t B, index_t C>
void sweep_pairs() {
  const auto a = op_test::random<float>({A, C}, 51), b = op_test::random<float>({B, C}, 52);
  const auto bt = op_test::random<float>({A, B}, 53);
  const auto wa = view_test::widen(a);
  const auto want0 = view_test::ref_cat({wa, view_test::widen(b)}, 0);
  const auto want1 = view_test::ref_cat({wa, view_test::widen(bt)}, 1);
  view_test::for_each_layout<Mesh, 2>([&]<class PA>() {
    const auto x = sim::distribute_tensor<layout<Mesh, PA, extents<A, C>>>(a.data);
    for_each_second<Mesh>([&]<class PB>() {
      INFO("mesh " << Mesh::size << " a " << op_test::placements_text<PA>() << " b "
                   << op_test::placements_text<PB>());
      const auto y = sim::distribute_tensor<layout<Mesh, PB, extents<B, C>>>(b.data);
      op_test::check_close(sim::cat<0>(x, y), want0, 1e-6);
      const auto z = sim::distribute_tensor<layout<Mesh, PB, extents<A, B>>>(bt.data);
      op_test::check_close(sim::cat<-1>(x, z), want1, 1e-6);
    });
  });
}

}  // namespace

TEST_CASE("cat of two over placement pairs", "[cat]") {
  sweep_pairs<mesh<4>, 8, 4, 4>();
  sweep_pairs<mesh<3>, 5, 2, 7>();
  sweep_pairs<mesh<2, 2>, 3, 5, 6>();
}

TEST_CASE("cat of three and four, partials passed through", "[cat]") {
  using Mesh = mesh<2, 2>;
  using psum = partial<reduce_op::sum>;
  const auto a = op_test::random<double>({3, 5}, 54), b = op_test::random<double>({3, 2}, 55);
  const auto c = op_test::random<double>({3, 4}, 56), d = op_test::random<double>({3, 1}, 57);
  const auto want3 = view_test::ref_cat({a, b, c}, 1), want4 = view_test::ref_cat({a, b, c, d}, 1);
  {  // every input P(sum) on mesh dim 0, S(0) on mesh dim 1: the cat stays [P(sum), S(0)].
    using P = placements<psum, shard<0>>;
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<3, 5>>>(a.data);
    const auto y = sim::distribute_tensor<layout<Mesh, P, extents<3, 2>>>(b.data);
    const auto z = sim::distribute_tensor<layout<Mesh, P, extents<3, 4>>>(c.data);
    const auto w = sim::distribute_tensor<layout<Mesh, P, extents<3, 1>>>(d.data);
    const auto r3 = sim::cat<1>(x, y, z);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(r3)>::placements_type, P>);
    op_test::check_close(r3, want3, 1e-12);
    op_test::check_close(sim::cat<1>(x, y, z, w), want4, 1e-12);
  }
  {  // P(max) pass-through, and a mix: sharded along the cat dim, replicated, P(max).
    using Pm = placements<partial<reduce_op::max>, replicate>;
    const auto x = sim::distribute_tensor<layout<Mesh, Pm, extents<3, 5>>>(a.data);
    const auto y = sim::distribute_tensor<layout<Mesh, Pm, extents<3, 2>>>(b.data);
    const auto z = sim::distribute_tensor<layout<Mesh, placements<replicate, shard<1>>, extents<3, 4>>>(c.data);
    const auto w = sim::distribute_tensor<layout<Mesh, placements<shard<0>, shard<0>>, extents<3, 1>>>(d.data);
    const auto rm = sim::cat<1>(x, y);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(rm)>::placements_type, Pm>);
    op_test::check_close(rm, view_test::ref_cat({a, b}, 1), 1e-12);
    op_test::check_close(sim::cat<1>(x, y, z, w), want4, 1e-12);
  }
  {  // forced output
    const auto x = sim::distribute_tensor<layout<Mesh, placements<shard<0>, replicate>, extents<3, 5>>>(a.data);
    const auto y = sim::distribute_tensor<layout<Mesh, placements<replicate, shard<0>>, extents<3, 2>>>(b.data);
    const auto r = sim::cat<placements<replicate, shard<1>>, 1>(x, y);
    static_assert(std::is_same_v<std::remove_cvref_t<decltype(r)>::placements_type, placements<replicate, shard<1>>>);
    op_test::check_close(r, view_test::ref_cat({a, b}, 1), 0);
  }
}
