// tools/op_catalog.hpp — the operators `spmd-plan explain --op NAME` knows, by name: each
// gives its sharding rule and output shape from the inputs' shapes, through the same constexpr
// functions the typed API calls in the compiler (so the CLI explains the compiler's choice).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/ops/cat.hpp"
#include "spmd/ops/elementwise.hpp"
#include "spmd/ops/matmul.hpp"
#include "spmd/ops/nn.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/reduction.hpp"
#include "spmd/ops/view.hpp"

namespace catalog {

struct op_entry {
  const char* name;
  const char* summary;
  int inputs;
  int min_rank;  // of the first input (the op's dims must exist)
  spmd::ops::op_rule (*rule)(const spmd::ops::op_context&);
  spmd::shape_vec (*out_shape)(const spmd::svec<spmd::shape_vec, spmd::ops::max_op_inputs>&);
};

template <class Op>
constexpr op_entry entry(const char* name, const char* summary, int inputs, int min_rank = 0) {
  return {name, summary, inputs, min_rank, [](const spmd::ops::op_context& c) { return Op::rule(c); },
          [](const spmd::svec<spmd::shape_vec, spmd::ops::max_op_inputs>& s) { return Op::out_shape(s); }};
}

inline const std::vector<op_entry>& ops() {
  namespace o = spmd::ops;
  using rk = o::reduce_kind;
  static const std::vector<op_entry> all{
      entry<o::matmul>("matmul", "x (m,k) @ w (k,n)", 2, 2),
      entry<o::matmul_t>("matmul_t", "x (m,k) @ w (n,k)^T, linear's product", 2, 2),
      entry<o::t_matmul>("t_matmul", "x (k,m)^T @ w (k,n), a weight's gradient", 2, 2),
      entry<o::bmm>("bmm", "x (b,m,k) @ w (b,k,n)", 2, 3),
      entry<o::binary<o::add_fn>>("add", "x + y, broadcasting", 2),
      entry<o::binary<o::sub_fn>>("sub", "x - y, broadcasting", 2),
      entry<o::binary<o::mul_fn>>("mul", "x * y, broadcasting", 2),
      entry<o::binary<o::div_fn>>("div", "x / y, broadcasting", 2),
      entry<o::binary<o::maximum_fn>>("maximum", "elementwise max, broadcasting", 2),
      entry<o::unary<o::neg_fn>>("neg", "-x", 1),
      entry<o::unary<o::relu_fn>>("relu", "max(x, 0)", 1),
      entry<o::unary<o::exp_fn>>("exp", "exp(x)", 1),
      entry<o::unary<o::abs_fn>>("abs", "|x|", 1),
      entry<o::unary<o::gelu_fn>>("gelu", "gelu(x)", 1),
      entry<o::reduction<rk::sum, false, -1>>("sum", "sum over the last dim", 1, 1),
      entry<o::reduction<rk::mean, false, -1>>("mean", "mean over the last dim", 1, 1),
      entry<o::reduction<rk::max, false, -1>>("max", "max over the last dim", 1, 1),
      entry<o::softmax<1, false>>("softmax", "softmax along dim 1", 1, 2),
      entry<o::layer_norm<1, true>>("layer_norm", "x, weight, bias: normalise the last dim", 3, 1),
      entry<o::embedding>("embedding", "weight (V,H), indices: rows of weight", 2, 2),
      entry<o::transpose<0, 1>>("transpose", "swap dims 0 and 1", 1, 2),
      entry<o::cat<0>>("cat", "x, y concatenated along dim 0", 2, 1),
  };
  return all;
}

inline const op_entry& find(const std::string& name) {
  std::string known;
  for (const op_entry& e : ops()) {
    if (name == e.name) return e;
    known += (known.empty() ? "" : ", ") + std::string(e.name);
  }
  throw std::invalid_argument("unknown op '" + name + "': expected one of " + known +
                              " (or give --einsum)");
}

}  // namespace catalog
