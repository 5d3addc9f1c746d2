// spmd/runtime/ops/matmul.hpp — matrix products on dtensors: matmul, matmul_t, t_matmul, bmm,
// linear.
//
//   auto y = spmd::sim::matmul(x, w);       // x S(0) @ w R -> S(0); x S(1) @ w S(0) -> P(sum)
//   auto z = spmd::sim::linear(x, W, b);    // x · Wᵀ + b (W is (out, in), as torch.nn.Linear)
//   auto r = spmd::sim::matmul<spmd::placements<spmd::replicate>>(x, w);   // forced output
//
// The placements of the result are chosen by the compiler (spmd/ops/propagate.hpp) and are
// part of its type. Locally every rank runs one gemm (gemm.hpp: BLAS for float and double).
#pragma once

#include "spmd/ops/matmul.hpp"
#include "spmd/runtime/ops/apply.hpp"
#include "spmd/runtime/ops/gemm.hpp"

namespace spmd::runtime {

namespace detail {
/// The product of a local block's leading dims [0, n): the rows of one gemm over a contiguous
/// batch of matrices.
template <class V>
index_t leading_elems(const V& v, int n) {
  index_t p = 1;
  for (int d = 0; d < n; ++d) p *= v.extent(d);
  return p;
}
/// Two static extents that must agree (a dynamic one is checked at run time).
template <class EA, std::size_t DA, class EB, std::size_t DB>
constexpr bool extents_agree() {
  constexpr index_t a = EA::static_extent(DA), b = EB::static_extent(DB);
  return a == dyn || b == dyn || a == b;
}
/// What the four products' kernels share: a BLAS product spreads over the cores itself, and
/// gemm_one_thread keeps it on one (apply.hpp: threaded kernels).
struct gemm_kernel {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static constexpr bool threads_itself = gemm_threads_itself<T>;
  using one_thread = gemm_one_thread;
};
}  // namespace detail

template <>
struct op_kernel<ops::matmul> : detail::gemm_kernel {
  template <class T>
  static void run(const ops::matmul&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> a, strided_view<const T> b) {
    const int r = static_cast<int>(a.extents().size());  // 2, or 3: (b, m) are the rows
    detail::gemm(out.data(), a.data(), b.data(), detail::leading_elems(a, r - 1), b.extent(1), a.extent(r - 1),
                 false, false);
  }
};
template <>
struct op_kernel<ops::matmul_t> : detail::gemm_kernel {
  template <class T>
  static void run(const ops::matmul_t&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> a, strided_view<const T> b) {
    const int r = static_cast<int>(a.extents().size());  // 2, or 3: (b, m) are the rows
    detail::gemm(out.data(), a.data(), b.data(), detail::leading_elems(a, r - 1), b.extent(0), a.extent(r - 1),
                 false, true);
  }
};
template <>
struct op_kernel<ops::t_matmul> : detail::gemm_kernel {
  template <class T>
  static void run(const ops::t_matmul&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> a, strided_view<const T> b) {
    const int r = static_cast<int>(a.extents().size());  // 2, or 3: (b, k) are contracted
    detail::gemm(out.data(), a.data(), b.data(), a.extent(r - 1), b.extent(r - 1), detail::leading_elems(a, r - 1),
                 true, false);
  }
};

template <>
struct op_kernel<ops::bmm> : detail::gemm_kernel {
  template <class T>
  static void run(const ops::bmm&, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> a, strided_view<const T> b) {
    // The leading (batch) dims of a contiguous block are one batch.
    const int r = static_cast<int>(a.extents().size());
    const index_t m = a.extent(r - 2), k = a.extent(r - 1), n = b.extent(r - 1);
    index_t nb = 1;
    for (int d = 0; d + 2 < r; ++d) nb *= a.extent(d);
    for (index_t i = 0; i < nb; ++i)
      detail::gemm(out.data() + i * m * n, a.data() + i * m * k, b.data() + i * k * n, m, n, k,
                   false, false);
  }
};

/// x (m, k) @ w (k, n).
template <class Forced = void, element T, class LX, class LW, class Bk>
auto matmul(const dtensor<T, LX, Bk>& x, const dtensor<T, LW, Bk>& w) {
  static_assert((LX::rank == 2 || LX::rank == 3) && LW::rank == 2,
                "spmd::matmul: x must be a matrix or a batch of them (b, m, k) and w a matrix (use bmm "
                "for a batch of both).");
  static_assert(detail::extents_agree<typename LX::extents_type, LX::rank - 1, typename LW::extents_type, 0>(),
                "spmd::matmul: the inner dims differ (x's last dim and w's dim 0).");
  return apply<Forced>(ops::matmul{}, x, w);
}

/// x (m, k) @ w (n, k)ᵀ, without transposing w.
template <class Forced = void, element T, class LX, class LW, class Bk>
auto matmul_t(const dtensor<T, LX, Bk>& x, const dtensor<T, LW, Bk>& w) {
  static_assert((LX::rank == 2 || LX::rank == 3) && LW::rank == 2,
                "spmd::matmul_t: x must be a matrix or a batch of them (b, m, k) and w a matrix.");
  static_assert(detail::extents_agree<typename LX::extents_type, LX::rank - 1, typename LW::extents_type, 1>(),
                "spmd::matmul_t: the inner dims differ (x's last dim and w's dim 1).");
  return apply<Forced>(ops::matmul_t{}, x, w);
}

/// x (k, m)ᵀ @ w (k, n), without transposing x: a weight's gradient (gᵀ · x) reads the
/// gradient and the input where they lie.
template <class Forced = void, element T, class LX, class LW, class Bk>
auto t_matmul(const dtensor<T, LX, Bk>& x, const dtensor<T, LW, Bk>& w) {
  static_assert((LX::rank == 2 || LX::rank == 3) && LW::rank == LX::rank,
                "spmd::t_matmul: both operands must be matrices, or both batches of them (b, k, m).");
  static_assert(detail::extents_agree<typename LX::extents_type, 0, typename LW::extents_type, 0>() &&
                    detail::extents_agree<typename LX::extents_type, LX::rank - 2, typename LW::extents_type,
                                          LW::rank - 2>(),
                "spmd::t_matmul: the contracted dims differ (all but the last of x and w).");
  return apply<Forced>(ops::t_matmul{}, x, w);
}

/// x (b, m, k) @ w (b, k, n), or with two batch dims: x (a, b, m, k) @ w (a, b, k, n).
template <class Forced = void, element T, class LX, class LW, class Bk>
auto bmm(const dtensor<T, LX, Bk>& x, const dtensor<T, LW, Bk>& w) {
  static_assert((LX::rank == 3 || LX::rank == 4) && LW::rank == LX::rank,
                "spmd::bmm: both operands must be 3-d (batch, m, k) or both 4-d (batch, batch, m, k).");
  constexpr int r = static_cast<int>(LX::rank);
  static_assert(detail::extents_agree<typename LX::extents_type, 0, typename LW::extents_type, 0>() &&
                    detail::extents_agree<typename LX::extents_type, r - 3, typename LW::extents_type, r - 3>(),
                "spmd::bmm: the batch dims differ.");
  static_assert(detail::extents_agree<typename LX::extents_type, r - 1, typename LW::extents_type, r - 2>(),
                "spmd::bmm: the inner dims differ (x's last dim and w's second to last).");
  return apply<Forced>(ops::bmm{}, x, w);
}

}  // namespace spmd::runtime
