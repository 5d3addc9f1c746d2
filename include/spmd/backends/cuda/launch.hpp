// spmd/backends/cuda/launch.hpp — the device kernels as the host sees them: declarations only.
//
// Definitions are in kernels/*.cuh and are instantiated for every device element type by
// nvcc in the spmd_cuda library (kernels/*.cu). Everything queues on `stream` and returns at
// once; a launch error throws spmd::cuda::error naming the kernel.
#pragma once

#include <cuda_runtime_api.h>

#include "spmd/backends/cuda/op_bodies.hpp"
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

namespace kernels {

/// One step for every rank: `table` (its members and ops in device memory) over `items`
/// work items.
template <class T>
void step(const step_view& table, const rank_ptrs<T>& ptrs, cudaStream_t stream);

/// A widened step (step_table.hpp: widen): a 16-byte unit of elements of T per work item.
template <class T>
void step_wide(const step_view& table, const rank_ptrs<wide16>& ptrs, cudaStream_t stream);

/// out[k] = To(in[k]) for k < n (forward_dtype).
template <class To, class From>
void cast(To* out, const From* in, index_t n, cudaStream_t stream);

/// The optimizers' fused update (core/optim_math.hpp) over `segments` blocks whose table is in
/// device memory; `longest` is the largest block's element count. One launch.
template <class T, class Coeffs>
void fused_update(const optim_math::segment<T, Coeffs>* table, index_t segments, index_t longest, cudaStream_t stream);

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

// ---- operators' local kernels (one rank's block per launch; op_bodies.hpp per thread) ----

template <unary_fn F, class T>
void unary(T* out, const T* in, index_t n, cudaStream_t stream);
template <binary_fn F, class T>
void binary(T* out, const T* a, const T* b, const index_geom& g, cudaStream_t stream);
template <binary_fn F, bool ScalarLeft, class T>
void scalar(T* out, const T* in, T c, index_t n, cudaStream_t stream);
/// dst and src walked by g (s[0]: dst strides, s[1]: src strides).
template <class T>
void copy(T* dst, const T* src, const index_geom& g, cudaStream_t stream);
template <reduce_op Op, bool Mean, class T>
void reduce(T* out, const T* in, const index_geom& kept, const index_geom& reduced, cudaStream_t stream);
template <bool Log, class T>
void softmax(T* out, const T* x, const index_geom& rows, index_t n, index_t sx, index_t so,
             cudaStream_t stream);
template <bool Affine, class T>
void layer_norm(T* out, const T* x, const T* w, const T* b, const index_geom& outer,
                const index_geom& inner, double eps, cudaStream_t stream);
/// `bad` (device memory, 2 elements, zeroed) receives an out-of-range index.
template <class T, class I>
void embedding(T* out, const T* w, const I* idx, index_t first, index_t rows, index_t h, index_t vocab,
               index_t n_out, index_t* bad, cudaStream_t stream);
/// out (n_out = indices * classes) = one_hot(idx); an index outside [0, classes) sets bad.
template <class U, class I>
void one_hot(U* out, const I* idx, index_t classes, index_t n_out, index_t* bad, cudaStream_t stream);
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

// ---- random operators (runtime/random.hpp): one rank's block by global index ----

/// Where a rank's block sits in the global tensor: element e of the block (row-major over
/// `shape`) is global element base + sum of idx[d] * gstride[d].
struct random_box {
  int rank = 0;
  index_t count = 0;
  index_t shape[max_tensor_dims]{};
  index_t gstride[max_tensor_dims]{};
  index_t base = 0;
};

/// out = the block of a uniform, normal or bernoulli draw (random::draw_at, the host's own
/// function), or `identity` everywhere when `identity_rank` (Partial placements).
template <class T>
void random_fill(T* out, const random_box& box, const random::draw& d, bool identity_rank, T identity,
                 cudaStream_t stream);
/// out = random::dropout_at of in over the block.
template <class T>
void random_dropout(T* out, const T* in, const random_box& box, const random::draw& d, cudaStream_t stream);

}  // namespace kernels
}  // namespace spmd::cuda
