// spmd/backends/cuda/ring_pairs.hpp — one pair of runs of context parallelism's ring as the
// device backends compute it, step by step: which products (gemm_heads.hpp: operands, heads,
// strides, transposes) and which row launches (ring_bodies.hpp), in which order, on which
// scratch. Plain C++ over an executor X, so that the same steps run on a GPU (ring.hpp's
// device_steps: cuBLAS and kernels) and on the host (tests/cuda/ring_bodies.cpp: a column-major
// product as cuBLAS defines it, and the rows over an emulated grid), where they are checked
// against the host ring's blocks. X provides:
//
//   x.template scratch<T>(n)         n elements, owned (.data())
//   x.product(gemm_heads_args<T>)    the products over the pair's heads
//   x.forward_rows(p, s, out, lse)   ring_forward_row for every (head, row)
//   x.probability_rows(p, s, lse)    ring_probability_row, likewise
//   x.ds_rows(p, prob, dp, delta, scale)
//
// A rank's padded key block kv is (2, nb, k_max, w): K, then V (and dK, then dV, in dkv).
#pragma once

#include "spmd/backends/cuda/gemm_heads.hpp"
#include "spmd/backends/cuda/ring_bodies.hpp"
#include "spmd/runtime/ops/ring_places.hpp"

namespace spmd::cuda::ring_device {

using runtime::ring_detail::place;
using runtime::ring_detail::run;
using runtime::ring_detail::shape_of;
using kernels::gemm_heads_args;
using kernels::head_offsets;

/// A query run against a key run of a padded block (q's block shape qs, heads of d).
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
  const auto& keys = pl.k[static_cast<std::size_t>(j)];
  for (int a = 0; a < pl.q.count; ++a)
    for (int b = 0; b < keys.count; ++b) {
      const ring_pair p = pair_of(qs, d, pl.k_max, pl.q.at[a], keys.at[b], causal);
      if (p.rows() > 0 && p.kn > 0) f(p);
    }
}

// The operands' heads: q's rows (and dq's, g's, out's) of cq per batch, a padded block's of
// k_max, and a scores block's heads one after another.
inline head_offsets q_heads(const ring_pair& p) { return {p.per(), p.cq * p.w, p.d}; }
inline head_offsets k_heads(const ring_pair& p) { return {p.per(), p.k_max * p.w, p.d}; }
inline head_offsets s_heads(const ring_pair& p) { return {1, p.rows() * p.kn, 0}; }

/// One operand of a product over the pair's heads: its first head's element, where the other
/// heads start, its rows' stride, and whether the product reads it transposed.
template <class T>
struct operand {
  T* at;
  head_offsets heads;
  index_t ld;
  bool transposed = false;
};
/// c = alpha · op(a) op(b) + beta · c over the pair's heads, op(a) m x k.
template <class T>
gemm_heads_args<T> product(const ring_pair& p, operand<T> c, operand<const T> a, operand<const T> b, index_t m,
                           index_t n, index_t k, T alpha, T beta) {
  gemm_heads_args<T> g;
  g.c = c.at, g.a = a.at, g.b = b.at;
  g.c_at = c.heads, g.a_at = a.heads, g.b_at = b.heads;
  g.ldc = c.ld, g.lda = a.ld, g.ldb = b.ld, g.m = m, g.n = n, g.k = k, g.heads = p.heads();
  g.a_transposed = a.transposed, g.b_transposed = b.transposed;
  g.alpha = alpha, g.beta = beta;
  return g;
}

// The operands, at the pair's first row that sees a key (q-like) or its first key (k-like).
template <class T>
operand<T> q_rows(const ring_pair& p, T* x, bool transposed = false) {
  return {x + (p.q_row + p.a) * p.w, q_heads(p), p.w, transposed};
}
template <class T>
operand<T> k_rows(const ring_pair& p, T* x, bool transposed = false) {
  return {x + p.k_row * p.w, k_heads(p), p.w, transposed};
}
template <class T>
operand<T> s_block(const ring_pair& p, T* s, bool transposed = false) {
  return {s, s_heads(p), p.kn, transposed};
}
/// V's (or dV's) block after K's in a padded kv.
template <class T>
T* second_half(const ring_pair& p, T* kv) {
  return kv + p.nb * p.k_max * p.w;
}

/// The forward of one pair: S = scale · q kᵀ, the rows' softmax merged into out and lse by
/// the log-sum-exp, then out += P v (the merge's second half).
template <class T, class X>
void forward_pair(X& x, const ring_pair& p, const T* q, const T* kv, T* out, T* lse, T scale) {
  const index_t rows = p.rows(), kn = p.kn, d = p.d;
  auto s = x.template scratch<T>(p.heads() * rows * kn);
  x.product(product<T>(p, s_block(p, s.data()), q_rows(p, q), k_rows(p, kv, true), rows, kn, d, scale, T(0)));
  x.forward_rows(p, s.data(), out, lse);
  x.product(product<T>(p, q_rows(p, out), s_block<const T>(p, s.data()), k_rows(p, second_half(p, kv)), rows, d, kn,
                       T(1), T(1)));
}

/// The backward of one pair: P from the scores and lse; dV += Pᵀ g; dP = g vᵀ;
/// dS = P ∘ (dP − delta) · scale; dq += dS k; dK += dSᵀ q.
template <class T, class X>
void backward_pair(X& x, const ring_pair& p, const T* g, const T* q, const T* kv, const T* lse, const T* delta,
                   T* dq, T* dkv, T scale) {
  const index_t rows = p.rows(), kn = p.kn, d = p.d;
  auto prob = x.template scratch<T>(p.heads() * rows * kn);
  auto dp = x.template scratch<T>(p.heads() * rows * kn);
  x.product(product<T>(p, s_block(p, prob.data()), q_rows(p, q), k_rows(p, kv, true), rows, kn, d, scale, T(0)));
  x.probability_rows(p, prob.data(), lse);
  const T* pr = prob.data();
  x.product(product<T>(p, k_rows(p, second_half(p, dkv)), s_block(p, pr, true), q_rows(p, g), kn, d, rows, T(1), T(1)));
  x.product(product<T>(p, s_block(p, dp.data()), q_rows(p, g), k_rows(p, second_half(p, kv), true), rows, kn, d, T(1),
                       T(0)));
  x.ds_rows(p, pr, dp.data(), delta, scale);
  const T* ds = dp.data();
  x.product(product<T>(p, q_rows(p, dq), s_block(p, ds), k_rows(p, kv), rows, d, kn, T(1), T(1)));
  x.product(product<T>(p, k_rows(p, dkv), s_block(p, ds, true), q_rows(p, q), kn, d, rows, T(1), T(1)));
}

}  // namespace spmd::cuda::ring_device
