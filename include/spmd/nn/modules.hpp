// spmd/nn/modules.hpp — the building blocks of models, as host structs with a forward over their
// parallel form (nn/tree.hpp): torch.nn's Linear, LayerNorm and Embedding, parameters named as
// PyTorch names them.
//
//   spmd::nn::linear<32, 64> fc;          // weight (64, 32), bias (64): y = x · Wᵀ + b
//   spmd::nn::linear<32, 64, false> fc;   // no bias
//   spmd::nn::layer_norm<32> ln;          // weight, bias (32): over the last dim, eps 1e-5
//   spmd::nn::embedding<64, 32> wte;      // weight (64, 32): rows by index
//
// A module's host form holds its initial values (zeros: load or fill them); its parallel form,
// made by nn::parallelize, computes. Each forward is the runtime's operator over variables, so
// it runs on every backend and layout; where a tensor-parallel style splits a weight, the
// operators' propagation places the activations (a colwise linear's output is split by
// features, a rowwise linear's is a Partial that the next operator reduces).
#pragma once

#include <boost/hana/define_struct.hpp>

#include "spmd/core/extents.hpp"
#include "spmd/nn/tree.hpp"
#include "spmd/runtime/autograd/matmul.hpp"
#include "spmd/runtime/autograd/nn.hpp"
#include "spmd/runtime/autograd/elementwise.hpp"

namespace spmd::nn {

/// torch.nn.Linear(In, Out, bias): weight (Out, In), bias (Out).
template <index_t In, index_t Out, bool Bias = true, class T = float>
struct linear {
  BOOST_HANA_DEFINE_STRUCT(linear, (tensor<T, extents<Out, In>>, weight), (tensor<T, extents<Out>>, bias));
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    return runtime::linear(x, get<"weight">(m), get<"bias">(m));
  }
};
template <index_t In, index_t Out, class T>
struct linear<In, Out, false, T> {
  BOOST_HANA_DEFINE_STRUCT(linear, (tensor<T, extents<Out, In>>, weight));
  template <class M, class X>
  static auto forward(const M& m, const X& x) {
    return runtime::linear(x, get<"weight">(m));
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

}  // namespace spmd::nn
