// spmd/runtime/ops/attention.hpp — causal self-attention as one operator on host dtensors, and
// its backward.
//
//   auto y = spmd::runtime::causal_attention<64>(q, k, v, 0.125);   // q, k, v (b, c, heads x 64)
//   auto d = spmd::runtime::causal_attention_backward<64>(g, q, k, v, 0.125);   // (3, b, c, w)
//
// Per (batch, head): S = scale · q kᵀ, P = softmax(S + causal mask), out = P v — the two
// products read the head's columns where they lie in the (b, c, w) blocks (BLAS's leading
// dimensions: no copy of a transposed or split head), the mask and the softmax one pass over
// S (float: host/vector_math.hpp's rows). The backward recomputes S and P per block (a c x c
// scratch, not saved between the passes: the products are cheap next to the memory a saved P
// of every head would take) and writes dq, dk, dv stacked. The rules are ops/attention.hpp's;
// the autograd layer's causal_attention (runtime/autograd/attention.hpp) uses these on host
// backends and composes bmm and softmax on the devices.
#pragma once

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/host/vector_math.hpp"
#include "spmd/ops/attention.hpp"
#include "spmd/runtime/backend.hpp"
#include "spmd/runtime/ops/apply.hpp"
#include "spmd/runtime/ops/gemm.hpp"

