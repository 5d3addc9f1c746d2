// tests/cuda/collective_tables.cpp — the CUDA backend's collectives on local tensors, on the
// host: each collective's step table (backends/cuda/collectives.hpp, built from the locals'
// shapes) run by the step body over an emulated grid must give every rank the simulation's
// collective bit for bit, for every group of a 2 x 4 mesh, even and uneven locals, every
// reduce op and element type. No GPU involved.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "spmd/backends/cuda/collectives_table.hpp"
#include "spmd/backends/cuda/grid_emulation.hpp"
#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "run_table.hpp"

namespace {

using spmd::index_t;
using spmd::reduce_op;
using spmd::shape_vec;
using M = spmd::mesh<2, 4>;

template <class T>
spmd::sim::local_tensor<T, M> per_rank(index_t (*rows)(index_t), index_t cols) {
  std::map<index_t, spmd::host::host_tensor<T>> m;
  for (index_t i = 0; i < M::size; ++i) {
    const index_t r = M::rank_at(i), n = rows(r);
    std::vector<T> v(static_cast<std::size_t>(n * cols));
    for (index_t k = 0; k < n * cols; ++k) v[static_cast<std::size_t>(k)] = static_cast<T>(((k * 7 + r * 13) % 23) - 11) * T(0.5);
    if constexpr (!std::is_integral_v<T>)
      if (!v.empty()) v[0] = static_cast<T>(-0.0f);
    m[r] = spmd::host::host_tensor<T>{{n, cols}, v};
  }
  return spmd::sim::local_tensor<T, M>(m);
}

/// Runs a collective's table on x's shards over the emulated grid; true when every rank's
/// output equals `want`'s bit for bit.
long& finished_widened() {
  static long n = 0;
  return n;
}

/// Runs a collective's table on x's shards over the emulated grid, as built and as the
/// backend runs it (finish: 16-byte units where it can, rows interleaved); true when every
/// rank's output equals `want`'s bit for bit both times.
template <class T>
bool run_matches(const spmd::cuda::coll_detail::table& tb, const spmd::sim::local_tensor<T, M>& x,
                 const spmd::sim::local_tensor<T, M>& want) {
  const spmd::host::local_set<T>& in = x.shards();
  std::vector<const T*> ip(M::size);
  for (index_t i = 0; i < M::size; ++i) ip[static_cast<std::size_t>(i)] = in.data(i);
  spmd::cuda::step_table done = tb.t;
  const bool wide = spmd::cuda::finish(done, sizeof(T));
  finished_widened() += wide ? 1 : 0;
  for (const spmd::cuda::step_table* t : std::initializer_list<const spmd::cuda::step_table*>{&tb.t, &done}) {
    std::vector<spmd_test::aligned_vec<T>> outs(M::size);
    std::vector<T*> op(M::size);
    for (index_t i = 0; i < M::size; ++i) {
      const auto k = static_cast<std::size_t>(i);
      outs[k] = spmd_test::aligned_vec<T>(static_cast<std::size_t>(spmd::host::shape_elems(tb.out[k])));
      op[k] = outs[k].data();
    }
    spmd_test::run_on_grid<T>(*t, t == &done && wide, ip.data(), op.data(), M::size);
    for (index_t i = 0; i < M::size; ++i) {
      const auto w = want.to_local(M::rank_at(i));
      const auto k = static_cast<std::size_t>(i);
      if (!(tb.out[k] == want.shards().shape(i))) return false;
      const auto len = static_cast<std::size_t>(spmd::host::shape_elems(tb.out[k]));
      if (len != w.data.size() || (len > 0 && std::memcmp(op[k], w.data.data(), len * sizeof(T)) != 0)) return false;
    }
  }
  return true;
}

template <class T>
std::vector<shape_vec> shapes(const spmd::sim::local_tensor<T, M>& x) {
  std::vector<shape_vec> s;
  for (index_t i = 0; i < M::size; ++i) s.push_back(x.shards().shape(i));
  return s;
}

template <class T>
void check_all(long& n) {
  namespace cu = spmd::cuda;
  const auto even = per_rank<T>([](index_t) -> index_t { return 5; }, 16);
  const auto uneven = per_rank<T>([](index_t r) -> index_t { return r % 3; }, 4);
  std::vector<reduce_op> ops = {reduce_op::sum, reduce_op::max, reduce_op::min, reduce_op::product};
  if (!std::is_integral_v<T>) ops.push_back(reduce_op::avg);
  for (spmd::dim_mask g : {spmd::dim_mask{1}, spmd::dim_mask{2}, spmd::dim_mask{3}}) {
    for (reduce_op op : ops) {
      INFO("group " << g << " op " << spmd::reduce_op_name(op));
      CHECK(run_matches(cu::all_reduce_table<M, T>(shapes(even), op, g), even, spmd::sim::all_reduce(even, op, g)));
      for (int dim : {0, 1})
        CHECK(run_matches(cu::reduce_scatter_table<M, T>(shapes(even), op, dim, g), even,
                          spmd::sim::reduce_scatter(even, op, dim, g)));
      n += 3;
    }
    for (index_t src : {index_t{0}, M::rank_at(M::size - 1)})
      CHECK(run_matches(cu::broadcast_table<M, T>(shapes(uneven), src, g), uneven, spmd::sim::broadcast(uneven, src, g)));
    CHECK(run_matches(cu::all_gather_table<M, T>(shapes(uneven), 0, g), uneven, spmd::sim::all_gather(uneven, 0, g)));
    CHECK(run_matches(cu::all_gather_table<M, T>(shapes(even), 1, g), even, spmd::sim::all_gather(even, 1, g)));
    CHECK(!cu::all_gather_table<M, T>(shapes(even), 1, g).t.fanout.empty());  // pieces read once
    CHECK(run_matches(cu::all_to_all_table<M, T>(shapes(even), 1, 0, g), even, spmd::sim::all_to_all(even, 1, 0, g)));
    n += 5;
  }
}

}  // namespace

TEST_CASE("collective tables over the emulated grid give the simulation's collectives", "[cuda][emulation]") {
  long n = 0;
  check_all<float>(n);
  check_all<double>(n);
  check_all<spmd::bfloat16>(n);
  check_all<spmd::float16>(n);
  check_all<std::int32_t>(n);
  check_all<std::int64_t>(n);
  CHECK(n > 200);
  INFO(finished_widened() << " tables widened");
  CHECK(finished_widened() > 50);
}

TEST_CASE("collective tables refuse bad input with a sentence", "[cuda][emulation]") {
  std::vector<shape_vec> s(M::size);
  for (auto& x : s) x.push_back(4);
  s[3][0] = 5;
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH((spmd::cuda::all_reduce_table<M, float>(s, reduce_op::sum, 3)),
                    Contains("rank 3's local [5] differs from rank 0's [4]"));
  CHECK_THROWS_WITH((spmd::cuda::all_gather_table<M, float>(s, 2, 1)), Contains("dim 2 is out of range"));
  CHECK_THROWS_WITH((spmd::cuda::broadcast_table<M, float>(s, 9, 1)), Contains("source rank 9 is not in the mesh"));
  CHECK_THROWS_WITH((spmd::cuda::all_reduce_table<M, std::int32_t>(s, reduce_op::avg, 1)), Contains("avg"));
}
