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
// S (float: host/vector_math.hpp's rows), in tiles of 128 query rows (a scratch of 128 x the
// keys, whatever the length: a whole c x c block of 64k positions would be 16 GiB). The
// backward recomputes S and P per tile (not saved between the passes: the products are cheap
// next to the memory a saved P of every head would take) and writes dq, dk, dv stacked, dk and
// dv summed over the tiles. With the positions split
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

/// Checks that a rank's block of width w holds whole heads of D.
template <index_t D>
void check_width(const char* name, index_t w) {
  if (w % D != 0)
    throw std::invalid_argument(std::string("spmd::") + name + ": a rank's block holds " + std::to_string(w) +
                                " columns of the width, not whole heads of " + std::to_string(D) +
                                " (shard the width by whole heads)");
}

/// Checks a rank's blocks: contiguous, whole heads.
template <index_t D, class... V>
void check_blocks(const char* name, index_t w, const V&... v) {
  check_width<D>(name, w);
  if (!(v.is_contiguous() && ...))
    throw std::logic_error(std::string("spmd::") + name + ": a local block is not contiguous");
}

/// A scratch of the calling thread (which < 4: scores, their gradient, a tile's dk/dv; the
/// ring's kernels use them too, ring_attention.hpp).
template <class T>
T* scratch(index_t elems, int which) {
  thread_local std::vector<T> s[4];
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

/// One rank's blocks of one op, q (nb, cq, w), k and v (nb, ck, w), heads of D, as tiles of
/// query rows: a tile is `rows` queries from row r0, at global positions first + r0 on. Its
/// scores are a rows x kn scratch: a causal tile sees the keys before its last query only (kn
/// of them: the rest are masked, so they are not computed), and tiling bounds the scratch by
/// tile_rows x the keys whatever the sequence's length (a whole c x c block of 64k positions
/// would be 16 GiB).
inline constexpr index_t tile_rows = 128;
template <class T>
struct blocks {
  index_t nb, cq, ck, w, d, first;  // first: the global position of q's row 0
  index_t r0 = 0, rows = 0, kn = 0;  // the tile
  index_t heads() const { return nb * (w / d); }
  index_t q_at(index_t i) const { return (i / (w / d)) * cq * w + r0 * w + (i % (w / d)) * d; }  // head i, the tile's row 0
  index_t k_at(index_t i) const { return (i / (w / d)) * ck * w + (i % (w / d)) * d; }
  index_t tiles() const { return (cq + tile_rows - 1) / tile_rows; }
  /// Tile t of a causal (or not) op.
  blocks tile(index_t t, bool causal) const {
    blocks b = *this;
    b.r0 = t * tile_rows;
    b.rows = std::min(tile_rows, cq - b.r0);
    b.kn = causal ? std::max<index_t>(0, std::min(ck, first + b.r0 + b.rows)) : ck;
    return b;
  }
};
template <bool Causal, index_t D, class T>
blocks<T> blocks_of(const op_rank_info& info, int q_input, strided_view<const T> q, strided_view<const T> k) {
  blocks<T> b{q.extent(0), q.extent(1), k.extent(1), q.extent(2), D, 0};
  if constexpr (Causal) b.first = info.in_offset(q_input)[1];
  return b;
}

/// P = softmax(scale · q kᵀ [+ mask]) of head i's tile: rows x kn at p (row stride kn).
template <bool Causal, class T>
void probabilities(const blocks<T>& b, index_t i, T* p, const T* q, const T* k, T scale) {
  detail::gemm_ld(p, b.kn, q + b.q_at(i), b.w, k + b.k_at(i), b.w, b.rows, b.kn, b.d, false, true, scale);
  masked_softmax<Causal>(p, b.rows, b.kn, b.first + b.r0);
}

/// dS = scale · P (dP − Σ_row dP P), dP = g vᵀ, of head i's tile: rows x kn at dp (P at p).
template <class T>
void score_gradient(const blocks<T>& b, index_t i, const T* p, T* dp, const T* g, const T* v, T scale) {
  detail::gemm_ld(dp, b.kn, g + b.q_at(i), b.w, v + b.k_at(i), b.w, b.rows, b.kn, b.d, false, true, T(1));
  softmax_backward(p, dp, b.rows, b.kn, scale);
}

/// Head i's dk and dv (in (nb, ck, w) blocks at dk, dv) from its tiles: sums over the query
/// rows. The first tile writes the keys it sees and zeroes the others (keys no query of this
/// block sees); each later tile adds its part, made in a scratch. With (Q) dq too.
template <bool Causal, bool Q, class T>
void key_gradients(const blocks<T>& whole, index_t i, T* dq, T* dk, T* dv, const T* g, const T* q, const T* k,
                   const T* v, T scale) {
  const index_t at = whole.k_at(i), w = whole.w, d = whole.d;
  for (index_t t = 0; t < whole.tiles(); ++t) {
    const blocks<T> b = whole.tile(t, Causal);
    T* p = scratch<T>(b.rows * b.kn, 0);
    T* dp = scratch<T>(b.rows * b.kn, 1);
    probabilities<Causal>(b, i, p, q, k, scale);
    T* acc = t == 0 ? nullptr : scratch<T>(2 * b.kn * d, 2);
    T* dvt = t == 0 ? dv + at : acc;  // Pᵀ g
    T* dkt = t == 0 ? dk + at : acc + b.kn * d;
    const index_t ld = t == 0 ? w : d;
    detail::gemm_ld(dvt, ld, p, b.kn, g + b.q_at(i), w, b.kn, d, b.rows, true, false, T(1));
    score_gradient(b, i, p, dp, g, v, scale);
    if constexpr (Q) detail::gemm_ld(dq + b.q_at(i), w, dp, b.kn, k + at, w, b.rows, d, b.kn, false, false, T(1));  // dS k
    detail::gemm_ld(dkt, ld, dp, b.kn, q + b.q_at(i), w, b.kn, d, b.rows, true, false, T(1));  // dSᵀ q
    if (t == 0) {
      for (index_t r = b.kn; r < whole.ck; ++r)
        for (index_t e = 0; e < d; ++e) dk[at + r * w + e] = dv[at + r * w + e] = T(0);
    } else {
      for (index_t r = 0; r < b.kn; ++r)
        for (index_t e = 0; e < d; ++e) {
          dv[at + r * w + e] += dvt[r * d + e];
          dk[at + r * w + e] += dkt[r * d + e];
        }
    }
  }
}

}  // namespace attention_detail

