// tests/ops/nn/softmax.cpp — softmax and log_softmax on dtensors over every layout drawn from
// {R, S(d), P(sum)} on 1-d (even, uneven) and 2-d meshes, against one device; the compiler's
// choices for the canonical cases; numerical stability.
#include <type_traits>

#include "../common/op_test.hpp"
#include "reference.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/nn.hpp"

namespace {

using namespace spmd;
using op_test::host_tensor;
using op_test::index_t;

// softmax<1> of x S(0): the rows are whole on every rank, nothing moves.
using M4 = mesh<4>;
using XS0 = layout<M4, placements<shard<0>>, extents<8, 6>>;
using XS1 = layout<M4, placements<shard<1>>, extents<8, 6>>;
using R0 = ops::resolved<ops::softmax<1, false>, float, void, XS0>;
static_assert(std::is_same_v<R0::out_placements, placements<shard<0>>>);
static_assert(!R0::input_moves<0>);
// softmax<1> of x S(1): the active dim cannot stay sharded, x is redistributed first.
using R1 = ops::resolved<ops::softmax<1, true>, float, void, XS1>;
static_assert(R1::input_moves<0>);
static_assert(!std::is_same_v<R1::out_placements, placements<shard<1>>>);
// Partial passes nowhere: a P(sum) input is reduced first.
using RP = ops::resolved<ops::softmax<0, false>, float, void,
                         layout<M4, placements<partial<reduce_op::sum>>, extents<8, 6>>>;
static_assert(RP::input_moves<0>);
static_assert(!RP::compute_placements::value()[0].is_partial());

template <class Mesh, int R, index_t... E>
void sweep(unsigned seed) {
  const auto a = op_test::random<float>({E...}, seed);
  const auto wa = nn_ref::widen(a);
  op_test::for_each_placements<Mesh, R>([&]<class P>() {
    INFO("mesh " << Mesh::size << " x " << op_test::placements_text<P>());
    const auto x = sim::distribute_tensor<layout<Mesh, P, extents<E...>>>(a.data);
    op_test::check_close(sim::softmax<R - 1>(x), nn_ref::softmax(wa, R - 1, false), 1e-6);
    op_test::check_close(sim::log_softmax<0>(x), nn_ref::softmax(wa, 0, true), 1e-6);
    const auto y = sim::softmax<-1>(x);
    static_assert(!nn_ref::shards_dim<typename std::remove_cvref_t<decltype(y)>::placements_type>(R - 1));
  });
}

}  // namespace

TEST_CASE("softmax and log_softmax over every layout, 1-d mesh", "[nn][softmax]") {
  sweep<mesh<4>, 2, 8, 6>(31);  // even
  sweep<mesh<3>, 2, 5, 7>(32);  // uneven: 2, 2, 1 and 3, 3, 1 pieces
}

TEST_CASE("softmax and log_softmax over every layout, 2-d mesh", "[nn][softmax]") {
  sweep<mesh<2, 2>, 3, 3, 5, 4>(33);
}

TEST_CASE("softmax of S(0) runs where x is; of S(1) after a redistribution", "[nn][softmax]") {
  const auto a = op_test::random<double>({8, 6}, 34);
  const auto x0 = sim::distribute_tensor<XS0>(a.data);
  const auto y0 = sim::softmax<1>(x0);
  static_assert(std::is_same_v<decltype(y0)::placements_type, placements<shard<0>>>);
  op_test::check_close(y0, nn_ref::softmax(a, 1, false), 1e-12);
  const auto x1 = sim::distribute_tensor<layout<M4, placements<shard<1>>, extents<8, 6>>>(a.data);
  const auto y1 = sim::log_softmax<1>(x1);
  static_assert(!std::is_same_v<decltype(y1)::placements_type, placements<shard<1>>>);
  op_test::check_close(y1, nn_ref::softmax(a, 1, true), 1e-12);
  // Forced output.
  op_test::check_close(sim::softmax<1, placements<replicate>>(x0), nn_ref::softmax(a, 1, false), 1e-12);
}

TEST_CASE("softmax is stable for large inputs", "[nn][softmax]") {
  auto a = op_test::random<float>({4, 5}, 35);
  for (float& v : a.data) v = v * 500.f + 1000.f;  // exp(1000) overflows: the max must go first
  const auto x = sim::distribute_tensor<layout<mesh<2>, placements<shard<0>>, extents<4, 5>>>(a.data);
  op_test::check_close(sim::softmax<1>(x), nn_ref::softmax(nn_ref::widen(a), 1, false), 1e-6);
  op_test::check_close(sim::log_softmax<1>(x), nn_ref::softmax(nn_ref::widen(a), 1, true), 1e-6);
  for (float v : sim::softmax<1>(x).full_tensor()) CHECK(std::isfinite(v));
}

TEST_CASE("softmax of bfloat16 and of dynamic extents", "[nn][softmax]") {
  const auto a = op_test::random<float>({6, 4}, 36);
  std::vector<bfloat16> b;
  for (float v : a.data) b.push_back(bfloat16(v));
  const auto xb = sim::distribute_tensor<layout<mesh<2>, placements<shard<0>>, extents<6, 4>>>(b);
  host_tensor<double> wb{a.shape, {}};
  for (bfloat16 v : b) wb.data.push_back(static_cast<double>(static_cast<float>(v)));
  op_test::check_close(sim::softmax<1>(xb), nn_ref::softmax(wb, 1, false), 1e-2);
  using LD = layout<mesh<3>, placements<shard<0>>, extents<dyn, 4>>;
  const auto xd = sim::distribute_tensor(a.data, LD(extents<dyn, 4>(6)));
  op_test::check_close(sim::log_softmax<1>(xd), nn_ref::softmax(nn_ref::widen(a), 1, true), 1e-6);
}
