// spmd/backends/cuda/step_body.hpp — what one thread does for one work item of a step table
// (step_table.hpp). The same function runs in the CUDA kernel and in the host emulation of
// the grid (grid_emulation.hpp), which the CPU test suite uses: host and device, no
// exceptions, no allocation.
#pragma once

#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/host/element.hpp"
#include "spmd/core/config.hpp"

namespace spmd::cuda {

namespace detail {

/// op over a group's values at one element, left to right in group order (avg: / n last): the
/// simulation's reduce_chunk for one element.
/// (m: the members' indices into in, or null for in[0..n).)
template <class T>
SPMD_HD T reduce_at(reduce_op op, const T* const* in, const index_t* m, index_t n, index_t at) {
  T x = in[m ? m[0] : 0][at];
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg:
      for (index_t j = 1; j < n; ++j) x = host::combine<reduce_op::sum>(x, in[m ? m[j] : j][at]);
      break;
    case reduce_op::product:
      for (index_t j = 1; j < n; ++j) x = host::combine<reduce_op::product>(x, in[m ? m[j] : j][at]);
      break;
    case reduce_op::max:
      for (index_t j = 1; j < n; ++j) x = host::combine<reduce_op::max>(x, in[m ? m[j] : j][at]);
      break;
    case reduce_op::min:
      for (index_t j = 1; j < n; ++j) x = host::combine<reduce_op::min>(x, in[m ? m[j] : j][at]);
      break;
  }
  return op == reduce_op::avg ? host::divide(x, n) : x;
}

}  // namespace detail

/// The source and destination offsets of element e (row-major) of region g.
SPMD_HD inline void region_offsets(const run_geom& g, index_t e, index_t& s, index_t& d) {
  const index_t k = e % g.run;
  e /= g.run;
  s = g.soff + k * g.s_inner;
  d = g.doff + k * g.d_inner;
  for (int i = g.nd - 1; i >= 0; --i) {
    const index_t x = e % g.ext[i];
    e /= g.ext[i];
    s += x * g.sstr[i];
    d += x * g.dstr[i];
  }
}

/// Where work item `item` of `t` lands: its op (the last with begin <= item) and the source
/// and destination offsets of its element.
struct item_place {
  const dev_op* op;
  index_t s, d;
};
SPMD_HD inline item_place place_of(const step_view& t, index_t item) {
  index_t lo = 0, hi = t.n_ops - 1;
  while (lo < hi) {
    const index_t mid = (lo + hi + 1) / 2;
    if (t.ops[mid].begin <= item) lo = mid;
    else hi = mid - 1;
  }
  const dev_op& o = t.ops[lo];
  index_t s = 0, d = 0;
  region_offsets(o.geo, item - o.begin, s, d);
  return {&o, s, d};
}

/// Work item `item` of step `t`: in[r] / out[r] are the inputs and outputs of mesh index r.
template <class T>
SPMD_HD void step_item(const step_view& t, index_t item, const T* const* in, T* const* out) {
  const item_place p = place_of(t, item);
  const dev_op& o = *p.op;
  const index_t s = p.s, d = p.d;
  switch (o.code) {
    case op_code::copy: out[o.dst][d] = in[o.src][s]; break;
    case op_code::fill: out[o.dst][d] = host::identity<T>(t.op); break;
    case op_code::scale: out[o.dst][d] = host::times(in[o.src][s], t.group_size); break;
    case op_code::reduce:
      out[o.dst][d] =
          detail::reduce_at(t.op, in, t.members + o.src * t.group_size, t.group_size, s);
      break;
    case op_code::replicate: {  // one read, every rank of the fan-out list written
      const index_t* f = t.fanout + o.dst;
      const T x = in[o.src][s];
      for (index_t j = 1; j <= f[0]; ++j) out[f[j]][d] = x;
      break;
    }
    case op_code::reduce_bcast: {
      const index_t* m = t.members + o.src * t.group_size;
      const T x = detail::reduce_at(t.op, in, m, t.group_size, s);
      for (index_t j = 0; j < t.group_size; ++j) out[m[j]][d] = x;
      break;
    }
    default: break;  // move never reaches a table
  }
}

/// Work item `item` of a widened step (every op a contiguous copy to one rank or a fan-out
/// list, in units of W).
template <class W>
SPMD_HD void copy_item(const step_view& t, index_t item, const W* const* in, W* const* out) {
  const item_place p = place_of(t, item);
  const dev_op& o = *p.op;
  if (o.code == op_code::replicate) {
    const index_t* f = t.fanout + o.dst;
    const W x = in[o.src][p.s];
    for (index_t j = 1; j <= f[0]; ++j) out[f[j]][p.d] = x;
  } else {
    out[o.dst][p.d] = in[o.src][p.s];
  }
}

/// One thread of a launch over a widened step.
template <class W>
SPMD_HD void copy_thread(const step_view& t, index_t block, index_t thread, index_t blocks, index_t threads,
                         const W* const* in, W* const* out) {
  for (index_t i = block * threads + thread; i < t.items; i += blocks * threads) copy_item<W>(t, i, in, out);
}

/// One thread of a launch over `t`: a grid-stride loop over the work items.
template <class T>
SPMD_HD void step_thread(const step_view& t, index_t block, index_t thread, index_t blocks,
                         index_t threads, const T* const* in, T* const* out) {
  for (index_t i = block * threads + thread; i < t.items; i += blocks * threads)
    step_item<T>(t, i, in, out);
}

}  // namespace spmd::cuda
