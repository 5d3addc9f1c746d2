// tests/ops/tp/custom.cpp — users' own operators: a sharding rule registered as data with a
// local kernel (run by sim::apply, resolved by the compiler like the built-in ops), and
// local_map with declared placements.
#include <type_traits>

#include "../common/op_test.hpp"
#include "spmd/ops/rule.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/apply.hpp"
#include "spmd/runtime/ops/local_map.hpp"

namespace {

using namespace spmd;
using op_test::host_tensor;
using op_test::index_t;

// [docs:user_op]
// A user's op: the squared L2 norm of each row, y_i = sum_j x_ij^2. Sharding j leaves each
// rank a partial sum of squares, so the rule says j reduces with sum (y is then P(sum)).
// The op is not linear in x, so it passes no Partial input through.
struct row_sq_norm {
  static constexpr ops::op_rule rule(const ops::op_context&) {
    return ops::einsum("ij->i").reduces('j', reduce_op::sum);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, ops::max_op_inputs>& in) {
    return shape_vec{{in[0][0]}, 1};
  }
  template <class T>
  void local(sim::strided_view<T> out, const sim::op_rank_info&, sim::strided_view<const T> x) const {
    for (index_t i = 0; i < x.extent(0); ++i) {
      T s = 0;
      for (index_t j = 0; j < x.extent(1); ++j) s += x(i, j) * x(i, j);
      out(i) = s;
    }
  }
};
// usage: auto y = sim::apply(row_sq_norm{}, x);   // x [S(1)] -> y [P(sum)], no communication
// [/docs:user_op]

host_tensor<double> ref_row_sq_norm(const host_tensor<double>& x) {
  auto y = host_tensor<double>::zeros({x.shape[0]});
  for (index_t i = 0; i < x.shape[0]; ++i)
    for (index_t j = 0; j < x.shape[1]; ++j) y.at({i}) += x.at({i, j}) * x.at({i, j});
  return y;
}

template <class... P>
using pl = placements<P...>;

TEST_CASE("a user's op: its rule is resolved by the compiler", "[custom]") {
  using M = mesh<3>;
  using XS1 = layout<M, pl<shard<1>>, extents<5, 7>>;
  using XS0 = layout<M, pl<shard<0>>, extents<5, 7>>;
  using XP = layout<M, pl<partial<>>, extents<5, 7>>;
  static_assert(std::is_same_v<ops::resolved<row_sq_norm, double, void, XS1>::out_placements, pl<partial<>>>);
  static_assert(std::is_same_v<ops::resolved<row_sq_norm, double, void, XS0>::out_placements, pl<shard<0>>>);
  // A partial input is not squared as is: it is reduced first.
  using RP = ops::resolved<row_sq_norm, double, void, XP>;
  static_assert(RP::input_moves<0> && !std::is_same_v<RP::out_placements, pl<partial<>>>);

  const auto x = op_test::random<double>({5, 7}, 5);
  const auto want = ref_row_sq_norm(x);
  op_test::for_each_placements<M, 2>([&]<class P>() {
    INFO("x " << op_test::placements_text<P>());
    const auto d = sim::distribute_tensor<layout<M, P, extents<5, 7>>>(x.data);
    op_test::check_close(sim::apply(row_sq_norm{}, d), want, 1e-12);
    op_test::check_close(sim::apply<pl<replicate>>(row_sq_norm{}, d), want, 1e-12);  // forced
  });
  op_test::for_each_placements<mesh<2, 2>, 2>([&]<class P>() {
    INFO("x " << op_test::placements_text<P>());
    const auto d = sim::distribute_tensor<layout<mesh<2, 2>, P, extents<5, 7>>>(x.data);
    op_test::check_close(sim::apply(row_sq_norm{}, d), want, 1e-12);
  });
}

TEST_CASE("local_map: declared placements, the user's function per shard", "[local_map]") {
  using M = mesh<4>;
  using In = layout<M, pl<shard<1>>, extents<6, 8>>;  // columns sharded ...
  using Out = layout<M, pl<shard<0>>, extents<6, 8>>;
  const auto x = op_test::random<double>({6, 8}, 6);
  // A row-wise prefix sum, written for whole rows: declare rows sharded (S(0)) in and out.
  auto prefix = [](auto out, auto in) {
    for (index_t i = 0; i < in.extent(0); ++i) {
      double s = 0;
      for (index_t j = 0; j < in.extent(1); ++j) out(i, j) = s += in(i, j);
    }
  };
  sim::comm_counter comm;
  const auto y = sim::local_map<Out, sim::in_placements<pl<shard<0>>>>(
      prefix, sim::distribute_tensor<In>(x.data));  // ... so they are moved to rows first
  CHECK(comm.count(step_kind::all_to_all) == 1);
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(y)>, sim::dtensor<double, Out>>);
  auto want = x;
  for (index_t i = 0; i < 6; ++i)
    for (index_t j = 1; j < 8; ++j) want.at({i, j}) += want.at({i, j - 1});
  op_test::check_close(y, want, 1e-12);

  // With the rank: each rank adds its rank id to its rows (a non-SPMD function).
  const auto z = sim::local_map<Out, sim::in_placements<pl<shard<0>>>>(
      [](index_t rank, auto out, auto in) {
        for (index_t i = 0; i < in.extent(0); ++i)
          for (index_t j = 0; j < in.extent(1); ++j) out(i, j) = in(i, j) + double(rank);
      },
      sim::distribute_tensor<Out>(x.data));
  const auto zf = z.full_tensor();
  CHECK(zf[0] == x.data[0]);                   // row 0: rank 0
  CHECK(zf[5 * 8] == x.data[5 * 8] + 2.0);     // row 5: rank 2 (torch.chunk: rows 2, 2, 2, 0)
}

}  // namespace
