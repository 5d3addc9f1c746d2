// spmd/runtime/autograd/tp.hpp — the tensor-parallel blocks with trainable weights.
//
//   using Up = spmd::sim::column_parallel_linear<float, M, tp, 32, 64>;
//   using Down = spmd::sim::row_parallel_linear<float, M, tp, 64, 32>;
//   auto up = spmd::sim::trainable<Up>::from_full(w1, b1, "up");
//   auto down = spmd::sim::trainable<Down>::from_full(w2, b2, "down");
//   auto y = down(relu(up(x)));       // x a variable or a dtensor
//   sum<>(y).backward();              // up.weight.grad(), down.bias.grad(), ...
//
// The forward is the block's (runtime/ops/tp.hpp) on variables; the backward gives Megatron's
// conjugate pair with no code of its own: entering the column-parallel layer the input's
// gradient is a Partial(sum) over tp (x · W1 contracts the sharded features), reduced by one
// all_reduce into x's gradient layout; leaving the row-parallel layer the forward's
// all_reduce has an identity backward (Partial -> Replicate normalised). The weights'
// gradients keep their TP sharding and are Partial(sum) on the other mesh dims (the
// data-parallel dims, whose reduction belongs to DDP/FSDP), so the backward of an MLP
// costs one all_reduce, as the forward does.
#pragma once

#include <string>
#include <vector>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include "spmd/runtime/autograd/elementwise.hpp"
#include "spmd/runtime/autograd/matmul.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/ops/tp.hpp"

namespace spmd::runtime {

/// P on mesh dim At, Partial(sum) on the others: a TP weight's gradient placements.
template <int MeshDims, int At, class P>
using tp_grad_placements = boost::mp11::mp_rename<
    boost::mp11::mp_replace_at_c<
        boost::mp11::mp_repeat_c<boost::mp11::mp_list<partial<reduce_op::sum>>, MeshDims>, At, P>,
    placements>;

template <class Block>
struct trainable;

template <element T, class Mesh, int TpDim, index_t In, index_t Out, class Bk>
struct trainable<column_parallel_linear<T, Mesh, TpDim, In, Out, Bk>> {
  using block = column_parallel_linear<T, Mesh, TpDim, In, Out, Bk>;
  using weight_type = variable<T, typename block::weight_layout, Bk,
                               tp_grad_placements<Mesh::ndim, TpDim, shard<0>>>;
  using bias_type = variable<T, typename block::bias_layout, Bk,
                             tp_grad_placements<Mesh::ndim, TpDim, shard<0>>>;
  weight_type weight;
  bias_type bias;

  static trainable from_full(const std::vector<T>& w, const std::vector<T>& b,
                             const std::string& name = "column_parallel_linear") {
    block d = block::from_full(w, b);
    return {requires_grad<typename weight_type::grad_placements>(std::move(d.weight), name + ".weight"),
            requires_grad<typename bias_type::grad_placements>(std::move(d.bias), name + ".bias")};
  }
  template <class X>
  auto operator()(const X& x) const {
    return linear(as_variable(x), weight, bias);
  }
};

template <element T, class Mesh, int TpDim, index_t In, index_t Out, class Bk>
struct trainable<row_parallel_linear<T, Mesh, TpDim, In, Out, Bk>> {
  using block = row_parallel_linear<T, Mesh, TpDim, In, Out, Bk>;
  using weight_type = variable<T, typename block::weight_layout, Bk,
                               tp_grad_placements<Mesh::ndim, TpDim, shard<1>>>;
  using bias_type = variable<T, typename block::bias_layout, Bk,
                             tp_grad_placements<Mesh::ndim, TpDim, replicate>>;
  weight_type weight;
  bias_type bias;

  static trainable from_full(const std::vector<T>& w, const std::vector<T>& b,
                             const std::string& name = "row_parallel_linear") {
    block d = block::from_full(w, b);
    return {requires_grad<typename weight_type::grad_placements>(std::move(d.weight), name + ".weight"),
            requires_grad<typename bias_type::grad_placements>(std::move(d.bias), name + ".bias")};
  }
  template <class X>
  auto operator()(const X& x) const {
    using LX = typename std::remove_cvref_t<decltype(value_of(x))>::layout_type;
    return add<typename block::template out_placements<LX>>(matmul_t(as_variable(x), weight), bias);
  }
};

}  // namespace spmd::runtime
