// spmd/runtime/ops/attention.hpp — attention (causal or not) as one operator on host dtensors,
// and its backward.
//
//   auto y = spmd::runtime::causal_attention<64>(q, k, v, 0.125);   // q, k, v (b, c, heads x 64)
//   auto d = spmd::runtime::causal_attention_backward<64>(g, q, k, v, 0.125);   // (3, b, c, w)
//   auto z = spmd::runtime::attention<64>(q, k, v, 0.125);          // no mask
//
// Per (batch, head): S = scale · q kᵀ, P = softmax(S [+ causal mask]), out = P v — the two
// products read the head's columns where they lie in the (b, c, w) blocks (BLAS's leading
// dimensions: no copy of a transposed or split head), the mask and the softmax one pass over
// S (float: host/vector_math.hpp's rows). The backward recomputes S and P per block (a c x c
// scratch, not saved between the passes: the products are cheap next to the memory a saved P
// of every head would take) and writes dq, dk, dv stacked. With the positions split
// (context parallelism) a rank's queries are a slice of rows starting at its block's offset:
// the causal mask is shifted by it, and the keys after its last query are neither computed
// nor, in dk/dv, more than zeros. The rules are ops/attention.hpp's; the autograd layer's
// attention (runtime/autograd/attention.hpp) uses these on host backends and composes bmm and
// softmax on the devices.
#pragma once

#include <algorithm>
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

/// The softmax of `rows` rows of n scores (row stride n), in place; Causal: row r is the query
/// at position first + r and sees the keys j <= first + r. Float by the vector rows, double by
/// a loop in double.
template <bool Causal, class T>
void masked_softmax(T* s, index_t rows, index_t n, index_t first) {
  if constexpr (std::is_same_v<T, float>) {
    if constexpr (Causal) host::vector_math::causal_softmax_rows(s, n, rows, n, first);
    else host::vector_math::softmax_rows_in_place(s, n, rows, n);
  } else {
    for (index_t r = 0; r < rows; ++r) {
      T* row = s + r * n;
      const index_t seen = Causal ? std::min(n, first + r + 1) : n;
      T m = -std::numeric_limits<T>::infinity();
      for (index_t j = 0; j < seen; ++j) m = std::fmax(m, row[j]);
      T sum = 0;
      for (index_t j = 0; j < seen; ++j) sum += (row[j] = std::exp(row[j] - m));
      for (index_t j = 0; j < seen; ++j) row[j] /= sum;
      for (index_t j = seen; j < n; ++j) row[j] = 0;
    }
  }
}

