// spmd/nn/step_graph.hpp — a model's training step as the automatic-sharding search sees it
// (autoshard/graph.hpp), made from its modules: what each module's forward runs, as operators
// with their sharding rules, and its parameters, added in parameter_paths' order.
//
//   autoshard::graph g{mesh};                              // the mesh's sizes (run-time values fit)
//   const int x = g.data({16, 32});
//   const nn::traced t = nn::trace<nn::mlp<32, 64, 16, nn::act::relu>>(g, x);
//   g.loss = nn::trace_cross_entropy<16>(g, t.out, g.data({16}, 8));
//   t.params[i]          // the graph's tensor of the model's i-th parameter (parameters(model)'s i-th)
//
// A module of your own: specialise nn::tracer<M> with
//   static constexpr int apply(autoshard::graph&, std::vector<int>& params, int x)
// adding its operators (the same ops:: operators its forward's runtime calls propagate with)
// and pushing its parameters' tensors in its members' order. Everything is constexpr.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "spmd/autoshard/graph.hpp"
#include "spmd/nn/gpt.hpp"
#include "spmd/nn/modules.hpp"
#include "spmd/ops/attention.hpp"
#include "spmd/ops/elementwise.hpp"
#include "spmd/ops/matmul.hpp"
#include "spmd/ops/nn.hpp"
#include "spmd/ops/reduction.hpp"

namespace spmd::nn {

template <class M>
struct tracer {
  static_assert(sizeof(M) == 0,
                "spmd::nn::trace: this module has no step graph; specialise spmd::nn::tracer<M> (nn/step_graph.hpp).");
};

/// A traced model: its output's tensor and its parameters' tensors (parameters(model)'s order).
struct traced {
  int out = -1;
  std::vector<int> params{};
};

/// Module M's forward over tensor x (and its backward, which the search derives), added to g.
template <class M>
constexpr traced trace(autoshard::graph& g, int x) {
  traced t{};
  t.out = tracer<M>::apply(g, t.params, x);
  return t;
}

namespace trace_detail {
template <class T>
constexpr int param(autoshard::graph& g, std::vector<int>& params, std::initializer_list<index_t> shape) {
  const int p = g.param(shape, sizeof(T));
  params.push_back(p);
  return p;
}
template <class Op>
constexpr int op(autoshard::graph& g, std::initializer_list<int> in) {
  return g.apply<Op>(in);
}
using add = ops::binary<ops::add_fn>;
}  // namespace trace_detail

template <index_t In, index_t Out, bool Bias, class T>
struct tracer<linear<In, Out, Bias, T>> {
  static constexpr int apply(autoshard::graph& g, std::vector<int>& params, int x) {
    const int w = trace_detail::param<T>(g, params, {Out, In});
    const int y = trace_detail::op<ops::matmul_t>(g, {x, w});
    if constexpr (!Bias) return y;
    else return trace_detail::op<trace_detail::add>(g, {y, trace_detail::param<T>(g, params, {Out})});
  }
};

template <index_t Dim, class T>
struct tracer<layer_norm<Dim, T>> {
  static constexpr int apply(autoshard::graph& g, std::vector<int>& params, int x) {
    const int w = trace_detail::param<T>(g, params, {Dim}), b = trace_detail::param<T>(g, params, {Dim});
    return trace_detail::op<ops::layer_norm<1, true>>(g, {x, w, b});
  }
};

template <index_t Num, index_t Dim, class T>
struct tracer<embedding<Num, Dim, T>> {
  static constexpr int apply(autoshard::graph& g, std::vector<int>& params, int indices) {
    return trace_detail::op<ops::embedding>(g, {trace_detail::param<T>(g, params, {Num, Dim}), indices});
  }
};

template <index_t Dim, index_t Heads, class T>
struct tracer<causal_self_attention<Dim, Heads, T>> {
  static constexpr int apply(autoshard::graph& g, std::vector<int>& params, int x) {
    int w[4]{};
    for (int& p : w) p = trace_detail::param<T>(g, params, {Dim, Dim});
    const int q = trace_detail::op<ops::matmul_t>(g, {x, w[0]}), k = trace_detail::op<ops::matmul_t>(g, {x, w[1]}),
              v = trace_detail::op<ops::matmul_t>(g, {x, w[2]});
    const int y = trace_detail::op<ops::causal_attention<Dim / Heads>>(g, {q, k, v});
    return trace_detail::op<ops::matmul_t>(g, {y, w[3]});
  }
};

template <class Act>
struct activation_op;
template <>
struct activation_op<act::relu> {
  using type = ops::unary<ops::relu_fn>;
};
template <>
struct activation_op<act::gelu_tanh> {
  using type = ops::unary<ops::gelu_tanh_fn>;
};

template <index_t In, index_t Hidden, index_t Out, class Act, class T>
struct tracer<mlp<In, Hidden, Out, Act, T>> {
  static constexpr int apply(autoshard::graph& g, std::vector<int>& params, int x) {
    const int u = tracer<linear<In, Hidden, true, T>>::apply(g, params, x);
    const int a = trace_detail::op<typename activation_op<Act>::type>(g, {u});
    return tracer<linear<Hidden, Out, true, T>>::apply(g, params, a);
  }
};

template <index_t Dim, index_t Heads, index_t Hidden, class T>
struct tracer<transformer_block<Dim, Heads, Hidden, T>> {
  static constexpr int apply(autoshard::graph& g, std::vector<int>& params, int x) {
    const int a = tracer<causal_self_attention<Dim, Heads, T>>::apply(g, params, tracer<layer_norm<Dim, T>>::apply(g, params, x));
    const int h = trace_detail::op<trace_detail::add>(g, {x, a});
    const int m = tracer<mlp<Dim, Hidden, Dim, act::gelu_tanh, T>>::apply(g, params, tracer<layer_norm<Dim, T>>::apply(g, params, h));
    return trace_detail::op<trace_detail::add>(g, {h, m});
  }
};

template <index_t Vocab, index_t Context, index_t Dim, index_t Heads, std::size_t Layers, class T>
struct tracer<gpt<Vocab, Context, Dim, Heads, Layers, T>> {
  static constexpr int apply(autoshard::graph& g, std::vector<int>& params, int tokens) {
    const int e = tracer<embedding<Vocab, Dim, T>>::apply(g, params, tokens);
    int h = trace_detail::op<trace_detail::add>(g, {e, trace_detail::param<T>(g, params, {Context, Dim})});
    for (std::size_t l = 0; l < Layers; ++l) h = tracer<transformer_block<Dim, Heads, 4 * Dim, T>>::apply(g, params, h);
    const int f = tracer<layer_norm<Dim, T>>::apply(g, params, h);
    return trace_detail::op<ops::matmul_t>(g, {f, trace_detail::param<T>(g, params, {Vocab, Dim})});
  }
};

/// The mean cross entropy of logits (rows..., Classes) against targets (rows...): the loss,
/// a scalar. The rows' losses are made with the class dim whole (ops::cross_entropy_rows);
/// the runtime's vocabulary-parallel form, which keeps it split, is not a strategy here.
template <index_t Classes>
constexpr int trace_cross_entropy(autoshard::graph& g, int logits, int targets) {
  int l = trace_detail::op<ops::cross_entropy_rows<Classes>>(g, {logits, targets});
  while (g.tensors[static_cast<std::size_t>(l)].shape.size() > 0)
    l = trace_detail::op<ops::reduction<ops::reduce_kind::mean, false, -1>>(g, {l});
  return l;
}

}  // namespace spmd::nn
