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

/// out = a ∘ b: out contiguous (s[0]), a and b through their broadcast strides (s[1], s[2]).
inline index_geom binary_geom(const shape_vec& out, const shape_vec& a, const shape_vec& b) {
  index_geom g = contiguous_geom(out);
  const shape_vec sa = broadcast_strides(a, out), sb = broadcast_strides(b, out);
  for (int d = 0; d < g.nd; ++d) {
    g.s[1][d] = sa[d];
    g.s[2][d] = sb[d];
  }
  return g;
}

/// out (contiguous, s[0]) = in (shape `in`) with dim k of out being dim perm[k] of in (s[1]).
inline index_geom permute_geom(const shape_vec& out, const shape_vec& in, const shape_vec& perm) {
  index_geom g = contiguous_geom(out);
  const shape_vec s = row_major_strides(in);
  for (int d = 0; d < g.nd; ++d) g.s[1][d] = s[static_cast<int>(perm[d])];
  return g;
}

/// A part of a cat (contiguous, s[1]) into the output's strides (s[0]); the caller offsets the
/// output pointer to the part's first element.
inline index_geom cat_part_geom(const shape_vec& out, const shape_vec& part) {
  index_geom g = contiguous_geom(part);
  const shape_vec os = row_major_strides(out);
  for (int d = 0; d < g.nd; ++d) g.s[0][d] = os[d];
  return g;
}

/// A reduction over the dims with reduced[d] true of a contiguous block: the kept dims (the
/// output's row-major order) and the reduced ones, both with the input's strides in s[0].
struct reduce_geoms {
  index_geom kept, reduced;
};
template <class Flags>
reduce_geoms reduction_geoms(const shape_vec& shape, const Flags& reduced) {
  reduce_geoms r;
  const shape_vec s = row_major_strides(shape);
  for (int d = 0; d < shape.size(); ++d) {
    index_geom& g = reduced[d] ? r.reduced : r.kept;
    g.ext[g.nd] = shape[d];
    g.s[0][g.nd] = s[d];
    ++g.nd;
  }
  return r;
}

/// The rows of a softmax along `dim` of a contiguous block (input and output alike): every
/// other dim, strides in s[0] and s[1]; the row's stride is row_major_strides(shape)[dim].
inline index_geom softmax_rows(const shape_vec& shape, int dim) {
  const shape_vec s = row_major_strides(shape);
  index_geom rows;
  for (int d = 0; d < shape.size(); ++d) {
    if (d == dim) continue;
    rows.ext[rows.nd] = shape[d];
    rows.s[0][rows.nd] = rows.s[1][rows.nd] = s[d];
    ++rows.nd;
  }
  return rows;
}

/// A layer_norm over the last n dims of a contiguous block: the leading dims (outer) and
/// the normalised ones (inner; s[2]: the weight's and bias's own row-major strides).
struct norm_geoms {
  index_geom outer, inner;
};
inline norm_geoms layer_norm_geoms(const shape_vec& shape, int n) {
  norm_geoms g;
  const shape_vec s = row_major_strides(shape);
  const int r = shape.size();
  index_t k = 1;
  for (int d = r - 1; d >= r - n; --d) {
    g.inner.s[2][d - (r - n)] = k;
    k *= shape[d];
  }
  for (int d = 0; d < r; ++d) {
    index_geom& x = d < r - n ? g.outer : g.inner;
    x.ext[x.nd] = shape[d];
    x.s[0][x.nd] = x.s[1][x.nd] = s[d];
    ++x.nd;
  }
  return g;
}

}  // namespace spmd::cuda::ops_detail