/// dp = scale · p (dp − Σ_row dp p) over `rows` rows of n (row stride n), in place.
template <class T>
void softmax_backward(const T* p, T* dp, index_t rows, index_t n, T scale) {
  if constexpr (std::is_same_v<T, float>) {
    host::vector_math::softmax_backward_rows(p, dp, n, rows, n, scale);
  } else {
    for (index_t r = 0; r < rows; ++r) {
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

namespace attention_detail {

/// One rank's blocks of one op: q (nb, cq, w), k and v (nb, ck, w), heads of D, the queries
/// starting at global position `first`. A causal query block sees the keys before its last
/// query only (kn of them: the rest of its scores are masked, so they are not computed).
template <class T>
struct blocks {
  index_t nb, cq, ck, w, d, first, kn;
  index_t heads() const { return nb * (w / d); }
  index_t q_at(index_t i) const { return (i / (w / d)) * cq * w + (i % (w / d)) * d; }  // head i's first column
  index_t k_at(index_t i) const { return (i / (w / d)) * ck * w + (i % (w / d)) * d; }
};
template <bool Causal, index_t D, class T>
blocks<T> blocks_of(const op_rank_info& info, int q_input, strided_view<const T> q, strided_view<const T> k) {
  blocks<T> b{q.extent(0), q.extent(1), k.extent(1), q.extent(2), D, 0, k.extent(1)};
  if constexpr (Causal) {
    b.first = info.in_offset(q_input)[1];
    b.kn = std::max<index_t>(0, std::min(b.ck, b.first + b.cq));
  }
  return b;
}

/// P = softmax(scale · q kᵀ [+ mask]) of head i: cq x kn at p (row stride kn).
template <bool Causal, class T>
void probabilities(const blocks<T>& b, index_t i, T* p, const T* q, const T* k, T scale) {
  detail::gemm_ld(p, b.kn, q + b.q_at(i), b.w, k + b.k_at(i), b.w, b.cq, b.kn, b.d, false, true, scale);
  masked_softmax<Causal>(p, b.cq, b.kn, b.first);
}

/// dS = scale · P (dP − Σ_row dP P), dP = g vᵀ, of head i: cq x kn at dp (P at p).
template <class T>
void score_gradient(const blocks<T>& b, index_t i, const T* p, T* dp, const T* g, const T* v, T scale) {
  detail::gemm_ld(dp, b.kn, g + b.q_at(i), b.w, v + b.k_at(i), b.w, b.cq, b.kn, b.d, false, true, T(1));
  softmax_backward(p, dp, b.cq, b.kn, scale);
}

/// Zeroes rows kn.. of head i's columns in a (nb, ck, w) block: keys no query of this block sees.
template <class T>
void zero_unseen(const blocks<T>& b, index_t i, T* x) {
  for (index_t r = b.kn; r < b.ck; ++r)
    for (index_t e = 0; e < b.d; ++e) x[b.k_at(i) + r * b.w + e] = T(0);
}

}  // namespace attention_detail

template <index_t D, bool Causal>
struct op_kernel<ops::attention<D, Causal>> : attention_kernel {
  template <class T>
  static void run(const ops::attention<D, Causal>& op, strided_view<T> out, const op_rank_info& info,
                  strided_view<const T> q, strided_view<const T> k, strided_view<const T> v) {
    attention_detail::check_blocks<D>(op.name, q.extent(2), q, k, v, out);
    if (out.size() == 0) return;
    const auto b = attention_detail::blocks_of<Causal, D>(info, 0, q, k);
    attention_detail::for_each_head(b.heads(), [&](index_t i) {
      T* p = attention_detail::scratch<T>(b.cq * b.kn, 0);
      attention_detail::probabilities<Causal>(b, i, p, q.data(), k.data(), static_cast<T>(op.scale));
      detail::gemm_ld(out.data() + b.q_at(i), b.w, p, b.kn, v.data() + b.k_at(i), b.w, b.cq, b.d, b.kn, false, false, T(1));
    });
  }
};

template <index_t D, bool Causal>
struct op_kernel<ops::attention_backward<D, Causal>> : attention_kernel {
  template <class T>
  static void run(const ops::attention_backward<D, Causal>& op, strided_view<T> out, const op_rank_info&,
                  strided_view<const T> g, strided_view<const T> q, strided_view<const T> k, strided_view<const T> v) {
    attention_detail::check_blocks<D>(op.name, q.extent(2), g, q, k, v, out);
    if (out.size() == 0) return;
    const attention_detail::blocks<T> b{q.extent(0), q.extent(1), k.extent(1), q.extent(2), D, 0, k.extent(1)};
    T* dq = out.data();
    T* dk = dq + b.nb * b.cq * b.w;
    T* dv = dk + b.nb * b.ck * b.w;
    const T scale = static_cast<T>(op.scale);
    attention_detail::for_each_head(b.heads(), [&](index_t i) {
      T* p = attention_detail::scratch<T>(b.cq * b.kn, 0);
      T* dp = attention_detail::scratch<T>(b.cq * b.kn, 1);
      attention_detail::probabilities<Causal>(b, i, p, q.data(), k.data(), scale);  // recomputed
      detail::gemm_ld(dv + b.k_at(i), b.w, p, b.kn, g.data() + b.q_at(i), b.w, b.kn, b.d, b.cq, true, false, T(1));  // Pᵀ g
      attention_detail::score_gradient(b, i, p, dp, g.data(), v.data(), scale);
      detail::gemm_ld(dq + b.q_at(i), b.w, dp, b.kn, k.data() + b.k_at(i), b.w, b.cq, b.d, b.kn, false, false, T(1));  // dS k
      detail::gemm_ld(dk + b.k_at(i), b.w, dp, b.kn, q.data() + b.q_at(i), b.w, b.kn, b.d, b.cq, true, false, T(1));  // dSᵀ q
    });
  }
};

template <index_t D, bool Causal>
struct op_kernel<ops::attention_backward_q<D, Causal>> : attention_kernel {
  template <class T>
  static void run(const ops::attention_backward_q<D, Causal>& op, strided_view<T> out, const op_rank_info& info,
                  strided_view<const T> g, strided_view<const T> q, strided_view<const T> k, strided_view<const T> v) {
    attention_detail::check_blocks<D>(op.name, q.extent(2), g, q, k, v, out);
    if (out.size() == 0) return;
    const auto b = attention_detail::blocks_of<Causal, D>(info, 1, q, k);
    const T scale = static_cast<T>(op.scale);
    attention_detail::for_each_head(b.heads(), [&](index_t i) {
      T* p = attention_detail::scratch<T>(b.cq * b.kn, 0);
      T* dp = attention_detail::scratch<T>(b.cq * b.kn, 1);
      attention_detail::probabilities<Causal>(b, i, p, q.data(), k.data(), scale);
      attention_detail::score_gradient(b, i, p, dp, g.data(), v.data(), scale);
      detail::gemm_ld(out.data() + b.q_at(i), b.w, dp, b.kn, k.data() + b.k_at(i), b.w, b.cq, b.d, b.kn, false, false, T(1));
    });
  }
};

template <index_t D, bool Causal>
struct op_kernel<ops::attention_backward_kv<D, Causal>> : attention_kernel {
  template <class T>
  static void run(const ops::attention_backward_kv<D, Causal>& op, strided_view<T> out, const op_rank_info& info,
                  strided_view<const T> g, strided_view<const T> q, strided_view<const T> k, strided_view<const T> v) {
    attention_detail::check_blocks<D>(op.name, q.extent(2), g, q, k, v, out);
    if (out.size() == 0) return;
    const auto b = attention_detail::blocks_of<Causal, D>(info, 1, q, k);
    T* dk = out.data();
    T* dv = dk + b.nb * b.ck * b.w;
    const T scale = static_cast<T>(op.scale);
    attention_detail::for_each_head(b.heads(), [&](index_t i) {
      attention_detail::zero_unseen(b, i, dk);
      attention_detail::zero_unseen(b, i, dv);
      if (b.cq == 0 || b.kn == 0) {  // no query here: this rank's part of the sum is zero
        for (index_t r = 0; r < b.kn; ++r)
          for (index_t e = 0; e < b.d; ++e) dk[b.k_at(i) + r * b.w + e] = dv[b.k_at(i) + r * b.w + e] = T(0);
        return;
      }
      T* p = attention_detail::scratch<T>(b.cq * b.kn, 0);
      T* dp = attention_detail::scratch<T>(b.cq * b.kn, 1);
      attention_detail::probabilities<Causal>(b, i, p, q.data(), k.data(), scale);
      detail::gemm_ld(dv + b.k_at(i), b.w, p, b.kn, g.data() + b.q_at(i), b.w, b.kn, b.d, b.cq, true, false, T(1));  // Pᵀ g
      attention_detail::score_gradient(b, i, p, dp, g.data(), v.data(), scale);
      detail::gemm_ld(dk + b.k_at(i), b.w, dp, b.kn, q.data() + b.q_at(i), b.w, b.kn, b.d, b.cq, true, false, T(1));  // dSᵀ q
    });
  }
};

namespace attention_detail {
template <class T, class Bk>
constexpr void check_api() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "spmd::attention: the fused operator computes in float or double; for other element "
                "types use the autograd layer's attention, which composes bmm and softmax.");
  static_assert(host_memory<Bk>,
                "spmd::attention: the fused operator runs on host backends (the simulation, MPI); on a "
                "device use the autograd layer's attention, which composes bmm and softmax.");
}
/// The placements K and V are read in when the queries' positions are split (context
/// parallelism, the all-gather method): the queries', with the positions whole. Gathering them
/// first pins the method: left to propagation alone, a split sequence of dynamic length could
/// be moved to the batch by all-to-alls (cheaper for the one operator, but the output would no
/// longer be split as q is, which the rest of a model's sequence-split layers want).
template <class P>
struct whole_positions_one {
  using type = P;
};
template <int D, int O>
struct whole_positions_one<shard<D, O>> {
  using type = std::conditional_t<D == 1 || D == -2, replicate, shard<D, O>>;
};
template <class P>
struct whole_positions;
template <class... P>
struct whole_positions<placements<P...>> {
  using type = placements<typename whole_positions_one<P>::type...>;
};
/// Whether q's layout splits the positions (and holds no Partial, which propagation resolves).
template <class LQ>
constexpr bool splits_positions() {
  const placement_vec p = LQ::placements_type::value();
  bool split = false;
  for (int d = 0; d < p.size(); ++d) {
    if (p[d].is_partial()) return false;
    split = split || p[d].is_shard(1) || p[d].is_shard(-2);
  }
  return split;
}

/// Op on (extra..., q, k, v), K and V first gathered to the queries' layout with whole
/// positions when q splits them.
template <class Forced, class LQ, class Op, class K, class V, class... X>
auto apply_gathered(const Op& op, const K& k, const V& v, const X&... x) {
  if constexpr (splits_positions<LQ>()) {
    using P = typename whole_positions<typename LQ::placements_type>::type;
    return apply<Forced>(op, x..., redistribute<P>(k), redistribute<P>(v));
  } else {
    return apply<Forced>(op, x..., k, v);
  }
}

}  // namespace attention_detail

/// Attention over heads of HeadDim: q (batch, positions, heads x HeadDim), k and v (batch, key
/// positions, heads x HeadDim), each head softmax(scale · q kᵀ [+ causal mask]) v, the heads
/// side by side as in q. The positions may be split (Shard(1)): the queries stay split, the
/// keys and values are gathered.
template <index_t HeadDim, bool Causal = false, class Forced = void, element T, class LQ, class LK, class LV, class Bk>
auto attention(const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k, const dtensor<T, LV, Bk>& v, double scale) {
  attention_detail::check_api<T, Bk>();
  static_assert(LQ::rank == 3 && LK::rank == 3 && LV::rank == 3,
                "spmd::attention: q, k and v must be (batch, positions, heads x head dim).");
  return attention_detail::apply_gathered<Forced, LQ>(ops::attention<HeadDim, Causal>{scale}, k, v, q);
}
/// Causal self-attention: query position i sees the keys j <= i.
template <index_t HeadDim, class Forced = void, element T, class LQ, class LK, class LV, class Bk>
auto causal_attention(const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k, const dtensor<T, LV, Bk>& v,
                      double scale) {
  return attention<HeadDim, true, Forced>(q, k, v, scale);
}

/// Its backward where the positions are whole: (dq, dk, dv) stacked along a new dim 0, from the
/// output's gradient g.
template <index_t HeadDim, bool Causal = true, class Forced = void, element T, class LG, class LQ, class LK, class LV,
          class Bk>
auto attention_backward(const dtensor<T, LG, Bk>& g, const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k,
                        const dtensor<T, LV, Bk>& v, double scale) {
  attention_detail::check_api<T, Bk>();
  return apply<Forced>(ops::attention_backward<HeadDim, Causal>{scale}, g, q, k, v);
}
template <index_t HeadDim, class Forced = void, element T, class LG, class LQ, class LK, class LV, class Bk>
auto causal_attention_backward(const dtensor<T, LG, Bk>& g, const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k,
                               const dtensor<T, LV, Bk>& v, double scale) {
  return attention_backward<HeadDim, true, Forced>(g, q, k, v, scale);
}
/// The backward split for positions that are: dq (split as q), and dk, dv stacked (2, b, k, w)
/// (Partial(sum) where q is split).
template <index_t HeadDim, bool Causal, class Forced = void, element T, class LG, class LQ, class LK, class LV, class Bk>
auto attention_backward_q(const dtensor<T, LG, Bk>& g, const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k,
                          const dtensor<T, LV, Bk>& v, double scale) {
  attention_detail::check_api<T, Bk>();
  return attention_detail::apply_gathered<Forced, LQ>(ops::attention_backward_q<HeadDim, Causal>{scale}, k, v, g, q);
}
template <index_t HeadDim, bool Causal, class Forced = void, element T, class LG, class LQ, class LK, class LV, class Bk>
auto attention_backward_kv(const dtensor<T, LG, Bk>& g, const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k,
                           const dtensor<T, LV, Bk>& v, double scale) {
  attention_detail::check_api<T, Bk>();
  return attention_detail::apply_gathered<Forced, LQ>(ops::attention_backward_kv<HeadDim, Causal>{scale}, k, v, g, q);
}

}  // namespace spmd::runtime
