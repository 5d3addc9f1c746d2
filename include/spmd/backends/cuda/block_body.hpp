// spmd/backends/cuda/block_body.hpp — a rank's block of a global tensor, made on the device:
// what one thread does for one element of the factories (full, arange), of the random draws
// (rand, randn, uniform_, normal_, bernoulli_, dropout) and of the Partial split that
// distribute_device_tensor applies after slicing (block_jobs.hpp builds the jobs).
//
// Every rank's block is one job of one launch (job_batch.hpp); ranks whose blocks have the
// same shape share a geometry. The bodies compute what the host's generate and distribute do
// for the same element (host/distribute.hpp, random/draw.hpp: the same functions, so the same
// bits), and the
// CPU tests run them over an emulated grid against those (tests/cuda/block_bodies.cpp).
#pragma once

#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/core/config.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/partial_split.hpp"
#include "spmd/random/draw.hpp"

namespace spmd::cuda {

/// The shape of a block and the global tensor's row-major strides: element e of the block
/// (row-major over `shape`) is global element base + sum of idx[d] * gstride[d].
struct block_geom {
  int nd = 0;
  index_t shape[max_tensor_dims] = {};
  index_t gstride[max_tensor_dims] = {};
  SPMD_HD friend constexpr bool operator==(const block_geom&, const block_geom&) = default;
};

/// One rank's block: where it is written, where it starts in the global tensor, and what
/// the Partial placements make of it.
template <class T>
struct block_job {
  T* out = nullptr;
  index_t base = 0;       // global row-major index of the block's first element
  index_t part = 0;       // the rank's position in its Partial group (the split's j)
  bool identity = false;  // a generated block that holds the reduce op's identity
};

/// One rank's block of a dropout: its output, its input (shaped alike) and where it starts.
template <class T>
struct block_io_job {
  T* out = nullptr;
  const T* in = nullptr;
  index_t base = 0;
};

/// What a generated block holds: one value, or each element's global row-major index.
enum class fill_kind : unsigned char { constant, index };

/// The global row-major index of element e of a block at `base`.
SPMD_HD inline index_t global_index(const block_geom& g, index_t base, index_t e) {
  index_t at = base;
  for (int d = g.nd - 1; d >= 0; --d) {
    index_t x = 0;
    divmod(e, g.shape[d], e, x);
    at += x * g.gstride[d];
  }
  return at;
}

/// Element e of a generated block (host::generate with detail::constant_value or
/// detail::index_value: T(global index)).
template <class T>
SPMD_HD void generate_item(const block_job<T>& j, const block_geom& g, index_t e, fill_kind k, T value, T identity) {
  T v = value;
  if (j.identity) v = identity;
  else if (k == fill_kind::index) v = T(global_index(g, j.base, e));
  j.out[e] = v;
}

/// Element e of a sliced block split for its Partial group of n members, in place
/// (host::distribute's split_partial).
template <class T>
SPMD_HD void split_item(const block_job<T>& j, index_t e, reduce_op op, index_t n) {
  j.out[e] = host::detail::partial_part(op, j.out[e], j.part, n, e);
}

/// Element e of a random draw's block (host::fill_locals: random::draw_at by global index, or
/// the identity on a Partial group's other members).
template <class T>
SPMD_HD void random_item(const block_job<T>& j, const block_geom& g, index_t e, const random::draw& d, T identity) {
  j.out[e] = j.identity ? identity : random::draw_at<T>(d, static_cast<std::uint64_t>(global_index(g, j.base, e)));
}

/// Element e of a dropout's block (host::dropout_block: random::dropout_at by global index).
template <class T>
SPMD_HD void dropout_item(const block_io_job<T>& j, const block_geom& g, index_t e, const random::draw& d) {
  j.out[e] = random::dropout_at<T>(d, static_cast<std::uint64_t>(global_index(g, j.base, e)), j.in[e]);
}

}  // namespace spmd::cuda
