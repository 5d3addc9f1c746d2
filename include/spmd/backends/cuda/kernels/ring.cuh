// spmd/backends/cuda/kernels/ring.cuh — context parallelism's ring on the device (nvcc only):
// the products over every head of a pair of runs (cuBLAS, rows at the blocks' own strides),
// and a thread per row for the bodies of ring_bodies.hpp.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/kernels/gemm.cuh"
#include "spmd/backends/cuda/kernels/ops.cuh"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/ring_bodies.hpp"

namespace spmd::cuda::kernels {

template <class T>
void gemm_heads(const gemm_heads_args<T>& g, cudaStream_t stream) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "the ring computes in float or double");
  if (g.m == 0 || g.n == 0 || g.heads == 0) return;
  gemm_batched<T>(
      g.column_major(), g.heads, g.alpha, g.beta,
      [=] __device__(index_t h, const T*& a, const T*& b, T*& c) {
        a = g.a + g.a_at.of(h);
        b = g.b + g.b_at.of(h);
        c = g.c + g.c_at.of(h);
      },
      stream, "ring");
}

template <class T>
void ring_forward_rows(const ring_pair& p, T* s, T* out, T* lse, cudaStream_t stream) {
  const index_t rows = p.rows();
  detail::for_each(
      p.heads() * rows, [=] __device__(index_t i) { ring_forward_row<T>(p, s, out, lse, i / rows, i % rows); }, stream,
      "ring forward row kernel launch");
}

template <class T>
void ring_probability_rows(const ring_pair& p, T* s, const T* lse, cudaStream_t stream) {
  const index_t rows = p.rows();
  detail::for_each(
      p.heads() * rows, [=] __device__(index_t i) { ring_probability_row<T>(p, s, lse, i / rows, i % rows); }, stream,
      "ring probability row kernel launch");
}

template <class T>
void ring_ds_rows(const ring_pair& p, const T* prob, T* dp, const T* delta, T scale, cudaStream_t stream) {
  const index_t rows = p.rows();
  detail::for_each(
      p.heads() * rows, [=] __device__(index_t i) { ring_ds_row<T>(p, prob, dp, delta, scale, i / rows, i % rows); },
      stream, "ring dS row kernel launch");
}

template <class T>
void ring_delta_rows(T* delta, const T* g, const T* y, index_t nb, index_t cq, index_t w, index_t d,
                     cudaStream_t stream) {
  detail::for_each(
      nb * (w / d) * cq, [=] __device__(index_t i) { ring_delta_row<T>(delta, g, y, cq, w, d, i / cq, i % cq); },
      stream, "ring delta row kernel launch");
}

template <class T>
void ring_fill(T* x, index_t n, T value, cudaStream_t stream) {
  detail::for_each(
      n, [=] __device__(index_t i) { x[i] = value; }, stream, "ring fill kernel launch");
}

}  // namespace spmd::cuda::kernels
