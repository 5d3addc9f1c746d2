// spmd/ops/cat.hpp — the sharding rule of cat<Dim>: 2 to 4 tensors of one rank, equal extents
// except along Dim, joined along Dim.
//
//   cat<0> of (a, n), (b, n) -> (a + b, n)     "cn,cn->cn" with c fixed
//
// The cat dim is one factor shared by every input and the output, and `fixed`: a shard of it
// cannot be relabelled (rank r's output rows are not rank r's rows of each input), so a
// sharded cat dim is gathered first. Every other dim is one shared factor and may stay
// sharded on every input and the output at once (their extents are equal, so their pieces
// are too). Partials pass through when every input holds the same P(op): the cat of partial
// pieces is the partial of the cat, for every reduce op (cat only moves elements). As for the views, the rule lists it only
// for the partial ops some input holds (ops/view.hpp, dim_map).
#pragma once

#include <stdexcept>
#include <string>

#include "spmd/ops/view.hpp"

namespace spmd::ops {

template <int Dim>
struct cat {
  static constexpr const char* name = "cat";
  static constexpr op_rule rule(const op_context& c) {
    using view_detail::factor_kind;
    const int n = c.in_shape[0].size();
    const factor_dims dims = view_detail::identity(n);
    svec<factor_dims, max_op_inputs> in{};
    for (int i = 0; i < c.in_shape.size(); ++i) in.push_back(dims);
    svec<factor_kind, max_factors> kind = view_detail::kinds(n, factor_kind::free);
    kind[Dim] = factor_kind::fixed;
    return view_detail::dim_map(in, dims, kind, c);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec s = in[0];
    for (int i = 1; i < in.size(); ++i) {
      if (in[i].size() != s.size())
        throw std::invalid_argument("spmd::cat: input " + std::to_string(i) + " has " +
                                    std::to_string(in[i].size()) + " dims, input 0 has " +
                                    std::to_string(s.size()));
      for (int d = 0; d < s.size(); ++d) {
        const index_t a = s[d], b = in[i][d];
        if (d == Dim) {
          s[d] = (a == dyn || b == dyn) ? dyn : a + b;
        } else if (a != dyn && b != dyn && a != b) {
          throw std::invalid_argument("spmd::cat: input " + std::to_string(i) + " has the shape " +
                                      view_detail::shape_text(in[i]) + ", input 0 " +
                                      view_detail::shape_text(in[0]) + ": dim " + std::to_string(d) +
                                      " differs (" + std::to_string(b) + " vs " + std::to_string(a) +
                                      ") and is not the cat dim " + std::to_string(Dim));
        } else if (a == dyn) {
          s[d] = b;
        }
      }
    }
    return s;
  }
};

}  // namespace spmd::ops
