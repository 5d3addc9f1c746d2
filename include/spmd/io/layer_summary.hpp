// spmd/io/layer_summary.hpp — a tensor-parallel layer's compile-time decisions as text, one
// line per operator (op_summary.hpp's format):
//
//   std::cout << spmd::io::layer_summary<Down, H::layout_type>();
//   // x @ W^T: in0 S(0),S(1) (kept)  in1 R,S(1) (kept)  -> out S(0),P(sum); 0 collectives
//   // + b: in0 S(0),P(sum) -> S(0),R (all_reduce)  ...; 1 collective
//
// It lives here, not in the layers (runtime/ops/tp.hpp), because text is io's: the runtime
// does not include the layers above it.
#pragma once

#include <string>
#include <utility>

#include "spmd/io/op_summary.hpp"
#include "spmd/runtime/ops/tp.hpp"

namespace spmd::io {

/// What Layer's operator() decides for an input of layout LX: the product x · Wᵀ, then + b.
template <class Layer, class LX>
std::string layer_summary() {
  using T = typename Layer::element_type;
  using XW = typename runtime::detail::linear_product_t<T, LX, typename Layer::weight_layout,
                                                        typename Layer::backend_type>::layout_type;
  return summary_detail::joined(
      {"x @ W^T", summary_detail::constant<ops::matmul_t, T, void, LX, typename Layer::weight_layout>::view(), "\n+ b",
       summary_detail::constant<ops::binary<ops::add_fn>, T, typename Layer::template bias_forced<LX>, XW,
                                typename Layer::bias_layout>::view()});
}

}  // namespace spmd::io
