// spmd/ops/reduction.hpp — the sharding rules of reductions over a compile-time list of dims:
// sum, mean, max, min, prod. Kernels and the dtensor API are in spmd/runtime/ops/reduction.hpp.
//
//   reduction<reduce_kind::sum, false, 1>      x (a, b) -> (a)       "ab->a"
//   reduction<reduce_kind::max, true, 1>       x (a, b) -> (a, 1)    "ab->a."   (keepdim)
//   reduction<reduce_kind::mean, false>        x (a, b) -> ()        "ab->"     (no dims: all)
//
// A reduced dim is a factor the output lacks: sharding it leaves each rank a partial result,
// so the output is P(sum|max|min|product). A mean's pieces average to the mean only when
// they are equal, so its reduced factors are `even_only` (P(avg) when evenly split; else the
// input is replicated on that mesh dim first). A Partial input passes through when the
// reduction is the same kind of combine: sum and mean are linear (P(sum), P(avg) pass), max
// passes P(max), min P(min), prod P(product).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "spmd/core/placement.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/rule.hpp"

namespace spmd::ops {

enum class reduce_kind : std::uint8_t { sum, mean, max, min, prod };

constexpr const char* reduce_kind_name(reduce_kind k) {
  switch (k) {
    case reduce_kind::sum: return "sum";
    case reduce_kind::mean: return "mean";
    case reduce_kind::max: return "max";
    case reduce_kind::min: return "min";
    case reduce_kind::prod: return "prod";
  }
  return "?";
}

/// The combine of a reduction's partial results (mean: avg).
constexpr reduce_op partial_op_of(reduce_kind k) {
  switch (k) {
    case reduce_kind::sum: return reduce_op::sum;
    case reduce_kind::mean: return reduce_op::avg;
    case reduce_kind::max: return reduce_op::max;
    case reduce_kind::min: return reduce_op::min;
    case reduce_kind::prod: return reduce_op::product;
  }
  return reduce_op::sum;
}

namespace reduction_detail {

enum class dims_error : std::uint8_t { none, out_of_range, repeated };

/// Which dims of a rank-`rank` tensor `Dims...` reduce (negative: from the end; none: all).
struct reduced_dims {
  bool of[max_tensor_dims]{};
  dims_error error = dims_error::none;
};

template <int... Dims>
constexpr reduced_dims reduced_of(int rank) {
  reduced_dims r{};
  if constexpr (sizeof...(Dims) == 0) {
    for (int d = 0; d < rank; ++d) r.of[d] = true;
  } else {
    for (int d : {Dims...}) {
      const int n = d < 0 ? d + rank : d;
      if (n < 0 || n >= rank) {
        r.error = dims_error::out_of_range;
      } else if (r.of[n]) {
        r.error = dims_error::repeated;
      } else {
        r.of[n] = true;
      }
    }
  }
  return r;
}

}  // namespace reduction_detail

/// Reduce `Kind` over Dims (none: every dim), keeping them as size 1 when KeepDim.
template <reduce_kind Kind, bool KeepDim, int... Dims>
struct reduction {
  static constexpr const char* name = reduce_kind_name(Kind);
  static constexpr reduce_kind kind = Kind;
  static constexpr bool keepdim = KeepDim;

  /// Throws (a compile error in a constant expression) naming the bad dim list.
  static constexpr reduction_detail::reduced_dims checked(int rank) {
    const auto r = reduction_detail::reduced_of<Dims...>(rank);
    if (r.error == reduction_detail::dims_error::out_of_range)
      throw std::invalid_argument(std::string("spmd::") + name + ": a reduced dim is outside a tensor of rank " +
                                  std::to_string(rank));
    if (r.error == reduction_detail::dims_error::repeated)
      throw std::invalid_argument(std::string("spmd::") + name + ": a reduced dim is listed twice");
    return r;
  }

  static constexpr op_rule rule(const op_context& c) {
    const int rank = c.in_shape[0].size();
    const auto red = checked(rank);
    // "abc->a.c" (keepdim) or "abc->ac": each input dim its own letter.
    char text[2 * max_tensor_dims + 4]{};
    int p = 0;
    for (int d = 0; d < rank; ++d) text[p++] = static_cast<char>('a' + d);
    text[p++] = '-';
    text[p++] = '>';
    for (int d = 0; d < rank; ++d) {
      if (!red.of[d]) text[p++] = static_cast<char>('a' + d);
      else if (KeepDim) text[p++] = '.';
    }
    text[p] = '\0';
    op_rule r = einsum(text);
    const reduce_op op = partial_op_of(Kind);
    for (int d = 0; d < rank; ++d) {
      if (!red.of[d]) continue;
      const char f = static_cast<char>('a' + d);
      r = r.reduces(f, op);
      if (Kind == reduce_kind::mean) r = r.even_only(f);
    }
    if (Kind == reduce_kind::sum || Kind == reduce_kind::mean)
      return r.passes_partial(reduce_op::sum, reduce_op::sum).passes_partial(reduce_op::avg, reduce_op::avg);
    return r.passes_partial(op, op);
  }

  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    const auto red = checked(in[0].size());
    shape_vec out{};
    for (int d = 0; d < in[0].size(); ++d) {
      if (!red.of[d]) out.push_back(in[0][d]);
      else if (KeepDim) out.push_back(1);
    }
    return out;
  }
};

}  // namespace spmd::ops
