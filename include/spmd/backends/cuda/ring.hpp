// spmd/backends/cuda/ring.hpp — context parallelism's ring (runtime/ops/ring_attention.hpp) on
// the device backends: the same slots, places and merges as the host ring, each pair of runs
// computed by cuBLAS products over its heads and a thread per row (ring_bodies.hpp), and the
// blocks passed on by the backend's p2p_slot (CUDA: the buffers change hands on the one GPU;
// NCCL: ncclSend and ncclRecv).
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
#include "spmd/plan/p2p_schedule.hpp"
#include "spmd/runtime/ops/ring_places.hpp"

namespace spmd::cuda {

namespace ring_device {

using runtime::ring_detail::place;
using runtime::ring_detail::run;

/// K and V of a rank's block ((nb, len, w) each) into kv, padded to (2, nb, k_max, w).
template <class T>
void pack(T* kv, const T* k, const T* v, index_t nb, index_t len, index_t k_max, index_t w) {
  const cudaStream_t st = current_stream();
  if (nb * k_max * w == 0) return;
  check(cudaMemsetAsync(kv, 0, static_cast<std::size_t>(2 * nb * k_max * w) * sizeof(T), st), "cudaMemsetAsync (ring)");
  if (len == 0) return;
  const std::size_t row = static_cast<std::size_t>(len * w) * sizeof(T);
  for (int part = 0; part < 2; ++part)
    check(cudaMemcpy2DAsync(kv + part * nb * k_max * w, static_cast<std::size_t>(k_max * w) * sizeof(T),
                            part == 0 ? k : v, row, row, static_cast<std::size_t>(nb), cudaMemcpyDeviceToDevice, st),
          "cudaMemcpy2DAsync (ring)");
}
/// Part `part` (0: K, 1: V) of a padded block back to (nb, len, w).
template <class T>
void unpack(T* out, const T* kv, int part, index_t nb, index_t len, index_t k_max, index_t w) {
  if (nb * len * w == 0) return;
  const std::size_t row = static_cast<std::size_t>(len * w) * sizeof(T);
  check(cudaMemcpy2DAsync(out, row, kv + part * nb * k_max * w, static_cast<std::size_t>(k_max * w) * sizeof(T), row,
                          static_cast<std::size_t>(nb), cudaMemcpyDeviceToDevice, current_stream()),
        "cudaMemcpy2DAsync (ring)");
}

/// A query run against a key run of a padded block, for the kernels (q's block shape qs).
inline ring_pair pair_of(const shape_vec& qs, index_t d, index_t k_max, const run& qr, const run& kr, bool causal) {
  ring_pair p;
  p.nb = qs[0], p.cq = qs[1], p.w = qs[2], p.d = d, p.k_max = k_max;
  p.q_row = qr.row, p.q_len = qr.len, p.q_first = qr.first;
  p.k_row = kr.row, p.k_len = kr.len, p.k_first = kr.first;
  p.causal = causal;
  ring_pair_bounds(p);
  return p;
}

/// f(pair) for each pair of a query run of the rank and a key run of block j with a row
/// that sees a key.
template <class F>
void for_each_pair(const place& pl, index_t j, const shape_vec& qs, index_t d, bool causal, F&& f) {
  for (int a = 0; a < pl.q.count; ++a)
    for (int b = 0; b < pl.k[static_cast<std::size_t>(j)].count; ++b) {
      const ring_pair p = pair_of(qs, d, pl.k_max, pl.q.at[a], pl.k[static_cast<std::size_t>(j)].at[b], causal);
      if (p.rows() > 0 && p.kn > 0) f(p);
    }
}

// The operands' heads (kernels::head_offsets): q's rows (and dq's, g's, out's) of cq per batch,
// a padded block's of k_max, and a scores block's heads one after another.
inline kernels::head_offsets q_heads(const ring_pair& p) { return {p.per(), p.cq * p.w, p.d}; }
inline kernels::head_offsets k_heads(const ring_pair& p) { return {p.per(), p.k_max * p.w, p.d}; }
inline kernels::head_offsets s_heads(const ring_pair& p) { return {1, p.rows() * p.kn, 0}; }

/// c = alpha · op(a) op(b) + beta · c over the pair's heads.
template <class T>
void product(T* c, kernels::head_offsets c_at, index_t ldc, const T* a, kernels::head_offsets a_at, index_t lda,
             bool at, const T* b, kernels::head_offsets b_at, index_t ldb, bool bt, index_t m, index_t n, index_t k,
             index_t heads, T alpha, T beta) {
  kernels::gemm_heads_args<T> g;
  g.c = c, g.a = a, g.b = b;
  g.c_at = c_at, g.a_at = a_at, g.b_at = b_at;
  g.ldc = ldc, g.lda = lda, g.ldb = ldb, g.m = m, g.n = n, g.k = k, g.heads = heads;
  g.a_transposed = at, g.b_transposed = bt;
  g.alpha = alpha, g.beta = beta;
  kernels::gemm_heads<T>(g, current_stream());
}

/// S = scale · q kᵀ over the pair's rows that see a key (into s, heads x rows x kn).
template <class T>
void scores(T* s, const ring_pair& p, const T* q, const T* kd, T scale) {
  product(s, s_heads(p), p.kn, q + (p.q_row + p.a) * p.w, q_heads(p), p.w, false, kd + p.k_row * p.w, k_heads(p), p.w,
          true, p.rows(), p.kn, p.d, p.heads(), scale, T(0));
}

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
  const cudaStream_t st = current_stream();
  device_set<T> kv(q.ranks(), q.held_ranks()), out(q.ranks(), q.held_ranks()), lse(q.ranks(), q.held_ranks());
  std::size_t at = 0;
  for (const index_t i : q.held()) {
    const rd::place& pl = places[at++];
    const shape_vec& qs = q.shape(i);
    const shape_vec& ks = k.shape(i);
    shape_vec kvs{};
    for (const index_t e : {index_t{2}, ks[0], pl.k_max, ks[2]}) kvs.push_back(e);
    kv.assign(i, kvs);
    rd::pack(kv.data(i), k.data(i), v.data(i), ks[0], ks[1], pl.k_max, ks[2]);
    out.assign(i, qs);
    if (out.size(i) > 0) check(cudaMemsetAsync(out.data(i), 0, static_cast<std::size_t>(out.size(i)) * sizeof(T), st), "cudaMemsetAsync (ring)");
    shape_vec ls{};
    for (const index_t e : {qs[0] * (qs[2] / D), qs[1]}) ls.push_back(e);
    lse.assign(i, ls);
    kernels::ring_fill<T>(lse.data(i), lse.size(i), -std::numeric_limits<T>::infinity(), st);
  }
  const index_t n = places.empty() ? 1 : places[0].n;
  const T sc = static_cast<T>(scale);
  for (index_t t = 0; t < n; ++t) {
    at = 0;
    for (const index_t i : q.held()) {
      const rd::place& pl = places[at++];
      if (out.size(i) == 0) continue;
      const T* kd = kv.data(i);
      rd::for_each_pair(pl, (pl.pos - t + n) % n, q.shape(i), D, Causal, [&](const ring_pair& p) {
        const T* vd = kd + p.nb * p.k_max * p.w;
        device_buffer<T> s(p.heads() * p.rows() * p.kn);
        rd::scores(s.data(), p, q.data(i), kd, sc);
        kernels::ring_forward_rows<T>(p, s.data(), out.data(i), lse.data(i), st);
        // out += P v: the merge's second half
        rd::product(out.data(i) + (p.q_row + p.a) * p.w, rd::q_heads(p), p.w, s.data(), rd::s_heads(p), p.kn, false,
                    vd + p.k_row * p.w, rd::k_heads(p), p.w, false, p.rows(), p.d, p.kn, p.heads(), T(1), T(1));
      });
    }
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
  const cudaStream_t st = current_stream();
  device_set<T> kv(q.ranks(), q.held_ranks()), dkv(q.ranks(), q.held_ranks()), dq(q.ranks(), q.held_ranks()),
      delta(q.ranks(), q.held_ranks());
  std::size_t at = 0;
  for (const index_t i : q.held()) {
    const rd::place& pl = places[at++];
    const shape_vec& qs = q.shape(i);
    const shape_vec& ks = k.shape(i);
    shape_vec kvs{};
    for (const index_t e : {index_t{2}, ks[0], pl.k_max, ks[2]}) kvs.push_back(e);
    kv.assign(i, kvs);
    rd::pack(kv.data(i), k.data(i), v.data(i), ks[0], ks[1], pl.k_max, ks[2]);
    dkv.assign(i, kvs);
    dq.assign(i, qs);
    for (device_set<T>* z : {&dkv, &dq})
      if (z->size(i) > 0)
        check(cudaMemsetAsync(z->data(i), 0, static_cast<std::size_t>(z->size(i)) * sizeof(T), st), "cudaMemsetAsync (ring)");
    shape_vec ds{};
    for (const index_t e : {qs[0] * (qs[2] / D), qs[1]}) ds.push_back(e);
    delta.assign(i, ds);
    kernels::ring_delta_rows<T>(delta.data(i), g.data(i), y.data(i), qs[0], qs[1], qs[2], D, st);
  }
  const index_t n = places.empty() ? 1 : places[0].n;
  const T sc = static_cast<T>(scale);
  for (index_t t = 0; t < n; ++t) {
    at = 0;
    for (const index_t i : q.held()) {
      const rd::place& pl = places[at++];
      if (dq.size(i) == 0) continue;
      const T* kd = kv.data(i);
      T* dk = dkv.data(i);
      rd::for_each_pair(pl, (pl.pos - t + n) % n, q.shape(i), D, Causal, [&](const ring_pair& p) {
        const T* vd = kd + p.nb * p.k_max * p.w;
        T* dv = dk + p.nb * p.k_max * p.w;
        const index_t rows = p.rows(), kn = p.kn, heads = p.heads(), w = p.w;
        const T* qa = q.data(i) + (p.q_row + p.a) * w;
        const T* ga = g.data(i) + (p.q_row + p.a) * w;
        device_buffer<T> prob(heads * rows * kn), dp(heads * rows * kn);
        rd::scores(prob.data(), p, q.data(i), kd, sc);
        kernels::ring_probability_rows<T>(p, prob.data(), lse.data(i), st);
        // dv += Pᵀ g; dP = g vᵀ; dS = P ∘ (dP − delta) · scale; dq += dS k; dk += dSᵀ q
        rd::product(dv + p.k_row * w, rd::k_heads(p), w, prob.data(), rd::s_heads(p), kn, true, ga, rd::q_heads(p), w,
                    false, kn, p.d, rows, heads, T(1), T(1));
        rd::product(dp.data(), rd::s_heads(p), kn, ga, rd::q_heads(p), w, false, vd + p.k_row * w, rd::k_heads(p), w,
                    true, rows, kn, p.d, heads, T(1), T(0));
        kernels::ring_ds_rows<T>(p, prob.data(), dp.data(), delta.data(i), sc, st);
        rd::product(dq.data(i) + (p.q_row + p.a) * w, rd::q_heads(p), w, dp.data(), rd::s_heads(p), kn, false,
                    kd + p.k_row * w, rd::k_heads(p), w, false, rows, p.d, kn, heads, T(1), T(1));
        rd::product(dk + p.k_row * w, rd::k_heads(p), w, dp.data(), rd::s_heads(p), kn, true, qa, rd::q_heads(p), w,
                    false, kn, p.d, rows, heads, T(1), T(1));
      });
    }
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
