// spmd/nn/modules.hpp — the building blocks of models, as host structs with a forward over their
// parallel form (nn/tree.hpp): torch.nn's Linear, LayerNorm and Embedding, parameters named as
// PyTorch names them.
//
//   spmd::nn::linear<32, 64> fc;          // weight (64, 32), bias (64): y = x · Wᵀ + b
//   spmd::nn::linear<32, 64, false> fc;   // no bias
//   spmd::nn::layer_norm<32> ln;          // weight, bias (32): over the last dim, eps 1e-5
//   spmd::nn::embedding<64, 32> wte;      // weight (64, 32): rows by index
//   spmd::nn::causal_self_attention<32, 4> attn;   // wq, wk, wv, wo (32, 32): 4 causal heads of 8
//   spmd::nn::mlp<32, 128> ffn;                    // w1 (128, 32), b1, w2 (32, 128), b2: gelu (tanh)
//   spmd::nn::mlp<32, 64, 16, spmd::nn::act::relu> clf;   // 32 -> 64 -> 16 features, relu
//   spmd::nn::transformer_block<32, 4> blk;        // pre-norm: ln1, attn, ln2, mlp, two residuals
//
// A module's host form holds its initial values (zeros: load or fill them); its parallel form,
// made by nn::parallelize, computes. Each forward is the runtime's operator over variables, so
// it runs on every backend and layout; where a tensor-parallel style splits a weight, the
// operators' propagation places the activations (a colwise linear's output is split by
// features); a rowwise layer's Partial output is all-reduced before its bias (Replicate, as
// PyTorch's RowwiseParallel leaves it) unless a module style places it otherwise.
#pragma once

#include <boost/hana/define_struct.hpp>

#include "spmd/core/extents.hpp"
#include "spmd/nn/tree.hpp"
#include "spmd/runtime/autograd/matmul.hpp"
#include "spmd/runtime/autograd/nn.hpp"
#include "spmd/runtime/autograd/attention.hpp"
#include "spmd/runtime/autograd/elementwise.hpp"

namespace spmd::nn {

/// torch.nn.Linear(In, Out, bias): weight (Out, In), bias (Out).
template <index_t In, index_t Out, bool Bias = true, class T = float>
struct linear {
  BOOST_HANA_DEFINE_STRUCT(linear, (tensor<T, extents<Out, In>>, weight), (tensor<T, extents<Out>>, bias));
  static constexpr bool places_output = true;  // before the bias (nn/tree.hpp)
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    return runtime::add(place_output(m, runtime::matmul_t(x, get<"weight">(m))), get<"bias">(m));
  }
};
template <index_t In, index_t Out, class T>
struct linear<In, Out, false, T> {
  BOOST_HANA_DEFINE_STRUCT(linear, (tensor<T, extents<Out, In>>, weight));
  static constexpr bool places_output = true;
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    return place_output(m, runtime::matmul_t(x, get<"weight">(m)));
  }
};

/// torch.nn.LayerNorm(Dim) over the last dim (eps 1e-5): weight (ones) and bias (zeros) of Dim.
template <index_t Dim, class T = float>
struct layer_norm {
  BOOST_HANA_DEFINE_STRUCT(layer_norm, (tensor<T, extents<Dim>>, weight), (tensor<T, extents<Dim>>, bias));
  layer_norm() { weight.data.assign(weight.data.size(), T(1)); }
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    return runtime::layer_norm<1>(x, get<"weight">(m), get<"bias">(m), 1e-5);
  }
};

/// torch.nn.Embedding(Num, Dim): weight (Num, Dim), forward(indices) its rows.
template <index_t Num, index_t Dim, class T = float>
struct embedding {
  BOOST_HANA_DEFINE_STRUCT(embedding, (tensor<T, extents<Num, Dim>>, weight));
  template <class M, class I>
  static auto forward(const M& m, const I& indices) {
    return runtime::embedding(indices, get<"weight">(m));
  }
};

