// spmd/backends/cuda/kernels/ops.cuh — the operators' local kernels (nvcc only): a
// grid-stride loop per launch, each thread running a body of op_bodies.hpp on one element
// (or one row, for softmax and layer_norm).
#pragma once

#include <cuda_runtime.h>

#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/kernels/step.cuh"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/op_bodies.hpp"

namespace spmd::cuda::kernels {

namespace detail {

/// f(i) for i < n, grid-stride.
template <class F>
__global__ void for_each_kernel(index_t n, F f) {
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<index_t>(gridDim.x) * blockDim.x)
    f(i);
}

template <class F>
void for_each(index_t n, F f, cudaStream_t stream, const char* what) {
  if (n == 0) return;
  for_each_kernel<<<blocks_for(n), step_threads, 0, stream>>>(n, f);
  check(cudaGetLastError(), what);
}

}  // namespace detail

template <unary_fn F, class T>
void unary(T* out, const T* in, index_t n, cudaStream_t stream) {
  detail::for_each(n, [=] __device__(index_t i) { unary_item<F, T>(out, in, i); }, stream, "unary kernel launch");
}

template <binary_fn F, class T>
void binary(T* out, const T* a, const T* b, const index_geom& g, cudaStream_t stream) {
  detail::for_each(g.count(), [=] __device__(index_t i) { binary_item<F, T>(out, a, b, g, i); }, stream,
                   "binary kernel launch");
}

template <binary_fn F, bool ScalarLeft, class T>
void scalar(T* out, const T* in, T c, index_t n, cudaStream_t stream) {
  detail::for_each(n, [=] __device__(index_t i) { scalar_item<F, ScalarLeft, T>(out, in, c, i); }, stream,
                   "scalar kernel launch");
}

template <class T>
void copy(T* dst, const T* src, const index_geom& g, cudaStream_t stream) {
  detail::for_each(g.count(), [=] __device__(index_t i) { copy_item<T>(dst, src, g, i); }, stream,
                   "copy kernel launch");
}

template <reduce_op Op, bool Mean, class T>
void reduce(T* out, const T* in, const index_geom& kept, const index_geom& reduced, cudaStream_t stream) {
  detail::for_each(kept.count(), [=] __device__(index_t i) { reduce_item<Op, Mean, T>(out, in, kept, reduced, i); },
                   stream, "reduction kernel launch");
}

template <bool Log, class T>
void softmax(T* out, const T* x, const index_geom& rows, index_t n, index_t sx, index_t so, cudaStream_t stream) {
  if (n == 0) return;
  detail::for_each(rows.count(), [=] __device__(index_t r) { softmax_row<Log, T, T>(out, x, rows, n, sx, so, r); },
                   stream, "softmax kernel launch");
}

template <bool Affine, class T>
void layer_norm(T* out, const T* x, const T* w, const T* b, const index_geom& outer, const index_geom& inner,
                double eps, cudaStream_t stream) {
  detail::for_each(outer.count(),
                   [=] __device__(index_t r) { layer_norm_row<Affine, T, T>(out, x, w, b, outer, inner, eps, r); },
                   stream, "layer_norm kernel launch");
}

template <class T, class I>
void embedding(T* out, const T* w, const I* idx, index_t first, index_t rows, index_t h, index_t vocab,
               index_t n_out, index_t* bad, cudaStream_t stream) {
  detail::for_each(n_out,
                   [=] __device__(index_t i) { embedding_item<T, T, I>(out, w, idx, first, rows, h, vocab, i, bad); },
                   stream, "embedding kernel launch");
}

template <class U, class I>
void one_hot(U* out, const I* idx, index_t classes, index_t n_out, index_t* bad, cudaStream_t stream) {
  detail::for_each(n_out, [=] __device__(index_t i) { one_hot_item<U, I>(out, idx, classes, i, bad); }, stream,
                   "one_hot kernel launch");
}

}  // namespace spmd::cuda::kernels
