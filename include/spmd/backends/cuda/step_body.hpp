// spmd/backends/cuda/step_body.hpp — what one thread does for one work item of a step table
// (step_table.hpp). The same function runs in the CUDA kernel and in the host emulation of
// the grid (grid_emulation.hpp), which the CPU test suite uses: host and device, no
// exceptions, no allocation.
#pragma once

#include <cstring>

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

/// q = a / b, r = a % b for a >= 0, b > 0: in 32 bits when both fit, as they nearly always do
/// (a 64-bit division is a long software sequence on a GPU, and a step item does several).
SPMD_HD inline void divmod(index_t a, index_t b, index_t& q, index_t& r) {
  if (((a | b) >> 32) == 0) {
    const auto x = static_cast<unsigned>(a), y = static_cast<unsigned>(b);
    q = static_cast<index_t>(x / y);
    r = static_cast<index_t>(x % y);
  } else {
    q = a / b;
    r = a % b;
  }
}

/// The source and destination offsets of element e (row-major) of region g.
SPMD_HD inline void region_offsets(const run_geom& g, index_t e, index_t& s, index_t& d) {
  index_t k = 0;
  divmod(e, g.run, e, k);
  s = g.soff + k * g.s_inner;
  d = g.doff + k * g.d_inner;
  for (int i = g.nd - 1; i >= 0; --i) {
    index_t x = 0;
    divmod(e, g.ext[i], e, x);
    s += x * g.sstr[i];
    d += x * g.dstr[i];
  }
}

/// Where work item `item` of `t` lands: its op (the last with begin <= item: item / uniform
/// where every op has that many items) and the source and destination offsets of its element.
struct item_place {
  const dev_op* op;
  index_t s, d;
};
SPMD_HD inline item_place place_of(const step_view& t, index_t item) {
  index_t lo = 0, hi = t.n_ops - 1;
  if (t.uniform > 0) {  // every op has t.uniform items: no search
    index_t unused = 0;
    t.by_uniform.divmod(item, lo, unused);
    hi = lo;
  }
  while (lo < hi) {
    const index_t mid = (lo + hi + 1) / 2;
    if (t.ops[mid].begin <= item) lo = mid;
    else hi = mid - 1;
  }
  const dev_op* o = &t.ops[lo];
  index_t s = 0, d = 0;
  region_offsets(o->geo, item - o->begin, s, d);
  return {o, s, d};
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

/// The elements of one 16-byte unit, as lanes.
template <class T>
struct lanes {
  static constexpr int n = static_cast<int>(16 / sizeof(T));
  T v[n];
};
/// (w by value: a unit in device memory is then read with one 16-byte load. Through a
/// reference nvcc read the first member's unit of every reduction, and a scale's, as 16
/// one-byte loads.)
template <class T>
SPMD_HD lanes<T> as_lanes(const wide16 w) {
  lanes<T> x;
  __builtin_memcpy(&x, &w, sizeof(w));
  return x;
}
template <class T>
SPMD_HD wide16 as_unit(const lanes<T>& x) {
  wide16 w;
  __builtin_memcpy(&w, &x, sizeof(w));
  return w;
}

namespace detail {
/// reduce_at for the elements of one unit: each lane combined over the group in group order,
/// B members' units loaded before the first of them is combined. B = 1, the load in an array
/// of one behind the loop's own bound, is the large steps' body: written so, nvcc issues the
/// group's loads ahead of their sums, and P->R and P->S(0) run at 0.98 and 0.96 of the floor
/// on an H200 where the plain loop (load, then add, per member) ran at 0.79 and 0.51
/// (bench/results/step_kernels_h200_28c.txt: "earlier body" against "library"); batches of
/// eight loads, or several items per thread, ran slower there (step_kernels_h200_28a.txt). A
/// small step from an inline table takes B = inline_table::batch for its sums and averages
/// (its latency is the group's loads in turn).
template <class T, reduce_op Op, int B>
SPMD_HD void combine_units(lanes<T>& x, const wide16* const* in, const index_t* m, index_t n, index_t at) {
  for (index_t j0 = 1; j0 < n; j0 += B) {
    wide16 u[B];
    SPMD_UNROLL
    for (int b = 0; b < B; ++b)
      if (j0 + b < n) u[b] = in[m ? m[j0 + b] : j0 + b][at];
    SPMD_UNROLL
    for (int b = 0; b < B; ++b)
      if (j0 + b < n) {
        const lanes<T> y = as_lanes<T>(u[b]);
        for (int l = 0; l < lanes<T>::n; ++l) x.v[l] = host::combine<Op>(x.v[l], y.v[l]);
      }
  }
}
template <class T, int B = 1>
SPMD_HD wide16 reduce_unit(reduce_op op, const wide16* const* in, const index_t* m, index_t n, index_t at) {
  lanes<T> x = as_lanes<T>(in[m ? m[0] : 0][at]);
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg: combine_units<T, reduce_op::sum, B>(x, in, m, n, at); break;
    // Products, max and min load one member at a time whatever B: with all four reductions
    // batched, nvcc took 124 s over kernels/step.cu (27 s before B), with sums and averages
    // alone 41 s; partial layouts rarely hold the other three.
    case reduce_op::product: combine_units<T, reduce_op::product, 1>(x, in, m, n, at); break;
    case reduce_op::max: combine_units<T, reduce_op::max, 1>(x, in, m, n, at); break;
    case reduce_op::min: combine_units<T, reduce_op::min, 1>(x, in, m, n, at); break;
  }
  if (op == reduce_op::avg)
    for (int l = 0; l < lanes<T>::n; ++l) x.v[l] = host::divide(x.v[l], n);
  return as_unit(x);
}
}  // namespace detail