template <index_t D, bool Causal>
struct op_kernel<ops::attention<D, Causal>> : attention_kernel {
  template <class T>
  static void run(const ops::attention<D, Causal>& op, strided_view<T> out, const op_rank_info& info,
                  strided_view<const T> q, strided_view<const T> k, strided_view<const T> v) {
    attention_detail::check_blocks<D>(op.name, q.extent(2), q, k, v, out);
    if (out.size() == 0) return;
    const auto whole = attention_detail::blocks_of<Causal, D>(info, 0, q, k);
    attention_detail::for_each_head(whole.heads(), [&](index_t i) {
      for (index_t t = 0; t < whole.tiles(); ++t) {
        const auto b = whole.tile(t, Causal);
        T* p = attention_detail::scratch<T>(b.rows * b.kn, 0);
        attention_detail::probabilities<Causal>(b, i, p, q.data(), k.data(), static_cast<T>(op.scale));
        detail::gemm_ld(out.data() + b.q_at(i), b.w, p, b.kn, v.data() + b.k_at(i), b.w, b.rows, b.d, b.kn, false, false,
                        T(1));
      }
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
    const attention_detail::blocks<T> whole{q.extent(0), q.extent(1), k.extent(1), q.extent(2), D, 0};
    T* dq = out.data();
    T* dk = dq + whole.nb * whole.cq * whole.w;
    T* dv = dk + whole.nb * whole.ck * whole.w;
    attention_detail::for_each_head(whole.heads(), [&](index_t i) {
      attention_detail::key_gradients<Causal, true>(whole, i, dq, dk, dv, g.data(), q.data(), k.data(), v.data(),
                                                   static_cast<T>(op.scale));
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
    const auto whole = attention_detail::blocks_of<Causal, D>(info, 1, q, k);
    const T scale = static_cast<T>(op.scale);
    attention_detail::for_each_head(whole.heads(), [&](index_t i) {
      for (index_t t = 0; t < whole.tiles(); ++t) {
        const auto b = whole.tile(t, Causal);
        T* p = attention_detail::scratch<T>(b.rows * b.kn, 0);
        T* dp = attention_detail::scratch<T>(b.rows * b.kn, 1);
        attention_detail::probabilities<Causal>(b, i, p, q.data(), k.data(), scale);
        attention_detail::score_gradient(b, i, p, dp, g.data(), v.data(), scale);
        detail::gemm_ld(out.data() + b.q_at(i), b.w, dp, b.kn, k.data() + b.k_at(i), b.w, b.rows, b.d, b.kn, false, false,
                        T(1));
      }
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
    const auto whole = attention_detail::blocks_of<Causal, D>(info, 1, q, k);
    T* dk = out.data();
    T* dv = dk + whole.nb * whole.ck * whole.w;
    attention_detail::for_each_head(whole.heads(), [&](index_t i) {
      if (whole.cq == 0) {  // no query here: this rank's part of the sum is zero
        for (index_t r = 0; r < whole.ck; ++r)
          for (index_t e = 0; e < whole.d; ++e) dk[whole.k_at(i) + r * whole.w + e] = dv[whole.k_at(i) + r * whole.w + e] = T(0);
        return;
      }
      attention_detail::key_gradients<Causal, false>(whole, i, static_cast<T*>(nullptr), dk, dv, g.data(), q.data(), k.data(), v.data(),
                                                    static_cast<T>(op.scale));
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
