// tests/cuda/ring_bodies.cpp — the device ring's per-row bodies (backends/cuda/ring_bodies.hpp)
// on the host: each slot's pair of runs computed as the device computes it (the products as
// plain loops standing for cuBLAS, the rows through the bodies over an emulated grid, last
// thread first) against the host ring's forward_block and backward_block on the same blocks.
// The products sum in another order than the host's BLAS, so within 1e-5 (float) and 1e-12
// (double) of the host; the bodies' own arithmetic is the host's, operation by operation.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "spmd/backends/cuda/grid_emulation.hpp"
#include "spmd/backends/cuda/ring_bodies.hpp"
#include "spmd/runtime/ops/ring_attention.hpp"

namespace {

using spmd::index_t;
namespace cu = spmd::cuda;
namespace rd = spmd::runtime::ring_detail;

/// f(i) for i < n by every thread of a 3 x 5 grid (grid-stride), last to first.
template <class F>
void on_grid(index_t n, F&& f) {
  cu::emulate_grid(3, 5, [&](index_t b, index_t t, index_t nb, index_t nt) {
    for (index_t i = b * nt + t; i < n; i += nb * nt) f(i);
  });
}

template <class T>
std::vector<T> values(index_t n, int seed) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) v[static_cast<std::size_t>(i)] = static_cast<T>(((i * 37 + seed * 11) % 101 - 50) * 0.0173);
  return v;
}

/// c (m x n, row stride ldc) = alpha · op(a) op(b) + beta · c, a's rows at stride lda, b's at
/// ldb: what the device's cuBLAS calls compute, in plain loops.
template <class T>
void product(T* c, index_t ldc, const T* a, index_t lda, const T* b, index_t ldb, index_t m, index_t n, index_t k,
             bool at, bool bt, T alpha, T beta) {
  for (index_t i = 0; i < m; ++i)
    for (index_t j = 0; j < n; ++j) {
      T s = 0;
      for (index_t t = 0; t < k; ++t) s += (at ? a[t * lda + i] : a[i * lda + t]) * (bt ? b[j * ldb + t] : b[t * ldb + j]);
      c[i * ldc + j] = alpha * s + (beta == T(0) ? T(0) : beta * c[i * ldc + j]);
    }
}

template <class T>
void close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double g = static_cast<double>(got[i]), w = static_cast<double>(want[i]);
    INFO(what << " element " << i << ": " << g << " vs " << w);
    REQUIRE((g == w || std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w))));
  }
}

