// tests/cuda/ring_bodies.cpp — the device ring's pairs (backends/cuda/ring_pairs.hpp) on the
// host: each slot's pair of runs through the very steps the device takes (the same products'
// arguments, the same row bodies, the same scratch and order), the products computed as cuBLAS
// defines a column-major batched gemm of the arguments kernels::gemm_batched passes it
// (gemm_heads.hpp: column_major_of), the rows over an emulated grid, last thread first;
// against the host ring's forward_block and backward_block on the same blocks. The products
// sum in another order than the host's BLAS, so within 1e-5 (float) and 1e-12 (double) of the
// host; the bodies' own arithmetic is the host's, operation by operation. What runs only on a
// GPU: cuBLAS itself and the kernel writing its pointer arrays.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "spmd/backends/cuda/grid_emulation.hpp"
#include "spmd/backends/cuda/ring_bodies.hpp"
#include "spmd/backends/cuda/ring_pairs.hpp"
#include "spmd/runtime/ops/ring_attention.hpp"
#include "column_major_gemm.hpp"

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

/// The steps of ring_pairs.hpp on the host: scratch in vectors, each product over the heads
/// as the batched call (first operand b, second a: gemm_batched's order), rows on the grid.
struct host_steps {
  template <class T>
  std::vector<T> scratch(index_t n) const {
    return std::vector<T>(static_cast<std::size_t>(n), std::numeric_limits<T>::quiet_NaN());
  }
  template <class T>
  void product(const cu::kernels::gemm_heads_args<T>& g) const {
    if (g.m == 0 || g.n == 0 || g.heads == 0) return;
    for (index_t h = 0; h < g.heads; ++h)
      spmd::test::column_major_gemm(g.column_major(), g.alpha, g.b + g.b_at.of(h), g.a + g.a_at.of(h), g.beta,
                                    g.c + g.c_at.of(h));
  }
  template <class T>
  void forward_rows(const cu::ring_pair& p, T* s, T* out, T* lse) const {
    on_grid(p.heads() * p.rows(), [&](index_t i) { cu::ring_forward_row(p, s, out, lse, i / p.rows(), i % p.rows()); });
  }
  template <class T>
  void probability_rows(const cu::ring_pair& p, T* s, const T* lse) const {
    on_grid(p.heads() * p.rows(), [&](index_t i) { cu::ring_probability_row(p, s, lse, i / p.rows(), i % p.rows()); });
  }
  template <class T>
  void ds_rows(const cu::ring_pair& p, const T* prob, T* dp, const T* delta, T scale) const {
    on_grid(p.heads() * p.rows(),
            [&](index_t i) { cu::ring_ds_row(p, prob, dp, delta, scale, i / p.rows(), i % p.rows()); });
  }
};

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
/// (2, nb, k_max, w: K then V) with heads of d; the runs as given.
template <class T>
void one_pair(bool causal, index_t nb, index_t cq, index_t w, index_t d, index_t k_max, rd::run qr, rd::run kr) {
  const T scale = static_cast<T>(0.37);
  const index_t heads = nb * (w / d), half = nb * k_max * w;
  const std::vector<T> q = values<T>(nb * cq * w, 1), kv = values<T>(2 * half, 2), g = values<T>(nb * cq * w, 4);
  const T* k = kv.data();
  const T* v = kv.data() + half;
  const rd::block hb{nb, cq, w, d, k_max, qr.row, qr.len, qr.first, kr.row, kr.len, kr.first};
  const cu::ring_pair p = cu::ring_device::pair_of(rd::shape_of({nb, cq, w}), d, k_max, qr, kr, causal);
  CHECK(p.a == hb.first_seeing(0, qr.len, causal));
  // A pair whose rows see no key is skipped on the device (ring_pairs.hpp's for_each_pair):
  // only the host side runs, and must leave everything as it was.
  const bool any = p.rows() > 0 && p.kn > 0;
  host_steps x;

  // The forward, from an output and log-sum-exps some earlier slot left (half the rows unseen).
  std::vector<T> out_h = values<T>(nb * cq * w, 5), lse_h(static_cast<std::size_t>(heads * cq));
  for (index_t i = 0; i < heads * cq; ++i)
    lse_h[static_cast<std::size_t>(i)] = i % 2 ? -std::numeric_limits<T>::infinity() : static_cast<T>(0.1 * (i % 7));
  std::vector<T> out_d = out_h, lse_d = lse_h;
  for (index_t h = 0; h < heads; ++h)
    (causal ? rd::forward_block<true, T> : rd::forward_block<false, T>)(hb, h, out_h.data(), lse_h.data() + h * cq,
                                                                         q.data(), k, v, scale);
  if (any) cu::ring_device::forward_pair(x, p, q.data(), kv.data(), out_d.data(), lse_d.data(), scale);
  close(out_d, out_h, "forward output");
  close(lse_d, lse_h, "forward log-sum-exp");

  // The backward of the same pair, with the forward's log-sum-exps and a delta.
  const std::vector<T> delta = values<T>(heads * cq, 6);
  std::vector<T> dq_h = values<T>(nb * cq * w, 7), dkv_h = values<T>(2 * half, 8);
  std::vector<T> dq_d = dq_h, dkv_d = dkv_h;
  for (index_t h = 0; h < heads; ++h)
    (causal ? rd::backward_block<true, T> : rd::backward_block<false, T>)(
        hb, h, dq_h.data(), dkv_h.data(), dkv_h.data() + half, g.data(), q.data(), k, v, lse_h.data() + h * cq,
        delta.data() + h * cq, scale);
  if (any)
    cu::ring_device::backward_pair(x, p, g.data(), q.data(), kv.data(), lse_h.data(), delta.data(), dq_d.data(),
                                   dkv_d.data(), scale);
  close(dq_d, dq_h, "backward dq");
  close(dkv_d, dkv_h, "backward dk and dv");
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
