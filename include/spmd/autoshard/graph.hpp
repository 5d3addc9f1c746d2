// spmd/autoshard/graph.hpp — a model's training step as the search sees it: tensors (data,
// parameters, activations) and the operators that make the activations, in the order they
// run, each with its sharding rule (ops/: the rules the typed API propagates with).
//
//   autoshard::graph g{spmd::mesh_shape_vec{{2, 4}, 2}};
//   const int x = g.data({16, 32}), w1 = g.param({64, 32}), b1 = g.param({64});
//   const int h = g.apply<ops::matmul_t>({x, w1});        // (16, 64)
//   const int a = g.apply<ops::binary<ops::add_fn>>({h, b1});
//   ...
//   g.loss = g.apply<ops::reduction<ops::reduce_kind::mean, false, -1>>({...});
//
// Everything is constexpr: a graph can be built, searched and checked by the compiler.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <vector>

#include "spmd/core/layout_spec.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/rule.hpp"

namespace spmd::autoshard {

enum class tensor_kind : std::uint8_t {
  data,        // an input of the step (a batch): read in any layout, no gradient
  param,       // trained: held at rest in a layout the search chooses, with its gradient
  activation,  // made by an operator
};

/// The bytes of a tensor of `shape` and `element_bytes` a value.
constexpr double bytes_of(const shape_vec& shape, double element_bytes = 4) {
  double n = element_bytes;
  for (int d = 0; d < shape.size(); ++d) n *= static_cast<double>(shape[d]);
  return n;
}

struct tensor_node {
  shape_vec shape{};
  double element_bytes = 4;
  tensor_kind kind = tensor_kind::activation;
  int producer = -1;  // the operator that makes an activation

  constexpr double bytes() const { return bytes_of(shape, element_bytes); }
};

struct op_node {
  ops::op_rule rule{};
  svec<int, ops::max_op_inputs> in{};
  int out = -1;
  double flops = 0;  // of the forward, whole: the iteration space, twice where it contracts
};

struct graph {
  mesh_shape_vec mesh{};
  std::vector<tensor_node> tensors{};
  std::vector<op_node> ops{};
  int loss = -1;  // the tensor whose gradient starts the backward

  constexpr int add_tensor(const shape_vec& shape, tensor_kind kind, double element_bytes = 4) {
    tensors.push_back({shape, element_bytes, kind, -1});
    return static_cast<int>(tensors.size()) - 1;
  }
  constexpr int data(std::initializer_list<index_t> shape, double element_bytes = 4) {
    return add_tensor(shape_of(shape), tensor_kind::data, element_bytes);
  }
  constexpr int param(std::initializer_list<index_t> shape, double element_bytes = 4) {
    return add_tensor(shape_of(shape), tensor_kind::param, element_bytes);
  }

  /// The context an operator's rule reads: its inputs' shapes and ranks (replicated layouts:
  /// the rules read only the ranks from them).
  constexpr ops::op_context context_of(const svec<int, ops::max_op_inputs>& in, const shape_vec& out_shape,
                                       double out_bytes) const {
    ops::op_context c{};
    c.mesh = mesh;
    c.out_shape = out_shape;
    c.out_bytes = out_bytes;
    for (int i = 0; i < in.size(); ++i) {
      const tensor_node& t = tensors[static_cast<std::size_t>(in[i])];
      c.in_shape.push_back(t.shape);
      placement_vec p{};
      for (int m = 0; m < mesh.size(); ++m) p.push_back(make_replicate());
      c.in.push_back(make_spec(mesh, p, t.shape.size()).spec);
      c.in_bytes.push_back(t.bytes());
    }
    return c;
  }

  /// The context of operator j.
  constexpr ops::op_context context_of(const op_node& op) const {
    const tensor_node& o = tensors[static_cast<std::size_t>(op.out)];
    return context_of(op.in, o.shape, o.bytes());
  }

  /// Operator `rule` over `in`, making a tensor of `out_shape`; its index.
  constexpr int add_op(const ops::op_rule& rule, const svec<int, ops::max_op_inputs>& in, const shape_vec& out_shape,
                       double element_bytes = 4) {
    const int out = add_tensor(out_shape, tensor_kind::activation, element_bytes);
    tensors[static_cast<std::size_t>(out)].producer = static_cast<int>(ops.size());
    ops.push_back({rule, in, out, flops_of(rule, in, out_shape)});
    return out;
  }
  /// Op (an ops:: operator: Op::rule, Op::out_shape) over the tensors `in`.
  template <class Op>
  constexpr int apply(std::initializer_list<int> in) {
    if (in.size() > static_cast<std::size_t>(ops::max_op_inputs))  // (a compile error in a constant expression)
      throw std::length_error("autoshard::graph::apply: more inputs than an operator takes");
    svec<int, ops::max_op_inputs> v{};
    svec<shape_vec, ops::max_op_inputs> shapes{};
    for (const int i : in) {
      v.push_back(i);
      shapes.push_back(tensors[static_cast<std::size_t>(i)].shape);
    }
    const shape_vec out = Op::out_shape(shapes);
    return add_op(Op::rule(context_of(v, out, bytes_of(out))), v, out);
  }

  /// Each factor's extent, from the first tensor that has it.
  constexpr index_t factor_extent(const ops::op_rule& rule, const svec<int, ops::max_op_inputs>& in,
                                  const shape_vec& out_shape, int f) const {
    for (int i = 0; i < rule.inputs(); ++i)
      if (const int d = ops::op_rule::dim_of(rule.in[i], f); d >= 0) return tensors[static_cast<std::size_t>(in[i])].shape[d];
    if (const int d = ops::op_rule::dim_of(rule.out, f); d >= 0) return out_shape[d];
    return 1;
  }
  constexpr double flops_of(const ops::op_rule& rule, const svec<int, ops::max_op_inputs>& in,
                            const shape_vec& out_shape) const {
    double n = 1;
    bool contracts = false;
    for (int f = 0; f < rule.factors.size(); ++f) {
      n *= static_cast<double>(factor_extent(rule, in, out_shape, f));
      contracts = contracts || !ops::op_rule::has(rule.out, f);
    }
    return contracts ? 2 * n : n;
  }

  static constexpr shape_vec shape_of(std::initializer_list<index_t> s) {
    shape_vec v{};
    for (const index_t e : s) v.push_back(e);
    return v;
  }
};

}  // namespace spmd::autoshard
