// spmd/backends/cuda/ring_bodies.hpp — what one device thread does for one row of context
// parallelism's ring (runtime/ops/ring_attention.hpp) in a slot: the forward's softmax of a
// block's scores merged into the output by the log-sum-exp, the backward's probabilities and
// dS, and the backward's delta = rowsum(dO ∘ out).
//
// The products around them (S = scale q kᵀ, out += P v, dV += Pᵀ dO, dP = dO vᵀ, dq += dS k,
// dK += dSᵀ q) are cuBLAS's, over the rows that see a key: `ring_pair` says which. Host-and-
// device functions over plain geometry, no exceptions, no allocation: kernels/ring.cu calls
// them from every thread, and tests/cuda/ring_bodies.cpp runs them through the grid emulation
// against the host's forward_block and backward_block (the same operations; the products'
// sums in another order, so within a tolerance).
#pragma once

#include <cmath>
#include <limits>

#include "spmd/core/config.hpp"

namespace spmd::cuda {

/// One run of a rank's queries against one run of the key block it holds in a slot (the
/// host's ring_detail::block): q is (nb, cq, w) with heads of d in each row of w; the key
/// block (nb, k_max, w) padded; the runs start at local rows q_row, k_row and global positions
/// q_first, k_first. Of the run's rows, those from `a` on see a key; each sees at most `kn`.
/// The scores of head h are rows × kn at s + h · rows · kn (rows = q_len − a).
struct ring_pair {
  index_t nb = 0, cq = 0, w = 0, d = 0, k_max = 0;
  index_t q_row = 0, q_len = 0, q_first = 0, k_row = 0, k_len = 0, k_first = 0;
  bool causal = false;
  index_t a = 0, kn = 0;

  SPMD_HD index_t per() const { return w / d; }
  SPMD_HD index_t heads() const { return nb * per(); }
  SPMD_HD index_t rows() const { return q_len - a; }
  /// Head h's element of query row `row` of the run (row 0: q_row).
  SPMD_HD index_t q_at(index_t h, index_t row) const {
    return (h / per()) * cq * w + (q_row + row) * w + (h % per()) * d;
  }
  /// Head h's first key row of the run.
  SPMD_HD index_t k_at(index_t h) const { return (h / per()) * k_max * w + k_row * w + (h % per()) * d; }
  /// The keys query row `row` of the run sees.
  SPMD_HD index_t seen(index_t row) const {
    if (!causal) return k_len;
    const index_t s = q_first + row - k_first + 1;
    return s < 0 ? 0 : (s > k_len ? k_len : s);
  }
};

/// The pair's rows that see a key (from a) and the most keys a row sees, set from the runs.
inline void ring_pair_bounds(ring_pair& p) {
  if (p.k_len == 0 || p.q_len == 0) {
    p.a = p.q_len;
    p.kn = 0;
    return;
  }
  if (!p.causal) {
    p.a = 0;
  } else {
    const index_t first = p.k_first - p.q_first;
    p.a = first < 0 ? 0 : (first > p.q_len ? p.q_len : first);
  }
  p.kn = p.a < p.q_len ? p.seen(p.q_len - 1) : 0;
}

/// The forward's row r (from a) of head h: the scores row s (kn, scaled) becomes
/// e^(s − merged) over the keys it sees and 0 beyond; the output row (d at out + q_at) is
/// scaled by e^(lse − merged) and the row's log-sum-exp (lse_h[q_row + a + r], lse_h the
/// head's cq values) becomes merged = log(e^lse + Σ e^s). The product P v added afterwards
/// completes the merge.
template <class T>
SPMD_HD void ring_forward_row(const ring_pair& p, T* s, T* out, T* lse, index_t h, index_t r) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  T* row = s + (h * p.rows() + r) * p.kn;
  const index_t n = p.seen(p.a + r);
  T m = ninf;
  for (index_t j = 0; j < n; ++j) m = std::fmax(m, row[j]);
  T sum = 0;
  for (index_t j = 0; j < n; ++j) {
    row[j] = std::exp(row[j] - m);
    sum += row[j];
  }
  for (index_t j = n; j < p.kn; ++j) row[j] = T(0);
  const T here = m + std::log(sum);
  T& l = lse[h * p.cq + p.q_row + p.a + r];
  const T merged = l == ninf ? here : std::fmax(l, here) + std::log1p(std::exp(-std::fabs(l - here)));
  const T keep = l == ninf ? T(0) : std::exp(l - merged), take = std::exp(m - merged);
  T* o = out + p.q_at(h, p.a + r);
  for (index_t e = 0; e < p.d; ++e) o[e] *= keep;
  for (index_t j = 0; j < n; ++j) row[j] *= take;
  l = merged;
}

/// The backward's row r (from a) of head h, in two stages around the product dP = dO vᵀ:
/// ring_probability_row turns the scaled scores into P = e^(s − lse) over the keys the row
/// sees (0 beyond); ring_ds_row turns dP into dS = P ∘ (dP − delta) · scale.
template <class T>
SPMD_HD void ring_probability_row(const ring_pair& p, T* s, const T* lse, index_t h, index_t r) {
  T* row = s + (h * p.rows() + r) * p.kn;
  const index_t n = p.seen(p.a + r);
  const T l = lse[h * p.cq + p.q_row + p.a + r];
  for (index_t j = 0; j < n; ++j) row[j] = std::exp(row[j] - l);
  for (index_t j = n; j < p.kn; ++j) row[j] = T(0);
}
template <class T>
SPMD_HD void ring_ds_row(const ring_pair& p, const T* prob, T* dp, const T* delta, T scale, index_t h, index_t r) {
  const index_t at = (h * p.rows() + r) * p.kn;
  const T dl = delta[h * p.cq + p.q_row + p.a + r];
  for (index_t j = 0; j < p.kn; ++j) dp[at + j] = prob[at + j] * (dp[at + j] - dl) * scale;
}

/// delta's row `row` of head h (q's block (nb, cq, w), heads of d): Σ_e g · y over the head's
/// d elements, in order (the host's loop).
template <class T>
SPMD_HD void ring_delta_row(T* delta, const T* g, const T* y, index_t cq, index_t w, index_t d, index_t h,
                            index_t row) {
  const index_t per = w / d;
  const index_t at = (h / per) * cq * w + row * w + (h % per) * d;
  T s = 0;
  for (index_t e = 0; e < d; ++e) s += g[at + e] * y[at + e];
  delta[h * cq + row] = s;
}

}  // namespace spmd::cuda