/// GPT-2's causal self-attention over (batch, positions, Dim): q, k, v = x·Wqᵀ, x·Wkᵀ, x·Wvᵀ
/// (no biases), softmax(q kᵀ / √(Dim/Heads) + causal mask) v per head, the heads concatenated,
/// then ·Woᵀ. Megatron's tensor parallelism is wq, wk, wv colwise (whole heads per rank: the
/// ranks must divide Heads) and wo rowwise.
template <index_t Dim, index_t Heads, class T = float>
struct causal_self_attention {
  static_assert(Dim % Heads == 0, "spmd::nn::causal_self_attention: the heads must split Dim evenly.");
  static constexpr index_t head_dim = Dim / Heads;
  BOOST_HANA_DEFINE_STRUCT(causal_self_attention, (tensor<T, extents<Dim, Dim>>, wq), (tensor<T, extents<Dim, Dim>>, wk),
                           (tensor<T, extents<Dim, Dim>>, wv), (tensor<T, extents<Dim, Dim>>, wo));
  static constexpr bool places_output = true;
  /// The attention takes the calling thread's context_method_scope (runtime/ops/ring_attention.hpp):
  /// the all-gather, or the ring (the sequence in its natural order) in float or double.
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    using runtime::matmul_t;
    const auto q = matmul_t(x, get<"wq">(m));
    const auto k = matmul_t(x, get<"wk">(m));
    const auto v = matmul_t(x, get<"wv">(m));
    using Y = decltype(runtime::causal_attention<head_dim>(q, k, v));
    using QV = decltype(runtime::autograd_detail::keep(q));
    using E = typename QV::element_type;
    using BQ = typename QV::backend_type;
    if constexpr ((runtime::host_memory<BQ> || runtime::device_ring<BQ>) &&
                  (std::is_same_v<E, float> || std::is_same_v<E, double>)) {
      using YR = decltype(runtime::causal_attention<head_dim, runtime::context_method::ring>(q, k, v));
      if constexpr (std::is_same_v<Y, YR>)
        if (runtime::context_method_scope::current() == runtime::context_method::ring)
          return place_output(m, matmul_t(runtime::causal_attention<head_dim, runtime::context_method::ring>(q, k, v),
                                          get<"wo">(m)));
    }
    return place_output(m, matmul_t(runtime::causal_attention<head_dim>(q, k, v), get<"wo">(m)));
  }
};

/// The activations of mlp, as PyTorch names them: nn.GELU(approximate="tanh") and nn.ReLU.
namespace act {
struct gelu_tanh {
  template <class X>
  static auto apply(const X& x) {
    return runtime::gelu_tanh(x);
  }
};
struct relu {
  template <class X>
  static auto apply(const X& x) {
    return runtime::relu(x);
  }
};
}  // namespace act

/// Two linear layers: Act(x·W1ᵀ + b1)·W2ᵀ + b2, In → Hidden → Out features (GPT-2's MLP with
/// the defaults: Out = In, gelu (tanh)). Megatron: w1, b1 colwise, w2 rowwise (one all_reduce,
/// where its Partial output meets b2).
template <index_t In, index_t Hidden, index_t Out = In, class Act = act::gelu_tanh, class T = float>
struct mlp {
  BOOST_HANA_DEFINE_STRUCT(mlp, (tensor<T, extents<Hidden, In>>, w1), (tensor<T, extents<Hidden>>, b1),
                           (tensor<T, extents<Out, Hidden>>, w2), (tensor<T, extents<Out>>, b2));
  static constexpr bool places_output = true;  // before b2: a rowwise w2's Partial reduce-scattered
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    const auto u = Act::apply(runtime::linear(x, get<"w1">(m), get<"b1">(m)));
    return runtime::add(place_output(m, runtime::matmul_t(u, get<"w2">(m))), get<"b2">(m));
  }
};

/// A pre-norm transformer block: h = x + attn(ln1(x)); h + mlp(ln2(h)). The residual sums keep
/// x's placements (a rowwise output's Partial is reduced into them).
template <index_t Dim, index_t Heads, index_t Hidden = 4 * Dim, class T = float>
struct transformer_block {
  BOOST_HANA_DEFINE_STRUCT(transformer_block, (layer_norm<Dim, T>, ln1), (causal_self_attention<Dim, Heads, T>, attn),
                           (layer_norm<Dim, T>, ln2), (::spmd::nn::mlp<Dim, Hidden, Dim, act::gelu_tanh, T>, mlp));
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    using P = typename X::placements_type;
    const auto h = runtime::add<P>(x, get<"attn">(m)(get<"ln1">(m)(x)));
    return runtime::add<P>(h, get<"mlp">(m)(get<"ln2">(m)(h)));
  }
};

}  // namespace spmd::nn
