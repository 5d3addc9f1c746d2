// spmd/backends/cuda/kernels/ops.cuh — the operators' local kernels (nvcc only): one launch
// for every rank's block (a job_batch), a grid-stride loop over the jobs' items, each thread
// running a body of op_bodies.hpp on one element (or one row, for softmax and layer_norm).
#pragma once

#include <cuda_runtime.h>

#include "spmd/backends/cuda/block_body.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/kernels/step.cuh"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/op_bodies.hpp"

namespace spmd::cuda::kernels {

namespace detail {

/// f(i) for i < n, grid-stride (gemm.cuh's in-order products).
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

/// f(job's pointers, job's geometry, item within the job) for every item of every job of b,
/// grid-stride (b in the parameter space, indexed by job: __grid_constant__).
template <class P, class G, class F>
__device__ void run_jobs(const job_batch<P, G>& b, F& f) {
  const index_t n = b.items();
  for (index_t i = blockIdx.x * static_cast<index_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<index_t>(gridDim.x) * blockDim.x) {
    const int k = b.job_of(i);
    f(b.ptr[k], b.geom[b.geom_of[k]], i - b.begin[k]);
  }
}
template <class P, class G, class F>
__global__ void jobs_kernel(const __grid_constant__ job_batch<P, G> b, F f) {
  run_jobs(b, f);
}
/// The same with MinBlocks blocks an SM at least: registers capped for an instruction-bound
/// body (the random draws). (A separate kernel: __launch_bounds__ even with one block changed
/// the other bodies' code, and `arange` ran 7% slower with it on an H200.)
template <int MinBlocks, class P, class G, class F>
__global__ void __launch_bounds__(step_threads, MinBlocks) jobs_kernel_min(const __grid_constant__ job_batch<P, G> b, F f) {
  run_jobs(b, f);
}

/// One launch over every job of b (none for no items), counted in op_launches(); with
/// MinBlocks > 0, by jobs_kernel_min.
template <int MinBlocks = 0, class P, class G, class F>
void for_each_job(const job_batch<P, G>& b, F f, cudaStream_t stream, const char* what) {
  const index_t n = b.items();
  if (n == 0) return;
  if constexpr (MinBlocks > 0) jobs_kernel_min<MinBlocks><<<blocks_for(n), step_threads, 0, stream>>>(b, f);
  else jobs_kernel<<<blocks_for(n), step_threads, 0, stream>>>(b, f);
  check(cudaGetLastError(), what);
  op_launches().fetch_add(1, std::memory_order_relaxed);
}

}  // namespace detail

template <unary_fn F, class T>
void unary(const job_batch<out_in<T>>& jobs, cudaStream_t stream) {
  detail::for_each_job(
      jobs, [] __device__(const out_in<T>& p, const no_geom&, index_t i) { unary_item<F, T>(p.out, p.in, i); },
      stream, "unary kernel launch");
}

template <binary_fn F, class T>
void binary(const job_batch<out_ab<T>, index_geom>& jobs, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [] __device__(const out_ab<T>& p, const index_geom& g, index_t i) { binary_item<F, T>(p.out, p.a, p.b, g, i); },
      stream, "binary kernel launch");
}

template <binary_fn F, bool ScalarLeft, class T>
void scalar(const job_batch<out_in<T>>& jobs, T c, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [=] __device__(const out_in<T>& p, const no_geom&, index_t i) {
        scalar_item<F, ScalarLeft, T>(p.out, p.in, c, i);
      },
      stream, "scalar kernel launch");
}

template <class T>
void copy(const job_batch<out_in<T>, index_geom>& jobs, cudaStream_t stream) {
  detail::for_each_job(
      jobs, [] __device__(const out_in<T>& p, const index_geom& g, index_t i) { copy_item<T>(p.out, p.in, g, i); },
      stream, "copy kernel launch");
}

template <reduce_op Op, bool Mean, class T>
void reduce(const job_batch<out_in<T>, reduce_geom>& jobs, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [] __device__(const out_in<T>& p, const reduce_geom& g, index_t i) {
        reduce_item<Op, Mean, T>(p.out, p.in, g.kept, g.reduced, i);
      },
      stream, "reduction kernel launch");
}

template <bool Log, class T>
void softmax(const job_batch<out_in<T>, softmax_geom>& jobs, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [] __device__(const out_in<T>& p, const softmax_geom& g, index_t r) {
        softmax_row<Log, T, T>(p.out, p.in, g.rows, g.n, g.sx, g.so, r);
      },
      stream, "softmax kernel launch");
}

template <bool Affine, class T>
void layer_norm(const job_batch<norm_ptrs<T>, norm_geom>& jobs, double eps, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [=] __device__(const norm_ptrs<T>& p, const norm_geom& g, index_t r) {
        layer_norm_row<Affine, T, T>(p.out, p.x, p.w, p.b, g.outer, g.inner, eps, r);
      },
      stream, "layer_norm kernel launch");
}

template <bool Affine, class T>
void layer_norm_backward(const job_batch<norm_ptrs<T>, norm_geom>& jobs, double eps, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [=] __device__(const norm_ptrs<T>& p, const norm_geom& g, index_t r) {
        layer_norm_backward_row<Affine, T, T>(p.out, p.b, p.x, p.w, g.outer, g.inner, eps, r);
      },
      stream, "layer_norm_backward kernel launch");
}

template <class T, class I>
void embedding(const job_batch<embedding_ptrs<T, I>, embedding_geom>& jobs, index_t vocab, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [=] __device__(const embedding_ptrs<T, I>& p, const embedding_geom& g, index_t i) {
        embedding_item<T, T, I>(p.out, p.w, p.idx, p.first, g.rows, g.h, vocab, i, p.bad);
      },
      stream, "embedding kernel launch");
}

template <class U, class I>
void one_hot(const job_batch<one_hot_ptrs<U, I>>& jobs, index_t classes, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [=] __device__(const one_hot_ptrs<U, I>& p, const no_geom&, index_t i) {
        one_hot_item<U, I>(p.out, p.idx, classes, i, p.bad);
      },
      stream, "one_hot kernel launch");
}

template <class T>
void generate(const job_batch<block_job<T>, block_geom>& jobs, fill_kind k, T value, T identity, cudaStream_t stream) {
  detail::for_each_job(
      jobs,
      [=] __device__(const block_job<T>& j, const block_geom& g, index_t e) {
        generate_item<T>(j, g, e, k, value, identity);
      },
      stream, "generate kernel launch");
}

template <class T>
void split_partial(const job_batch<block_job<T>>& jobs, reduce_op op, index_t n, cudaStream_t stream) {
  detail::for_each_job(
      jobs, [=] __device__(const block_job<T>& j, const no_geom&, index_t e) { split_item<T>(j, e, op, n); },
      stream, "Partial split kernel launch");
}

}  // namespace spmd::cuda::kernels
