// tests/ops/tp/tp.cpp — tensor-parallel building blocks: linear, column- and row-parallel
// layers and the Megatron MLP (one all_reduce), on even and uneven splits, against one device.
#include <string>
#include <type_traits>

#include "../common/op_test.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/io/layer_summary.hpp"
#include "spmd/runtime/ops/tp.hpp"

namespace {

using namespace spmd;
using op_test::host_tensor;
using op_test::index_t;

/// y = x W^T + b on one device (W is (out, in)).
host_tensor<double> ref_linear(const host_tensor<double>& x, const host_tensor<double>& w,
                               const host_tensor<double>& b) {
  const index_t n = x.shape[0], in = x.shape[1], out = w.shape[0];
  auto y = host_tensor<double>::zeros({n, out});
  for (index_t i = 0; i < n; ++i)
    for (index_t o = 0; o < out; ++o) {
      double s = b.at({o});
      for (index_t k = 0; k < in; ++k) s += x.at({i, k}) * w.at({o, k});
      y.at({i, o}) = s;
    }
  return y;
}
host_tensor<double> ref_relu(host_tensor<double> x) {
  for (double& v : x.data) v = v > 0 ? v : 0;
  return x;
}

template <class... P>
using pl = placements<P...>;

template <class Mesh, int Tp, index_t B, index_t D, index_t H, class XP>
void check_mlp() {
  const auto x = op_test::random<double>({B, D}, 1);
  const auto w1 = op_test::random<double>({H, D}, 2), b1 = op_test::random<double>({H}, 3);
  const auto w2 = op_test::random<double>({D, H}, 4), b2 = op_test::random<double>({D}, 5);
  const auto want = ref_linear(ref_relu(ref_linear(x, w1, b1)), w2, b2);

  using Up = sim::column_parallel_linear<double, Mesh, Tp, D, H>;
  using Down = sim::row_parallel_linear<double, Mesh, Tp, H, D>;
  const Up up = Up::from_full(w1.data, b1.data);
  const Down down = Down::from_full(w2.data, b2.data);
  const auto dx = sim::distribute_tensor<layout<Mesh, XP, extents<B, D>>>(x.data);

  sim::comm_counter first;
  const auto h = sim::relu(up(dx));
  CHECK(first.total() == 0);  // column-parallel: no communication
  static_assert(std::is_same_v<boost::mp11::mp_at_c<typename decltype(h)::placements_type, Tp>, shard<1>>);
  sim::comm_counter second;
  const auto y = down(h);
  CHECK(second.total() == 1);  // row-parallel: one all_reduce over the tp dim
  CHECK(second.count(step_kind::all_reduce, dim_mask{1} << Tp) == 1);
  static_assert(std::is_same_v<boost::mp11::mp_at_c<typename decltype(y)::placements_type, Tp>, replicate>);
  op_test::check_close(y, want, 1e-12);

  // The layers say what they will do.
  const std::string d = spmd::io::layer_summary<Down, typename decltype(h)::layout_type>();
  CHECK(d.find("P(sum)") != std::string::npos);
  CHECK(d.find("1 collective") != std::string::npos);
}

TEST_CASE("the Megatron MLP: column- then row-parallel, one all_reduce", "[tp]") {
  check_mlp<mesh<2, 4>::named<"dp", "tp">, 1, 16, 32, 64, pl<shard<0>, replicate>>();
  check_mlp<mesh<4>, 0, 6, 8, 12, pl<replicate>>();
  // Uneven: 10 hidden units over 4 tp ranks (3, 3, 3, 1), batch 5 over dp 2.
  check_mlp<mesh<2, 4>, 1, 5, 6, 10, pl<shard<0>, replicate>>();
  // tp on mesh dim 0.
  check_mlp<mesh<4, 2>, 0, 6, 5, 7, pl<replicate, shard<0>>>();
}

TEST_CASE("linear over layouts, with and without bias", "[tp]") {
  using M = mesh<3>;
  const auto x = op_test::random<double>({5, 7}, 7), w = op_test::random<double>({4, 7}, 8),
             b = op_test::random<double>({4}, 9);
  const auto want = ref_linear(x, w, b);
  auto want_nob = want;
  for (index_t i = 0; i < 5; ++i)
    for (index_t o = 0; o < 4; ++o) want_nob.at({i, o}) -= b.at({o});
  op_test::for_each_placements<M, 2>([&]<class PX>() {
    op_test::for_each_placements<M, 2>([&]<class PW>() {
      INFO("x " << op_test::placements_text<PX>() << " W " << op_test::placements_text<PW>());
      const auto dx = sim::distribute_tensor<layout<M, PX, extents<5, 7>>>(x.data);
      const auto dw = sim::distribute_tensor<layout<M, PW, extents<4, 7>>>(w.data);
      const auto db = sim::distribute_tensor<layout<M, pl<replicate>, extents<4>>>(b.data);
      op_test::check_close(sim::linear(dx, dw, db), want, 1e-12);
      op_test::check_close(sim::linear(dx, dw), want_nob, 1e-12);
    });
  });
}

}  // namespace
