// bench/step_variants.cu — the widened step kernel three ways (see step_variants.hpp), one
// item per thread each: the library's launch (kernels::step_wide, compiled into spmd_cuda),
// the same per-thread body compiled here, and the body of an earlier commit (items and a
// reduction's loads in arrays of one, bench/results/step_kernels_h200_28a.txt's "U1 B1"),
// so that one run tells a difference of code from one of compilation.
#include <cuda_runtime.h>

#include <algorithm>

#include "spmd/backends/cuda/kernels/step.cuh"
#include "step_variants.hpp"

namespace {

using spmd::index_t;
using spmd::reduce_op;
using spmd::cuda::item_place;
using spmd::cuda::lanes;
using spmd::cuda::rank_ptrs;
using spmd::cuda::step_view;
using spmd::cuda::wide16;
namespace cu = spmd::cuda;

// ---- the earlier body ----
template <class T, reduce_op Op>
__device__ void old_combine(lanes<T>& x, const wide16* const* in, const index_t* m, index_t n, index_t at) {
  for (index_t j0 = 1; j0 < n; j0 += 1) {
    wide16 u[1];
#pragma unroll
    for (int b = 0; b < 1; ++b)
      if (j0 + b < n) u[b] = in[m ? m[j0 + b] : j0 + b][at];
#pragma unroll
    for (int b = 0; b < 1; ++b)
      if (j0 + b < n) {
        const lanes<T> y = cu::as_lanes<T>(u[b]);
        for (int l = 0; l < lanes<T>::n; ++l) x.v[l] = spmd::host::combine<Op>(x.v[l], y.v[l]);
      }
  }
}
template <class T>
__device__ wide16 old_reduce(reduce_op op, const wide16* const* in, const index_t* m, index_t n, index_t at) {
  lanes<T> x = cu::as_lanes<T>(in[m ? m[0] : 0][at]);
  switch (op) {
    case reduce_op::sum:
    case reduce_op::avg: old_combine<T, reduce_op::sum>(x, in, m, n, at); break;
    case reduce_op::product: old_combine<T, reduce_op::product>(x, in, m, n, at); break;
    case reduce_op::max: old_combine<T, reduce_op::max>(x, in, m, n, at); break;
    case reduce_op::min: old_combine<T, reduce_op::min>(x, in, m, n, at); break;
  }
  if (op == reduce_op::avg)
    for (int l = 0; l < lanes<T>::n; ++l) x.v[l] = spmd::host::divide(x.v[l], n);
  return cu::as_unit(x);
}
template <class T>
__global__ void __launch_bounds__(256) old_kernel(step_view t, rank_ptrs<wide16> p) {
  const index_t stride = static_cast<index_t>(gridDim.x) * blockDim.x;
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < t.items; i += stride) {
    item_place q[1];
    wide16 v[1];
    q[0] = cu::place_of(t, i);
    const spmd::op_code c = q[0].op->code;
    if (c == spmd::op_code::copy || c == spmd::op_code::replicate) v[0] = p.in[q[0].op->src][q[0].s];
    const cu::dev_op& o = *q[0].op;
    if (o.code == spmd::op_code::copy) {
      p.out[o.dst][q[0].d] = v[0];
    } else if (o.code == spmd::op_code::replicate) {
      const index_t* f = t.fanout + o.dst;
      for (index_t j = 1; j <= f[0]; ++j) p.out[f[j]][q[0].d] = v[0];
    } else if (o.code == spmd::op_code::reduce) {
      p.out[o.dst][q[0].d] = old_reduce<T>(t.op, p.in, t.members + o.src * t.group_size, t.group_size, q[0].s);
    } else if (o.code == spmd::op_code::reduce_bcast) {
      const index_t* m = t.members + o.src * t.group_size;
      const wide16 x = old_reduce<T>(t.op, p.in, m, t.group_size, q[0].s);
      for (index_t j = 0; j < t.group_size; ++j) p.out[m[j]][q[0].d] = x;
    } else {
      cu::wide_op<T>(t, q[0], p.in, p.out);
    }
  }
}

// ---- the library's body, compiled here ----
template <int K>
__global__ void __launch_bounds__(256) here_kernel(const step_view t, const __grid_constant__ rank_ptrs<wide16> p) {
  if constexpr (K == 1)
    cu::wide_thread<float>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
  else
    cu::copy_units_thread<K>(t, blockIdx.x, threadIdx.x, gridDim.x, blockDim.x, p.in, p.out);
}

}  // namespace

namespace bench {

int step_variants() { return 3; }
const char* step_variant_name(int v) {
  return v == 0 ? "library (spmd_cuda)" : v == 1 ? "same body, built here" : "earlier body, built here";
}

void launch_step_variant(int v, const step_view& t, const rank_ptrs<wide16>& p, int, cudaStream_t s) {
  if (v == 0) {
    cu::kernels::step_wide<float>(t, p, s);
    return;
  }
  const auto blocks = static_cast<unsigned>((t.items + 255) / 256);
  if (v == 2 && t.units == 1) {
    old_kernel<float><<<blocks, 256, 0, s>>>(t, p);
    return;
  }
  switch (t.units) {
    case 4: here_kernel<4><<<blocks, 256, 0, s>>>(t, p); break;
    case 2: here_kernel<2><<<blocks, 256, 0, s>>>(t, p); break;
    default: here_kernel<1><<<blocks, 256, 0, s>>>(t, p); break;
  }
}

}  // namespace bench
