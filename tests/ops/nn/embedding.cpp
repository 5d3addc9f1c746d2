// tests/ops/nn/embedding.cpp — embedding on dtensors over every pair of layouts drawn from
// {R, S(d), P(sum)} (weight and indices) on 1-d meshes, even and uneven, and representative
// pairs on a 2-d mesh, against one device; the compiler's choices (colwise, rowwise masked
// partial, batch-sharded); out-of-range indices.
#include <cstdint>
#include <stdexcept>
#include <type_traits>

#include "../common/op_test.hpp"
#include "reference.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/nn.hpp"

namespace {

using namespace spmd;
using op_test::host_tensor;
using op_test::index_t;

using M4 = mesh<4>;
using LIR = layout<M4, placements<replicate>, extents<4, 6>>;
using LIS = layout<M4, placements<shard<0>>, extents<4, 6>>;
template <class P>
using LWt = layout<M4, P, extents<12, 8>>;
// The op's inputs are (weight, indices): the weight first gives the output's element type.
template <class LWx, class LIx>
using emb = ops::resolved<ops::embedding, float, void, LWx, LIx>;
// Colwise: weight S(1) -> output sharded on its last dim.
static_assert(std::is_same_v<emb<LWt<placements<shard<1>>>, LIR>::out_placements, placements<shard<2>>>);
// Rowwise: weight S(0), indices R -> the masked partial, P(sum).
static_assert(std::is_same_v<emb<LWt<placements<shard<0>>>, LIR>::out_placements,
                             placements<partial<reduce_op::sum>>>);
static_assert(!emb<LWt<placements<shard<0>>>, LIR>::input_moves<0>);
// Indices sharded on a batch dim, weight R -> output sharded on that dim.
static_assert(std::is_same_v<emb<LWt<placements<replicate>>, LIS>::out_placements, placements<shard<0>>>);
// The gather is linear in the weight: P(sum) passes.
static_assert(std::is_same_v<emb<LWt<placements<partial<reduce_op::sum>>>, LIR>::out_placements,
                             placements<partial<reduce_op::sum>>>);
// 2-d: rowwise on one mesh dim, batch on the other.
static_assert(std::is_same_v<
              ops::resolved<ops::embedding, float, void,
                            layout<mesh<2, 2>, placements<replicate, shard<0>>, extents<12, 8>>,
                            layout<mesh<2, 2>, placements<shard<0>, replicate>, extents<4, 6>>>::out_placements,
              placements<shard<0>, partial<reduce_op::sum>>>);

template <class I>
host_tensor<I> random_indices(std::vector<index_t> shape, index_t vocab, unsigned seed) {
  return op_test::random<I>(std::move(shape), seed, 0, static_cast<double>(vocab));
}

template <class Mesh, class PW, class PI, class I, index_t V, index_t H, index_t A, index_t B>
void check_pair(const host_tensor<float>& w, const host_tensor<I>& idx, const host_tensor<double>& want) {
  INFO("mesh " << Mesh::size << " weight " << op_test::placements_text<PW>() << " indices "
               << op_test::placements_text<PI>());
  const auto dw = sim::distribute_tensor<layout<Mesh, PW, extents<V, H>>>(w.data);
  const auto di = sim::distribute_tensor<layout<Mesh, PI, extents<A, B>>>(idx.data);
  const auto y = sim::embedding(di, dw);
  static_assert(std::is_same_v<typename decltype(y)::value_type, float>);
  op_test::check_close(y, want, 1e-6);
}

template <class Mesh, index_t V, index_t H, index_t A, index_t B>
void sweep(unsigned seed) {
  const auto w = op_test::random<float>({V, H}, seed);
  const auto idx = random_indices<std::int64_t>({A, B}, V, seed + 1);
  const auto want = nn_ref::embedding(idx, nn_ref::widen(w));
  op_test::for_each_placements<Mesh, 2>([&]<class PW>() {
    if constexpr (Mesh::ndim == 1) {
      op_test::for_each_placements<Mesh, 2>([&]<class PI>() {
        check_pair<Mesh, PW, PI, std::int64_t, V, H, A, B>(w, idx, want);
      });
    } else {  // every weight layout with a few of the indices' (the full square: minutes)
      check_pair<Mesh, PW, placements<replicate, replicate>, std::int64_t, V, H, A, B>(w, idx, want);
      check_pair<Mesh, PW, placements<shard<0>, shard<1>>, std::int64_t, V, H, A, B>(w, idx, want);
    }
  });
}

}  // namespace

TEST_CASE("embedding over every layout pair, 1-d mesh", "[nn][embedding]") {
  sweep<mesh<4>, 12, 8, 4, 6>(51);  // even
  sweep<mesh<3>, 10, 5, 5, 4>(52);  // uneven: vocabulary rows 4, 3, 3; batch 2, 2, 1
}

TEST_CASE("embedding over weight layouts, 2-d mesh", "[nn][embedding]") {
  sweep<mesh<2, 2>, 7, 5, 3, 4>(53);
}