/// A fill or scale item at `p` of a widened step (widen): its unit's lanes as step_item does
/// each element. (Copies and reductions are wide_thread's own.)
template <class T>
SPMD_HD void wide_fill_scale(const step_view& t, const item_place& p, const wide16* const* in, wide16* const* out) {
  const dev_op& o = *p.op;
  lanes<T> x;
  if (o.code == op_code::fill) {
    for (int l = 0; l < lanes<T>::n; ++l) x.v[l] = host::identity<T>(t.op);
  } else {  // scale
    x = as_lanes<T>(in[o.src][p.s]);
    for (int l = 0; l < lanes<T>::n; ++l) x.v[l] = host::times(x.v[l], t.group_size);
  }
  out[o.dst][p.d] = as_unit(x);
}

/// One thread of a launch over a widened step: a grid-stride loop over the work items (the
/// launch gives one item per thread where the grid allows). Copies and reductions are spelt
/// out here, as bench/step_kernels measured them (combine_units, B members at once); fills
/// and scales go through wide_fill_scale.
template <class T, int B = 1>
SPMD_HD void wide_thread(const step_view& t, index_t block, index_t thread, index_t blocks, index_t threads,
                         const wide16* const* in, wide16* const* out) {
  for (index_t i = block * threads + thread; i < t.items; i += blocks * threads) {
    item_place q[1];
    wide16 v[1];
    q[0] = place_of(t, i);
    const op_code c = q[0].op->code;
    if (c == op_code::copy || c == op_code::replicate) v[0] = in[q[0].op->src][q[0].s];
    const dev_op& o = *q[0].op;
    if (o.code == op_code::copy) {
      out[o.dst][q[0].d] = v[0];
    } else if (o.code == op_code::replicate) {
      const index_t* f = t.fanout + o.dst;
      for (index_t j = 1; j <= f[0]; ++j) out[f[j]][q[0].d] = v[0];
    } else if (o.code == op_code::reduce) {
      out[o.dst][q[0].d] = detail::reduce_unit<T, B>(t.op, in, t.members + o.src * t.group_size, t.group_size, q[0].s);
    } else if (o.code == op_code::reduce_bcast) {
      const index_t* m = t.members + o.src * t.group_size;
      const wide16 x = detail::reduce_unit<T, B>(t.op, in, m, t.group_size, q[0].s);
      for (index_t j = 0; j < t.group_size; ++j) out[m[j]][q[0].d] = x;
    } else if (o.code == op_code::fill || o.code == op_code::scale) {
      wide_fill_scale<T>(t, q[0], in, out);
    }
  }
}

/// One thread of a launch over a spread copy step (spread_copies): K items a thread, those
/// of a block strided by the block, every load before the first store. Grid-stride over
/// chunks of blocks x threads x K items (the kernel launches one chunk a block).
template <int K>
SPMD_HD void copy_spread_thread(const step_view& t, index_t block, index_t thread, index_t blocks, index_t threads,
                                const wide16* const* in, wide16* const* out) {
  for (index_t first = block * threads * K + thread; first - thread < t.items; first += blocks * threads * K) {
    wide16* to[K];  // where each item goes: one pointer kept, not its whole place
    wide16 v[K];
    SPMD_UNROLL
    for (int j = 0; j < K; ++j) {
      const index_t i = first + j * threads;
      if (i < t.items) {
        const item_place q = place_of(t, i);
        v[j] = in[q.op->src][q.s];
        to[j] = out[q.op->dst] + q.d;
      }
    }
    SPMD_UNROLL
    for (int j = 0; j < K; ++j)
      if (first + j * threads < t.items) *to[j] = v[j];
  }
}

/// One thread of a launch over `t`: a grid-stride loop over the work items.
template <class T>
SPMD_HD void step_thread(const step_view& t, index_t block, index_t thread, index_t blocks,
                         index_t threads, const T* const* in, T* const* out) {
  for (index_t i = block * threads + thread; i < t.items; i += blocks * threads)
    step_item<T>(t, i, in, out);
}

}  // namespace spmd::cuda
