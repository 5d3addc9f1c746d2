// tests/ops/matmul: matmul, matmul_t, t_matmul and bmm on dtensors over every placement pair drawn from
// {R, S(0), S(1), P(sum)} on 1-d and 2-d meshes, even and uneven, against one device; and the
// compiler's choices for the canonical cases.
#include <type_traits>

#include "../common/op_test.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/matmul.hpp"

namespace {

using namespace spmd;
using op_test::host_tensor;
using op_test::index_t;

/// op(a) · op(b), where op transposes a when `at` and b when `bt`.
host_tensor<double> ref_matmul(const host_tensor<double>& a, const host_tensor<double>& b,
                               bool bt, bool at = false) {
  const index_t m = at ? a.shape[1] : a.shape[0], k = at ? a.shape[0] : a.shape[1],
                n = bt ? b.shape[0] : b.shape[1];
  auto c = host_tensor<double>::zeros({m, n});
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      double s = 0;
      for (index_t p = 0; p < k; ++p)
        s += (at ? a.at({p, i}) : a.at({i, p})) * (bt ? b.at({j, p}) : b.at({p, j}));
      c.at({i, j}) = s;
    }
  return c;
}

template <class T>
host_tensor<double> widen(const host_tensor<T>& t) {
  return {t.shape, {t.data.begin(), t.data.end()}};
}

// On 2-d meshes w takes a few representative placements (every one of x's): each pair
// instantiates its redistributions, and the full square costs minutes of compile time.
template <class Mesh, int R>
void for_each_w(auto&& f) {
  if constexpr (Mesh::ndim == 1) {
    op_test::for_each_placements<Mesh, R>(f);
  } else {
    f.template operator()<placements<replicate, replicate>>();
    f.template operator()<placements<replicate, shard<1>>>();
    f.template operator()<placements<shard<0>, replicate>>();
    f.template operator()<placements<shard<1>, shard<0>>>();
    f.template operator()<placements<partial<reduce_op::sum>, replicate>>();
  }
}

template <class Mesh, index_t M, index_t K, index_t N>
void sweep_matmul() {
  const auto a = op_test::random<float>({M, K}, 11), b = op_test::random<float>({K, N}, 12);
  const auto bt = op_test::random<float>({N, K}, 13), at = op_test::random<float>({K, M}, 14);
  const auto want = ref_matmul(widen(a), widen(b), false);
  const auto want_t = ref_matmul(widen(a), widen(bt), true);
  const auto want_tm = ref_matmul(widen(at), widen(b), false, true);
  op_test::for_each_placements<Mesh, 2>([&]<class PA>() {
    for_each_w<Mesh, 2>([&]<class PB>() {
      INFO("mesh " << Mesh::size << " x " << op_test::placements_text<PA>() << " w "
                   << op_test::placements_text<PB>());
      using LA = layout<Mesh, PA, extents<M, K>>;
      const auto x = sim::distribute_tensor<LA>(a.data);
      op_test::check_close(sim::matmul(x, sim::distribute_tensor<layout<Mesh, PB, extents<K, N>>>(b.data)),
                           want, 1e-5);
      op_test::check_close(sim::matmul_t(x, sim::distribute_tensor<layout<Mesh, PB, extents<N, K>>>(bt.data)),
                           want_t, 1e-5);
      op_test::check_close(sim::t_matmul(sim::distribute_tensor<layout<Mesh, PA, extents<K, M>>>(at.data),
                                         sim::distribute_tensor<layout<Mesh, PB, extents<K, N>>>(b.data)),
                           want_tm, 1e-5);
    });
  });
}

}  // namespace

TEST_CASE("matmul over every placement pair, 1-d mesh", "[matmul]") {
  sweep_matmul<mesh<4>, 8, 12, 4>();  // even
  sweep_matmul<mesh<3>, 5, 7, 4>();   // uneven: 2, 2, 1 and 3, 3, 1 pieces
}

TEST_CASE("matmul over every placement pair, 2-d mesh", "[matmul]") {
  sweep_matmul<mesh<2, 2>, 6, 5, 3>();
}

TEST_CASE("bmm", "[matmul]") {
  using Mesh = mesh<2, 2>;
  const auto a = op_test::random<double>({3, 4, 5}, 21), b = op_test::random<double>({3, 5, 2}, 22);
  auto want = host_tensor<double>::zeros({3, 4, 2});
  for (index_t q = 0; q < 3; ++q)
    for (index_t i = 0; i < 4; ++i)
      for (index_t j = 0; j < 2; ++j) {
        double s = 0;
        for (index_t p = 0; p < 5; ++p) s += a.at({q, i, p}) * b.at({q, p, j});
        want.at({q, i, j}) = s;
      }
  for_each_w<Mesh, 3>([&]<class PA>() {
    using LB = layout<Mesh, placements<shard<0>, replicate>, extents<3, 5, 2>>;
    const auto x = sim::distribute_tensor<layout<Mesh, PA, extents<3, 4, 5>>>(a.data);
    INFO("x " << op_test::placements_text<PA>());
    op_test::check_close(sim::bmm(x, sim::distribute_tensor<LB>(b.data)), want, 1e-12);
  });
}

TEST_CASE("bmm with two batch dims: attention's (batch, heads) sharded on (dp, tp)", "[matmul]") {
  using Mesh = mesh<2, 2>;
  // (batch 3, heads 2, m 4, k 5) @ (3, 2, 5, 3): batch uneven on dp.
  const auto a = op_test::random<double>({3, 2, 4, 5}, 23), b = op_test::random<double>({3, 2, 5, 3}, 24);
  auto want = host_tensor<double>::zeros({3, 2, 4, 3});
  for (index_t q = 0; q < 3; ++q)
    for (index_t h = 0; h < 2; ++h)
      for (index_t i = 0; i < 4; ++i)
        for (index_t j = 0; j < 3; ++j) {
          double s = 0;
          for (index_t p = 0; p < 5; ++p) s += a.at({q, h, i, p}) * b.at({q, h, p, j});
          want.at({q, h, i, j}) = s;
        }
  auto check = [&]<class PA, class PB>() {
    INFO("x " << op_test::placements_text<PA>() << " w " << op_test::placements_text<PB>());
    const auto x = sim::distribute_tensor<layout<Mesh, PA, extents<3, 2, 4, 5>>>(a.data);
    const auto w = sim::distribute_tensor<layout<Mesh, PB, extents<3, 2, 5, 3>>>(b.data);
    op_test::check_close(sim::bmm(x, w), want, 1e-12);
  };
  using BH = placements<shard<0>, shard<1>>;  // batch on dp, heads on tp: no communication
  check.template operator()<BH, BH>();
  using Bv = decltype(sim::bmm(sim::distribute_tensor<layout<Mesh, BH, extents<3, 2, 4, 5>>>(a.data),
                               sim::distribute_tensor<layout<Mesh, BH, extents<3, 2, 5, 3>>>(b.data)));
  static_assert(std::is_same_v<typename Bv::placements_type, BH>);
  check.template operator()<placements<shard<1>, shard<2>>, placements<replicate, replicate>>();
  check.template operator()<placements<shard<3>, replicate>, placements<shard<2>, shard<0>>>();  // inner k: P(sum)
  check.template operator()<placements<partial<reduce_op::sum>, shard<0>>, placements<replicate, shard<0>>>();
  check.template operator()<placements<replicate, replicate>, placements<shard<3>, shard<1>>>();
}
