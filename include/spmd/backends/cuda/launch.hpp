// spmd/backends/cuda/launch.hpp — the device kernels as the host sees them: declarations only.
//
// Definitions are in kernels/*.cuh and are instantiated for every device element type by
// nvcc in the spmd_cuda library (kernels/*.cu). Everything queues on `stream` and returns at
// once; a launch error throws spmd::cuda::error naming the kernel.
#pragma once

#include <cuda_runtime_api.h>

#include "spmd/backends/cuda/block_body.hpp"
#include "spmd/backends/cuda/gemm_heads.hpp"
#include "spmd/backends/cuda/job_batch.hpp"
#include "spmd/backends/cuda/op_bodies.hpp"
#include "spmd/backends/cuda/ring_bodies.hpp"
#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/core/element_math.hpp"
#include "spmd/core/config.hpp"
#include "spmd/core/optim_math.hpp"
#include "spmd/random/draw.hpp"

namespace spmd::cuda {

/// The most ranks a step launch takes: their buffer pointers travel as kernel parameters
/// (2 x 128 pointers = 2 KiB), so a launch needs no pointer upload and can be captured.
inline constexpr index_t max_launch_ranks = 128;

/// Every rank's input and output buffers of one step, by mesh index.
template <class T>
struct rank_ptrs {
  const T* in[max_launch_ranks];
  T* out[max_launch_ranks];
};

// ---- what the operators' launches take per job (job_batch.hpp) ----

/// A job's pointers: an output and one input, or two.
template <class T>
struct out_in {
  T* out;
  const T* in;
};
template <class T>
struct out_ab {
  T* out;
  const T* a;
  const T* b;
};
/// A reduction's geometry: the kept dims (one output element each) and the reduced ones.
struct reduce_geom {
  index_geom kept, reduced;
  SPMD_HD friend constexpr bool operator==(const reduce_geom&, const reduce_geom&) = default;
};
/// A softmax's rows, each of n elements at input stride sx and output stride so.
struct softmax_geom {
  index_geom rows;
  index_t n = 0, sx = 0, so = 0;
  SPMD_HD friend constexpr bool operator==(const softmax_geom&, const softmax_geom&) = default;
};
template <class T>
struct norm_ptrs {
  T* out;
  const T* x;
  const T* w;  // null without the affine transform
  const T* b;
};
struct norm_geom {
  index_geom outer, inner;
  SPMD_HD friend constexpr bool operator==(const norm_geom&, const norm_geom&) = default;
};
/// An embedding's job: its weight block holds rows [first, first + rows) of h columns; `bad`
/// (device memory, 2 elements, zeroed) receives an out-of-range index.
template <class T, class I>
struct embedding_ptrs {
  T* out;
  const T* w;
  const I* idx;
  index_t first;
  index_t* bad;
};
struct embedding_geom {
  index_t rows = 0, h = 0;
  SPMD_HD friend constexpr bool operator==(const embedding_geom&, const embedding_geom&) = default;
};
template <class U, class I>
struct one_hot_ptrs {
  U* out;
  const I* idx;
  index_t* bad;
};

namespace kernels {

/// One step for every rank: `table` (its members and ops in device memory) over `items`
/// work items; from `small` instead where given (the same table inline: step_table.hpp).
template <class T>
void step(const step_view& table, const rank_ptrs<T>& ptrs, cudaStream_t stream, const inline_table* small = nullptr);

/// A widened step (step_table.hpp: widen): a 16-byte unit of elements of T per work item.
template <class T>
void step_wide(const step_view& table, const rank_ptrs<wide16>& ptrs, cudaStream_t stream,
               const inline_table* small = nullptr);

/// out[k] = To(in[k]) for k < n (forward_dtype).
template <class To, class From>
void cast(To* out, const From* in, index_t n, cudaStream_t stream);

/// The optimizers' fused update (core/optim_math.hpp) over `segments` blocks whose table is in
/// device memory; `longest` is the largest block's element count. One launch.
template <class T, class Coeffs>
void fused_update(const optim_math::segment<T, Coeffs>* table, index_t segments, const Coeffs* coeffs, index_t longest,
                  cudaStream_t stream);

// ---- one rank's box operations (the per-rank executor's region kernels, NCCL backend) ----

/// Up to max_launch_ranks source pointers of a region reduction, by value.
template <class T>
struct region_sources {
  const T* p[max_launch_ranks];
};

/// out[g.d] = in[g.s] over region g (out != in).
template <class T>
void region_copy(T* out, const T* in, const run_geom& g, cudaStream_t stream);
/// out[g.d] = v.
template <class T>
void region_fill(T* out, const run_geom& g, T v, cudaStream_t stream);
/// out[g.d] = in[g.s] * n (host::times).
template <class T>
void region_scale(T* out, const T* in, const run_geom& g, index_t n, cudaStream_t stream);
/// out[g.d] = op over src[0..n) at [g.s], left to right (avg: / n last), as step_item's reduce.
template <class T>
void region_reduce(reduce_op op, T* out, const region_sources<T>& src, index_t n, const run_geom& g,
                   cudaStream_t stream);
/// x[k] = host::divide(x[k], n) for k < len (avg after a sum in another order).
template <class T>
void region_divide(T* x, index_t len, index_t n, cudaStream_t stream);

// ---- operators' local kernels: every rank's block in one launch (job_batch.hpp; what a
// thread does per item is op_bodies.hpp) ----

/// Job items: the output's elements (unary, binary, scalar, copy, reduce, embedding,
/// one_hot) or rows (softmax, layer_norm). Each call is one launch (none for no items).
template <unary_fn F, class T>
void unary(const job_batch<out_in<T>>& jobs, cudaStream_t stream);
template <binary_fn F, class T>
void binary(const job_batch<out_ab<T>, index_geom>& jobs, cudaStream_t stream);
template <binary_fn F, bool ScalarLeft, class T>
void scalar(const job_batch<out_in<T>>& jobs, T c, cudaStream_t stream);
/// out and in walked by the geometry (s[0]: out strides, s[1]: in strides).
template <class T>
void copy(const job_batch<out_in<T>, index_geom>& jobs, cudaStream_t stream);
template <reduce_op Op, bool Mean, class T>
void reduce(const job_batch<out_in<T>, reduce_geom>& jobs, cudaStream_t stream);
template <bool Log, class T>
void softmax(const job_batch<out_in<T>, softmax_geom>& jobs, cudaStream_t stream);
template <bool Affine, class T>
void layer_norm(const job_batch<norm_ptrs<T>, norm_geom>& jobs, double eps, cudaStream_t stream);
/// layer_norm's input gradient: norm_ptrs' x, w (null without Affine), and b holding g (the
/// output's gradient, a block of x's shape and strides).
template <bool Affine, class T>
void layer_norm_backward(const job_batch<norm_ptrs<T>, norm_geom>& jobs, double eps, cudaStream_t stream);
template <class T, class I>
void embedding(const job_batch<embedding_ptrs<T, I>, embedding_geom>& jobs, index_t vocab, cudaStream_t stream);
/// out = one_hot(idx) with `classes` classes; an index outside [0, classes) sets bad.
template <class U, class I>
void one_hot(const job_batch<one_hot_ptrs<U, I>>& jobs, index_t classes, cudaStream_t stream);

/// Every job's block made as host::generate makes it (block_body.hpp: generate_item): the
/// factories' full and arange on the device.
template <class T>
void generate(const job_batch<block_job<T>, block_geom>& jobs, fill_kind k, T value, T identity, cudaStream_t stream);
/// Every job's block split for its Partial group of n members, in place (split_item): the
/// last launch of distribute_device_tensor on a Partial layout.
template <class T>
void split_partial(const job_batch<block_job<T>>& jobs, reduce_op op, index_t n, cudaStream_t stream);

/// One rank's block (a launch of one job): for a kernel of a user's own, as in local_map.
template <binary_fn F, bool ScalarLeft, class T>
void scalar(T* out, const T* in, T c, index_t n, cudaStream_t stream) {
  job_batch<out_in<T>> one;
  one.add({out, in}, no_geom{}, n);
  scalar<F, ScalarLeft, T>(one, c, stream);
}

/// Row-major c (m x n) = a (m x k) . b (k x n), a read as (k x m) transposed when
/// a_transposed, b as (n x k) transposed when b_transposed; `batch` products at strides m*k,
/// k*n, m*n. float and double through cuBLAS, the others by a kernel that adds in the host
/// kernel's order.
template <class T>
void gemm(T* c, const T* a, const T* b, index_t m, index_t n, index_t k, bool a_transposed,
          bool b_transposed, index_t batch, cudaStream_t stream);

/// Every rank's c = op(a) . op(b) at once, all with the same m, n, k and batch: one
/// cuBLAS batched call for float and double (the pointer arrays written on the device by a
/// small kernel from these parameters, so nothing waits for the host), one kernel launch for
/// the others.
template <class T>
struct gemm_ranks_args {
  const T* a[max_launch_ranks];
  const T* b[max_launch_ranks];
  T* c[max_launch_ranks];
};
template <class T>
void gemm_ranks(const gemm_ranks_args<T>& p, index_t ranks, index_t m, index_t n, index_t k, bool a_transposed,
                bool b_transposed, index_t batch, cudaStream_t stream);

// ---- context parallelism's ring (backends/cuda/ring.hpp; a thread's row: ring_bodies.hpp) ----

/// One cuBLAS batched call over the heads (float and double; gemm_heads.hpp).
template <class T>
void gemm_heads(const gemm_heads_args<T>& g, cudaStream_t stream);
/// The row bodies of a pair over every head: one launch each, a thread per row.
template <class T>
void ring_forward_rows(const ring_pair& p, T* s, T* out, T* lse, cudaStream_t stream);
template <class T>
void ring_probability_rows(const ring_pair& p, T* s, const T* lse, cudaStream_t stream);
template <class T>
void ring_ds_rows(const ring_pair& p, const T* prob, T* dp, const T* delta, T scale, cudaStream_t stream);
/// delta (nb · w/d heads x cq rows) = rowsum(g ∘ y) over each head's d elements of q's block.
template <class T>
void ring_delta_rows(T* delta, const T* g, const T* y, index_t nb, index_t cq, index_t w, index_t d,
                     cudaStream_t stream);
/// x[i] = value for i < n.
template <class T>
void ring_fill(T* x, index_t n, T value, cudaStream_t stream);

// ---- random operators (runtime/random.hpp): every rank's block by global index, one launch ----

/// Every job's block of a uniform, normal or bernoulli draw (random::draw_at, the host's own
/// function), or `identity` on a job marked identity (Partial placements).
template <class T>
void random_fill(const job_batch<block_job<T>, block_geom>& jobs, const random::draw& d, T identity,
                 cudaStream_t stream);
/// Every job's out = random::dropout_at of its in over the block.
template <class T>
void random_dropout(const job_batch<block_io_job<T>, block_geom>& jobs, const random::draw& d, cudaStream_t stream);

}  // namespace kernels
}  // namespace spmd::cuda
