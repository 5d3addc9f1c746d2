// spmd/runtime/ops/tp.hpp — tensor-parallel building blocks (Megatron-LM): linear layers whose
// weights are sharded over one mesh dim, and their composition into an MLP with a single
// all_reduce.
//
//   using M = spmd::mesh<2, 4>::named<"dp", "tp">;
//   auto up = column_parallel_linear<float, M, 1, 32, 64>::from_full(w1, b1);  // W1 (64, 32)
//   auto down = row_parallel_linear<float, M, 1, 64, 32>::from_full(w2, b2);   // W2 (32, 64)
//   auto y = down(relu(up(x)));   // x [S(0), R] -> [S(0), S(1)] -> [S(0), P(sum)] -> + b2
//
// Nothing here chooses placements at run time: the layers fix their weights' layouts, and
// sim::linear's sharding (x · Wᵀ by the matmul_t rule, + b by the add rule) is resolved by
// the compiler. Column-parallel: W split by output features, so x · Wᵀ is sharded on its last
// dim with no communication. Row-parallel: W split by input features, so x · Wᵀ of a last-dim
// sharded x is a P(sum); adding the replicated bias reduces it first — the one all_reduce.
#pragma once

#include <utility>
#include <vector>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include "spmd/core/layout.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/matmul.hpp"

namespace spmd::runtime {

/// placements<...> with P on mesh dim At and replicate on the others.
template <int MeshDims, int At, class P>
using placements_on = boost::mp11::mp_rename<
    boost::mp11::mp_replace_at_c<boost::mp11::mp_repeat_c<boost::mp11::mp_list<replicate>, MeshDims>,
                                 At, P>,
    placements>;

/// x · Wᵀ, W being (out, in) as in torch.nn.Linear.
template <class Forced = void, element T, class LX, class LW, class Bk>
auto linear(const dtensor<T, LX, Bk>& x, const dtensor<T, LW, Bk>& w) {
  return matmul_t<Forced>(x, w);
}
/// x · Wᵀ + b.
template <class Forced = void, element T, class LX, class LW, class LB, class Bk>
auto linear(const dtensor<T, LX, Bk>& x, const dtensor<T, LW, Bk>& w, const dtensor<T, LB, Bk>& b) {
  static_assert(LB::rank == 1, "spmd::sim::linear: the bias must be 1-d (out features).");
  return add<Forced>(matmul_t(x, w), b);
}

namespace detail {
template <element T, class LX, class LW, class Bk>
using linear_product_t = decltype(matmul_t(std::declval<const dtensor<T, LX, Bk>&>(),
                                           std::declval<const dtensor<T, LW, Bk>&>()));
}  // namespace detail

/// W (Out, In) and b (Out) split by output features over mesh dim TpDim.
template <element T, class Mesh, int TpDim, index_t In, index_t Out, class Bk>
struct column_parallel_linear {
  static_assert(TpDim >= 0 && TpDim < Mesh::ndim,
                "spmd::sim::column_parallel_linear: TpDim is not a dim of the mesh.");
  using weight_layout = layout<Mesh, placements_on<Mesh::ndim, TpDim, shard<0>>, extents<Out, In>>;
  using bias_layout = layout<Mesh, placements_on<Mesh::ndim, TpDim, shard<0>>, extents<Out>>;
  dtensor<T, weight_layout, Bk> weight;
  dtensor<T, bias_layout, Bk> bias;

  /// From the one-device weight (Out x In, row-major) and bias (Out).
  static column_parallel_linear from_full(const std::vector<T>& w, const std::vector<T>& b) {
    return {factories<Bk>::template distribute_tensor<weight_layout>(w),
            factories<Bk>::template distribute_tensor<bias_layout>(b)};
  }
  template <class LX>
  auto operator()(const dtensor<T, LX, Bk>& x) const {
    return linear(x, weight, bias);
  }
  // What io::layer_summary (spmd/io/layer_summary.hpp) prints the decisions of: the bias is
  // added with the placements the add rule picks.
  using element_type = T;
  using backend_type = Bk;
  template <class LX>
  using bias_forced = void;
};

/// W (Out, In) split by input features over mesh dim TpDim; b (Out) replicated. The output
/// is replicated over TpDim (Megatron's row-parallel layer): x · Wᵀ is a P(sum) there, and
/// the forced placements make it one all_reduce, not the cheaper reduce_scatter the
/// compiler would pick on its own (which leaves the rows split over TpDim).
template <element T, class Mesh, int TpDim, index_t In, index_t Out, class Bk>
struct row_parallel_linear {
  static_assert(TpDim >= 0 && TpDim < Mesh::ndim,
                "spmd::sim::row_parallel_linear: TpDim is not a dim of the mesh.");
  using weight_layout = layout<Mesh, placements_on<Mesh::ndim, TpDim, shard<1>>, extents<Out, In>>;
  using bias_layout = layout<Mesh, placements_on<Mesh::ndim, TpDim, replicate>, extents<Out>>;
  dtensor<T, weight_layout, Bk> weight;
  dtensor<T, bias_layout, Bk> bias;

  static row_parallel_linear from_full(const std::vector<T>& w, const std::vector<T>& b) {
    return {factories<Bk>::template distribute_tensor<weight_layout>(w),
            factories<Bk>::template distribute_tensor<bias_layout>(b)};
  }
  /// The output's placements for an input of layout LX: the product's, with TpDim replicated.
  template <class LX>
  using out_placements = boost::mp11::mp_replace_at_c<
      typename detail::linear_product_t<T, LX, weight_layout, Bk>::placements_type, TpDim, replicate>;

  template <class LX>
  auto operator()(const dtensor<T, LX, Bk>& x) const {
    return add<out_placements<LX>>(matmul_t(x, weight), bias);
  }
  using element_type = T;
  using backend_type = Bk;
  template <class LX>
  using bias_forced = out_placements<LX>;
};

}  // namespace spmd::runtime