/// One slot's pair of runs on both sides: a query block (nb, cq, w) and a padded key block
/// (nb, k_max, w) with heads of d; the runs as given.
template <class T>
void one_pair(bool causal, index_t nb, index_t cq, index_t w, index_t d, index_t k_max, rd::run qr, rd::run kr) {
  const T scale = static_cast<T>(0.37);
  const index_t per = w / d, heads = nb * per;
  const std::vector<T> q = values<T>(nb * cq * w, 1), k = values<T>(nb * k_max * w, 2), v = values<T>(nb * k_max * w, 3),
                       g = values<T>(nb * cq * w, 4);
  const rd::block hb{nb, cq, w, d, k_max, qr.row, qr.len, qr.first, kr.row, kr.len, kr.first};
  cu::ring_pair p;
  p.nb = nb, p.cq = cq, p.w = w, p.d = d, p.k_max = k_max;
  p.q_row = qr.row, p.q_len = qr.len, p.q_first = qr.first, p.k_row = kr.row, p.k_len = kr.len, p.k_first = kr.first;
  p.causal = causal;
  cu::ring_pair_bounds(p);
  CHECK(p.a == hb.first_seeing(0, qr.len, causal));
  const index_t rows = p.rows(), kn = p.kn;
  // A pair whose rows see no key is skipped on the device (ring.hpp's for_each_pair): only the
  // host side runs, and must leave everything as it was.
  const bool any = rows > 0 && kn > 0;

  // The forward, from an output and log-sum-exps some earlier slot left (half the rows unseen).
  std::vector<T> out_h = values<T>(nb * cq * w, 5), lse_h(static_cast<std::size_t>(heads * cq));
  for (index_t i = 0; i < heads * cq; ++i)
    lse_h[static_cast<std::size_t>(i)] = i % 2 ? -std::numeric_limits<T>::infinity() : static_cast<T>(0.1 * (i % 7));
  std::vector<T> out_d = out_h, lse_d = lse_h;
  for (index_t h = 0; h < heads; ++h)
    (causal ? rd::forward_block<true, T> : rd::forward_block<false, T>)(hb, h, out_h.data(), lse_h.data() + h * cq,
                                                                         q.data(), k.data(), v.data(), scale);
  std::vector<T> s(static_cast<std::size_t>(heads * rows * kn));
  if (any) {
    for (index_t h = 0; h < heads; ++h)
      product(s.data() + h * rows * kn, kn, q.data() + p.q_at(h, p.a), w, k.data() + p.k_at(h), w, rows, kn, d, false,
              true, scale, T(0));
    on_grid(heads * rows,
            [&](index_t i) { cu::ring_forward_row(p, s.data(), out_d.data(), lse_d.data(), i / rows, i % rows); });
    for (index_t h = 0; h < heads; ++h)
      product(out_d.data() + p.q_at(h, p.a), w, s.data() + h * rows * kn, kn, v.data() + p.k_at(h), w, rows, d, kn,
              false, false, T(1), T(1));
  }
  close(out_d, out_h, "forward output");
  close(lse_d, lse_h, "forward log-sum-exp");

  // The backward of the same pair, with the forward's log-sum-exps and a delta.
  std::vector<T> delta = values<T>(heads * cq, 6);
  std::vector<T> dq_h = values<T>(nb * cq * w, 7), dk_h = values<T>(nb * k_max * w, 8), dv_h = values<T>(nb * k_max * w, 9);
  std::vector<T> dq_d = dq_h, dk_d = dk_h, dv_d = dv_h;
  for (index_t h = 0; h < heads; ++h)
    (causal ? rd::backward_block<true, T> : rd::backward_block<false, T>)(
        hb, h, dq_h.data(), dk_h.data(), dv_h.data(), g.data(), q.data(), k.data(), v.data(), lse_h.data() + h * cq,
        delta.data() + h * cq, scale);
  std::vector<T> prob(static_cast<std::size_t>(heads * rows * kn)), dp(prob.size());
  for (index_t h = 0; any && h < heads; ++h)
    product(prob.data() + h * rows * kn, kn, q.data() + p.q_at(h, p.a), w, k.data() + p.k_at(h), w, rows, kn, d, false,
            true, scale, T(0));
  on_grid(any ? heads * rows : 0,
          [&](index_t i) { cu::ring_probability_row(p, prob.data(), lse_h.data(), i / rows, i % rows); });
  for (index_t h = 0; any && h < heads; ++h) {
    const T* ph = prob.data() + h * rows * kn;
    product(dv_d.data() + p.k_at(h), w, ph, kn, g.data() + p.q_at(h, p.a), w, kn, d, rows, true, false, T(1), T(1));
    product(dp.data() + h * rows * kn, kn, g.data() + p.q_at(h, p.a), w, v.data() + p.k_at(h), w, rows, kn, d, false, true,
            T(1), T(0));
  }
  on_grid(any ? heads * rows : 0,
          [&](index_t i) { cu::ring_ds_row(p, prob.data(), dp.data(), delta.data(), scale, i / rows, i % rows); });
  for (index_t h = 0; any && h < heads; ++h) {
    const T* dsh = dp.data() + h * rows * kn;
    product(dq_d.data() + p.q_at(h, p.a), w, dsh, kn, k.data() + p.k_at(h), w, rows, d, kn, false, false, T(1), T(1));
    product(dk_d.data() + p.k_at(h), w, dsh, kn, q.data() + p.q_at(h, p.a), w, kn, d, rows, true, false, T(1), T(1));
  }
  close(dq_d, dq_h, "backward dq");
  close(dk_d, dk_h, "backward dk");
  close(dv_d, dv_h, "backward dv");
}

}  // namespace

TEMPLATE_TEST_CASE("the device ring's rows against the host ring's blocks", "[ring]", float, double) {
  // nb 2, 3 query rows per block, width 8 of two heads of 4, keys padded to 4 rows.
  for (const bool causal : {false, true}) {
    // A whole block against a whole one: before, level with and after the queries.
    for (const index_t k_first : {0, 3, 6}) one_pair<TestType>(causal, 2, 3, 8, 4, 4, {0, 3, 3}, {0, 3, k_first});
    // A shorter key run (padding rows after it), and runs that start inside their blocks (head-tail).
    one_pair<TestType>(causal, 2, 3, 8, 4, 4, {0, 3, 5}, {0, 2, 4});
    one_pair<TestType>(causal, 2, 4, 8, 4, 4, {2, 2, 9}, {2, 2, 8});
    one_pair<TestType>(causal, 1, 4, 8, 8, 4, {0, 2, 0}, {2, 2, 1});
    // No key (a rank without positions) and no query.
    one_pair<TestType>(causal, 2, 3, 8, 4, 4, {0, 3, 3}, {0, 0, 0});
    one_pair<TestType>(causal, 2, 3, 8, 4, 4, {0, 0, 0}, {0, 3, 0});
  }
}

TEMPLATE_TEST_CASE("the device ring's delta rows against the host's loop", "[ring]", float, double) {
  const index_t nb = 2, cq = 5, w = 12, d = 4, per = w / d;
  const std::vector<TestType> g = values<TestType>(nb * cq * w, 1), y = values<TestType>(nb * cq * w, 2);
  std::vector<TestType> got(static_cast<std::size_t>(nb * per * cq)), want(got.size());
  on_grid(nb * per * cq, [&](index_t i) { cu::ring_delta_row(got.data(), g.data(), y.data(), cq, w, d, i / cq, i % cq); });
  for (index_t h = 0; h < nb * per; ++h)
    for (index_t r = 0; r < cq; ++r) {
      const index_t at = (h / per) * cq * w + r * w + (h % per) * d;
      TestType s = 0;
      for (index_t e = 0; e < d; ++e) s += g[static_cast<std::size_t>(at + e)] * y[static_cast<std::size_t>(at + e)];
      want[static_cast<std::size_t>(h * cq + r)] = s;
    }
  CHECK(got == want);
}
