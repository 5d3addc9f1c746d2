// spmd/backends/cuda/ops/geometry.hpp — index_geom (op_bodies.hpp) from a block's shape: the
// host-side arithmetic the device ops share.
#pragma once

#include "spmd/backends/cuda/op_bodies.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd::cuda::ops_detail {

/// Row-major strides of `shape`.
inline shape_vec row_major_strides(const shape_vec& shape) {
  shape_vec s{};
  s.n = shape.size();
  index_t k = 1;
  for (int d = shape.size() - 1; d >= 0; --d) {
    s[d] = k;
    k *= shape[d];
  }
  return s;
}

/// A contiguous walk over `shape`: every operand's strides row-major.
inline index_geom contiguous_geom(const shape_vec& shape) {
  index_geom g;
  g.nd = shape.size();
  const shape_vec s = row_major_strides(shape);
  for (int d = 0; d < g.nd; ++d) {
    g.ext[d] = shape[d];
    g.s[0][d] = g.s[1][d] = g.s[2][d] = s[d];
  }
  return g;
}

/// The strides that read a block of shape `in` at the indices of `out` (right-aligned; 0 on
/// a dim `in` lacks or stretches from extent 1): numpy broadcasting, as the host's map2.
inline shape_vec broadcast_strides(const shape_vec& in, const shape_vec& out) {
  const shape_vec s_in = row_major_strides(in);
  shape_vec s{};
  s.n = out.size();
  for (int d = 0; d < out.size(); ++d) {
    const int k = d - (out.size() - in.size());
    s[d] = (k < 0 || (in[k] == 1 && out[d] != 1)) ? 0 : s_in[k];
  }
  return s;
}

}  // namespace spmd::cuda::ops_detail