TEST_CASE("embedding: colwise, rowwise masked partial, int32 indices of rank 1 and 3",
          "[nn][embedding]") {
  const auto w = op_test::random<double>({12, 8}, 54);
  const auto idx = random_indices<std::int32_t>({6}, 12, 55);
  const auto want = nn_ref::embedding(idx, w);
  const auto di = sim::distribute_tensor<layout<M4, placements<replicate>, extents<6>>>(idx.data);
  const auto col = sim::embedding(di, sim::distribute_tensor<LWt<placements<shard<1>>>>(w.data));
  static_assert(std::is_same_v<decltype(col)::placements_type, placements<shard<1>>>);
  op_test::check_close(col, want, 0);
  const auto row = sim::embedding(di, sim::distribute_tensor<LWt<placements<shard<0>>>>(w.data));
  static_assert(std::is_same_v<decltype(row)::placements_type, placements<partial<reduce_op::sum>>>);
  op_test::check_close(row, want, 0);
  // Each rank wrote only the rows it holds (rows 3r .. 3r+2), zeros elsewhere.
  for (index_t r = 0; r < 4; ++r)
    for (index_t p = 0; p < 6; ++p)
      for (index_t k = 0; k < 8; ++k) {
        const index_t id = idx.data[static_cast<std::size_t>(p)];
        CHECK(row.local(r)(p, k) == (id / 3 == r ? w.at({id, k}) : 0.0));
      }
  // Rank-3 indices, forced replicated output.
  const auto idx3 = random_indices<std::int32_t>({2, 3, 2}, 12, 56);
  const auto d3 = sim::distribute_tensor<layout<M4, placements<shard<1>>, extents<2, 3, 2>>>(idx3.data);
  const auto y3 = sim::embedding<placements<replicate>>(d3, sim::distribute_tensor<LWt<placements<shard<0>>>>(w.data));
  op_test::check_close(y3, nn_ref::embedding(idx3, w), 0);
}

TEST_CASE("embedding: an index outside the vocabulary throws naming it and the rank",
          "[nn][embedding]") {
  const auto w = sim::distribute_tensor<LWt<placements<replicate>>>(std::vector<float>(96, 1.f));
  std::vector<std::int64_t> idx{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  // Indices S(0), weight R: nothing moves; row 2 (positions 12..17) is rank 2's, its first
  // index is 12.
  REQUIRE_THROWS_WITH(sim::embedding(sim::distribute_tensor<LIS>(idx), w),
                      "spmd::embedding: index 12 at [0, 0] of rank 2's indices is outside the "
                      "vocabulary [0, 12)");
  idx[12] = 0;
  idx[20] = -3;
  REQUIRE_THROWS_WITH(sim::embedding(sim::distribute_tensor<LIS>(idx), w),
                      Catch::Contains("index -3 at [0, 2] of rank 3's"));
  // Rowwise (weight S(0)): every rank checks all the indices, also those it does not hold.
  const auto w0 = sim::distribute_tensor<LWt<placements<shard<0>>>>(std::vector<float>(96, 1.f));
  REQUIRE_THROWS_AS(sim::embedding(sim::distribute_tensor<LIR>(idx), w0), std::out_of_range);
}

// embedding's weight gradient as one operator (the autograd layer's on host backends): the
// scatter-add against the rows summed by hand, over the layouts of g and the indices, an
// index outside the vocabulary named.
TEST_CASE("embedding_backward: the scatter-add over every layout of g and the indices", "[nn][embedding]") {
  using namespace spmd;
  constexpr index_t V = 7, N = 6, H = 4;
  const auto g = op_test::random<float>({N, H}, 71);
  const std::vector<std::int64_t> idx = {3, 0, 3, 6, 1, 3};
  host_tensor<double> want = host_tensor<double>::zeros({V, H});
  for (index_t p = 0; p < N; ++p)
    for (index_t k = 0; k < H; ++k)
      want.data[static_cast<std::size_t>(idx[static_cast<std::size_t>(p)] * H + k)] += g.data[static_cast<std::size_t>(p * H + k)];
  op_test::for_each_placements<mesh<2, 2>, 2>([&]<class P>() {
    INFO("g " << op_test::placements_text<P>());
    const auto gd = sim::distribute_tensor<layout<mesh<2, 2>, P, extents<N, H>>>(g.data);
    const auto id = sim::distribute_tensor<layout<mesh<2, 2>, placements<shard<0>, replicate>, extents<N>>>(idx);
    op_test::check_close(runtime::embedding_backward<V>(gd, id), want, 1e-6);
  });
  const std::vector<std::int64_t> bad = {3, 0, 9, 6, 1, 3};
  const auto gd = sim::distribute_tensor<layout<mesh<2>, placements<replicate>, extents<N, H>>>(g.data);
  const auto bd = sim::distribute_tensor<layout<mesh<2>, placements<replicate>, extents<N>>>(bad);
  REQUIRE_THROWS_WITH(runtime::embedding_backward<V>(gd, bd), Catch::Contains("index 9 at [2]"));
}
