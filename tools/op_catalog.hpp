// tools/op_catalog.hpp — the operators `spmd-plan explain --op NAME` knows, by name: each
// gives its sharding rule and output shape from the inputs' shapes, through the same constexpr
// functions the typed API calls in the compiler (so the CLI explains the compiler's choice).
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/ops/matmul.hpp"
#include "spmd/ops/propagate.hpp"

namespace catalog {

struct op_entry {
  const char* name;
  const char* summary;
  int inputs;
  spmd::ops::op_rule (*rule)(const spmd::ops::op_context&);
  spmd::shape_vec (*out_shape)(const spmd::svec<spmd::shape_vec, spmd::ops::max_op_inputs>&);
};

template <class Op>
constexpr op_entry entry(const char* summary, int inputs) {
  return {Op::name, summary, inputs, [](const spmd::ops::op_context& c) { return Op::rule(c); },
          [](const spmd::svec<spmd::shape_vec, spmd::ops::max_op_inputs>& s) { return Op::out_shape(s); }};
}

inline const std::vector<op_entry>& ops() {
  static const std::vector<op_entry> all{
      entry<spmd::ops::matmul>("x (m,k) @ w (k,n)", 2),
      entry<spmd::ops::matmul_t>("x (m,k) @ w (n,k)^T, linear's product", 2),
      entry<spmd::ops::bmm>("x (b,m,k) @ w (b,k,n)", 2),
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
