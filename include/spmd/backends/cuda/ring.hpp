// spmd/backends/cuda/ring.hpp — context parallelism's ring (runtime/ops/ring_attention.hpp) on
// the device backends: the same slots, places and merges as the host ring, each pair of runs
// computed by cuBLAS products over its heads and a thread per row (ring_pairs.hpp: the steps;
// ring_bodies.hpp: a thread's row), and the blocks passed on by the backend's p2p_slot
// (CUDA: the buffers change hands on the one GPU; NCCL: ncclSend and ncclRecv).
//
// The host ring computes in tiles of 128 query rows with the keys each tile sees; here a pair
// is one product over the rows that see a key and the most keys one of them sees, the rest of
// each row masked to zero. Sums run in cuBLAS's order: within a tolerance of the host's.
#pragma once

#include <cuda_runtime_api.h>

#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/device_set.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/ring_pairs.hpp"
#include "spmd/plan/p2p_schedule.hpp"

namespace spmd::cuda {

namespace ring_device {

/// K and V of a rank's block ((nb, len, w) each) into kv, padded to (2, nb, k_max, w).
template <class T>
void pack(T* kv, const T* k, const T* v, index_t nb, index_t len, index_t k_max, index_t w) {
  const cudaStream_t st = current_stream();
  if (nb * k_max * w == 0) return;
  check(cudaMemsetAsync(kv, 0, static_cast<std::size_t>(2 * nb * k_max * w) * sizeof(T), st), "cudaMemsetAsync (ring)");
  if (len == 0) return;
  const std::size_t row = static_cast<std::size_t>(len * w) * sizeof(T);
  const std::size_t padded = static_cast<std::size_t>(k_max * w) * sizeof(T);
  for (int part = 0; part < 2; ++part)
    check(cudaMemcpy2DAsync(kv + part * nb * k_max * w, padded, part == 0 ? k : v, row, row,
                            static_cast<std::size_t>(nb), cudaMemcpyDeviceToDevice, st),
          "cudaMemcpy2DAsync (ring)");
}
/// Part `part` (0: K, 1: V) of a padded block back to (nb, len, w).
template <class T>
void unpack(T* out, const T* kv, int part, index_t nb, index_t len, index_t k_max, index_t w) {
  if (nb * len * w == 0) return;
  const std::size_t row = static_cast<std::size_t>(len * w) * sizeof(T);
  const std::size_t padded = static_cast<std::size_t>(k_max * w) * sizeof(T);
  check(cudaMemcpy2DAsync(out, row, kv + part * nb * k_max * w, padded, row, static_cast<std::size_t>(nb),
                          cudaMemcpyDeviceToDevice, current_stream()),
        "cudaMemcpy2DAsync (ring)");
}

/// Rank i's block of x made (shape s) and zeroed on the current stream.
template <class T>
void zero(device_set<T>& x, index_t i, const shape_vec& s) {
  x.assign(i, s);
  if (x.size(i) > 0)
    check(cudaMemsetAsync(x.data(i), 0, static_cast<std::size_t>(x.size(i)) * sizeof(T), current_stream()),
          "cudaMemsetAsync (ring)");
}

/// Rank i's padded K/V block (place pl) packed from k's and v's blocks into kv.
template <class T>
void start(device_set<T>& kv, const device_set<T>& k, const device_set<T>& v, index_t i, const place& pl) {
  const shape_vec& ks = k.shape(i);
  kv.assign(i, shape_of({2, ks[0], pl.k_max, ks[2]}));
  pack(kv.data(i), k.data(i), v.data(i), ks[0], ks[1], pl.k_max, ks[2]);
}

/// f(i, pair) for each held rank i with queries and each pair of its runs in slot t (the key
/// block it holds then: its own t slots back).
template <index_t D, bool Causal, class T, class F>
void for_each_pair_in_slot(const device_set<T>& q, const std::vector<place>& places, index_t t, F&& f) {
  std::size_t at = 0;
  for (const index_t i : q.held()) {
    const place& pl = places[at++];
    if (q.size(i) == 0) continue;
    for_each_pair(pl, (pl.pos - t + pl.n) % pl.n, q.shape(i), D, Causal, [&](const ring_pair& p) { f(i, p); });
  }
}

/// The steps of a pair (ring_pairs.hpp) on the current stream: cuBLAS and the row kernels.
struct device_steps {
  cudaStream_t st = current_stream();
  template <class T>
  device_buffer<T> scratch(index_t n) const {
    return device_buffer<T>(n);
  }
  template <class T>
  void product(const kernels::gemm_heads_args<T>& g) const {
    kernels::gemm_heads<T>(g, st);
  }
  template <class T>
  void forward_rows(const ring_pair& p, T* s, T* out, T* lse) const {
    kernels::ring_forward_rows<T>(p, s, out, lse, st);
  }
  template <class T>
  void probability_rows(const ring_pair& p, T* s, const T* lse) const {
    kernels::ring_probability_rows<T>(p, s, lse, st);
  }
  template <class T>
  void ds_rows(const ring_pair& p, const T* prob, T* dp, const T* delta, T scale) const {
    kernels::ring_ds_rows<T>(p, prob, dp, delta, scale, st);
  }
};

}  // namespace ring_device

/// The ring's forward on device backend B (cuda or nccl): the output (q's blocks' shapes) and
/// each rank's log-sum-exp per (head, query row), from q's, k's and v's blocks and every held
/// rank's place. Dim: the mesh dim of the ring (-1: none).
template <class B, index_t D, bool Causal, int Dim, class M, class T>
std::pair<device_set<T>, device_set<T>> ring_forward(const device_set<T>& q, const device_set<T>& k,
                                                     const device_set<T>& v,
                                                     const std::vector<runtime::ring_detail::place>& places,
                                                     double scale) {
  namespace rd = ring_device;
  const rd::device_steps x;
  device_set<T> kv(q.ranks(), q.held_ranks()), out(q.ranks(), q.held_ranks()), lse(q.ranks(), q.held_ranks());
  std::size_t at = 0;
  for (const index_t i : q.held()) {
    const shape_vec& qs = q.shape(i);
    rd::start(kv, k, v, i, places[at++]);
    rd::zero(out, i, qs);
    lse.assign(i, rd::shape_of({qs[0] * (qs[2] / D), qs[1]}));
    kernels::ring_fill<T>(lse.data(i), lse.size(i), -std::numeric_limits<T>::infinity(), x.st);
  }
  const index_t n = places.empty() ? 1 : places[0].n;
  const T sc = static_cast<T>(scale);
  for (index_t t = 0; t < n; ++t) {
    rd::for_each_pair_in_slot<D, Causal>(q, places, t, [&](index_t i, const ring_pair& p) {
      rd::forward_pair(x, p, q.data(i), kv.data(i), out.data(i), lse.data(i), sc);
    });
    if constexpr (Dim >= 0)
      if (t + 1 < n) B::template p2p_slot<T, M>(kv, Dim, p2p::ring_action);
  }
  return {std::move(out), std::move(lse)};
}

/// The ring's backward on device backend B: dq (q's shapes), dk and dv (k's), from the
/// output's gradient g, the inputs, the forward's output y and its log-sum-exp.
template <class B, index_t D, bool Causal, int Dim, class M, class T>
std::tuple<device_set<T>, device_set<T>, device_set<T>> ring_backward(
    const device_set<T>& g, const device_set<T>& q, const device_set<T>& k, const device_set<T>& v,
    const device_set<T>& y, const device_set<T>& lse, const std::vector<runtime::ring_detail::place>& places,
    double scale) {
  namespace rd = ring_device;
  const rd::device_steps x;
  device_set<T> kv(q.ranks(), q.held_ranks()), dkv(q.ranks(), q.held_ranks()), dq(q.ranks(), q.held_ranks()),
      delta(q.ranks(), q.held_ranks());
  std::size_t at = 0;
  for (const index_t i : q.held()) {
    const shape_vec& qs = q.shape(i);
    rd::start(kv, k, v, i, places[at++]);
    rd::zero(dkv, i, kv.shape(i));
    rd::zero(dq, i, qs);
    delta.assign(i, rd::shape_of({qs[0] * (qs[2] / D), qs[1]}));
    kernels::ring_delta_rows<T>(delta.data(i), g.data(i), y.data(i), qs[0], qs[1], qs[2], D, x.st);
  }
  const index_t n = places.empty() ? 1 : places[0].n;
  const T sc = static_cast<T>(scale);
  for (index_t t = 0; t < n; ++t) {
    rd::for_each_pair_in_slot<D, Causal>(q, places, t, [&](index_t i, const ring_pair& p) {
      rd::backward_pair(x, p, g.data(i), q.data(i), kv.data(i), lse.data(i), delta.data(i), dq.data(i), dkv.data(i),
                        sc);
    });
    if constexpr (Dim >= 0) {
      if (t + 1 < n) B::template p2p_slot<T, M>(kv, Dim, p2p::ring_action);
      B::template p2p_slot<T, M>(dkv, Dim, p2p::ring_action);  // after the last, each dK/dV is home
    }
  }
  device_set<T> dk(q.ranks(), q.held_ranks()), dv(q.ranks(), q.held_ranks());
  at = 0;
  for (const index_t i : q.held()) {
    const rd::place& pl = places[at++];
    const shape_vec& ks = k.shape(i);
    dk.assign(i, ks);
    dv.assign(i, ks);
    rd::unpack(dk.data(i), dkv.data(i), 0, ks[0], ks[1], pl.k_max, ks[2]);
    rd::unpack(dv.data(i), dkv.data(i), 1, ks[0], ks[1], pl.k_max, ks[2]);
  }
  return {std::move(dq), std::move(dk), std::move(dv)};
}

}  // namespace spmd::cuda