namespace spmd::runtime {

namespace attention_detail {

/// The causal softmax of an n x n block (row stride n), in place: float by the vector rows,
/// double by a loop in double.
template <class T>
void causal_softmax(T* s, index_t n) {
  if constexpr (std::is_same_v<T, float>) {
    host::vector_math::causal_softmax_rows(s, n, n);
  } else {
    for (index_t r = 0; r < n; ++r) {
      T* row = s + r * n;
      T m = -std::numeric_limits<T>::infinity();
      for (index_t j = 0; j <= r; ++j) m = std::fmax(m, row[j]);
      T sum = 0;
      for (index_t j = 0; j <= r; ++j) sum += (row[j] = std::exp(row[j] - m));
      for (index_t j = 0; j <= r; ++j) row[j] /= sum;
      for (index_t j = r + 1; j < n; ++j) row[j] = 0;
    }
  }
}

/// dp = scale · p (dp − Σ_row dp p) over an n x n block, in place.
template <class T>
void softmax_backward(const T* p, T* dp, index_t n, T scale) {
  if constexpr (std::is_same_v<T, float>) {
    host::vector_math::softmax_backward_rows(p, dp, n, n, n, scale);
  } else {
    for (index_t r = 0; r < n; ++r) {
      T dot = 0;
      for (index_t j = 0; j < n; ++j) dot += dp[r * n + j] * p[r * n + j];
      for (index_t j = 0; j < n; ++j) dp[r * n + j] = p[r * n + j] * (dp[r * n + j] - dot) * scale;
    }
  }
}

/// Checks a rank's blocks: contiguous, whole heads.
template <index_t D, class... V>
void check_blocks(const char* name, index_t w, const V&... v) {
  if (w % D != 0)
    throw std::invalid_argument(std::string("spmd::") + name + ": a rank's block holds " + std::to_string(w) +
                                " columns of the width, not whole heads of " + std::to_string(D) +
                                " (shard the width by whole heads)");
  if (!(v.is_contiguous() && ...))
    throw std::logic_error(std::string("spmd::") + name + ": a local block is not contiguous");
}

/// The c x c scratch of the calling thread (two of them for the backward).
template <class T>
T* scratch(index_t elems, int which) {
  thread_local std::vector<T> s[2];
  auto& v = s[which];
  if (v.size() < static_cast<std::size_t>(elems)) v.resize(static_cast<std::size_t>(elems));
  return v.data();
}

/// f(i) for each (batch, head) block i < blocks: on the simulation's threads where they are
/// free, each block's products on one thread (not BLAS's threads, which would spin between
/// the small products: gemm.hpp), else one after another.
template <class F>
void for_each_head(index_t blocks, F&& f) {
  if (blocks > 1 && host::threads_free()) {
    const detail::gemm_one_thread one;
    host::parallel_for(blocks, f);
  } else {
    for (index_t i = 0; i < blocks; ++i) f(i);
  }
}

}  // namespace attention_detail

/// Both kernels run BLAS products: like matmul's (matmul.hpp's gemm_kernel), BLAS spreads a
/// product over the cores itself, and apply keeps it on one thread while it runs the ranks at once.
struct attention_kernel {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T>
  static constexpr bool threads_itself = detail::gemm_threads_itself<T>;
  using one_thread = detail::gemm_one_thread;
};

template <index_t D>
struct op_kernel<ops::causal_attention<D>> : attention_kernel {
  template <class T>
  static void run(const ops::causal_attention<D>& op, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> q, strided_view<const T> k, strided_view<const T> v) {
    const index_t nb = q.extent(0), c = q.extent(1), w = q.extent(2);
    attention_detail::check_blocks<D>("causal_attention", w, q, k, v, out);
    if (out.size() == 0) return;
    attention_detail::for_each_head(nb * (w / D), [&](index_t i) {
      const index_t at = (i / (w / D)) * c * w + (i % (w / D)) * D;  // the head's first column in the block
      T* s = attention_detail::scratch<T>(c * c, 0);
      detail::gemm_ld(s, c, q.data() + at, w, k.data() + at, w, c, c, D, false, true, static_cast<T>(op.scale));
      attention_detail::causal_softmax(s, c);
      detail::gemm_ld(out.data() + at, w, s, c, v.data() + at, w, c, D, c, false, false, T(1));
    });
  }
};

template <index_t D>
struct op_kernel<ops::causal_attention_backward<D>> : attention_kernel {
  template <class T>
  static void run(const ops::causal_attention_backward<D>& op, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> g, strided_view<const T> q, strided_view<const T> k, strided_view<const T> v) {
    const index_t nb = q.extent(0), c = q.extent(1), w = q.extent(2), part = nb * c * w;
    attention_detail::check_blocks<D>("causal_attention_backward", w, g, q, k, v, out);
    if (out.size() == 0) return;
    T* dq = out.data();
    T* dk = dq + part;
    T* dv = dk + part;
    const T scale = static_cast<T>(op.scale);
    attention_detail::for_each_head(nb * (w / D), [&](index_t i) {
      const index_t at = (i / (w / D)) * c * w + (i % (w / D)) * D;
      T* p = attention_detail::scratch<T>(c * c, 0);
      T* dp = attention_detail::scratch<T>(c * c, 1);
      detail::gemm_ld(p, c, q.data() + at, w, k.data() + at, w, c, c, D, false, true, scale);  // S, recomputed
      attention_detail::causal_softmax(p, c);                                                 // P
      detail::gemm_ld(dp, c, g.data() + at, w, v.data() + at, w, c, c, D, false, true, T(1));  // dP = g vᵀ
      detail::gemm_ld(dv + at, w, p, c, g.data() + at, w, c, D, c, true, false, T(1));         // dv = Pᵀ g
      attention_detail::softmax_backward(p, dp, c, scale);                                    // dS (scaled)
      detail::gemm_ld(dq + at, w, dp, c, k.data() + at, w, c, D, c, false, false, T(1));       // dq = dS k
      detail::gemm_ld(dk + at, w, dp, c, q.data() + at, w, c, D, c, true, false, T(1));        // dk = dSᵀ q
    });
  }
};

namespace attention_detail {
template <class T, class Bk>
constexpr void check_api() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "spmd::causal_attention: the fused operator computes in float or double; for other element "
                "types use the autograd layer's causal_attention, which composes bmm and softmax.");
  static_assert(host_memory<Bk>,
                "spmd::causal_attention: the fused operator runs on host backends (the simulation, MPI); on a "
                "device use the autograd layer's causal_attention, which composes bmm and softmax.");
}
}  // namespace attention_detail

/// Causal self-attention over heads of HeadDim: q, k, v (batch, positions, heads x HeadDim),
/// each head softmax(scale · q kᵀ + causal) v, the heads side by side as in the input.
template <index_t HeadDim, class Forced = void, element T, class LQ, class LK, class LV, class Bk>
auto causal_attention(const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k, const dtensor<T, LV, Bk>& v,
                      double scale) {
  attention_detail::check_api<T, Bk>();
  static_assert(LQ::rank == 3 && LK::rank == 3 && LV::rank == 3,
                "spmd::causal_attention: q, k and v must be (batch, positions, heads x head dim).");
  return apply<Forced>(ops::causal_attention<HeadDim>{scale}, q, k, v);
}

/// Its backward: (dq, dk, dv) stacked along a new dim 0, from the output's gradient g.
template <index_t HeadDim, class Forced = void, element T, class LG, class LQ, class LK, class LV, class Bk>
auto causal_attention_backward(const dtensor<T, LG, Bk>& g, const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k,
                               const dtensor<T, LV, Bk>& v, double scale) {
  attention_detail::check_api<T, Bk>();
  return apply<Forced>(ops::causal_attention_backward<HeadDim>{scale}, g, q, k, v);
}

}  // namespace spmd::runtime
