// spmd/runtime/ops/ring_attention.hpp — context parallelism's ring: attention with the
// positions split over a mesh dim, K and V passed from rank to rank instead of gathered.
//
//   auto [y, lse] = spmd::runtime::ring_attention<64, true>(q, k, v, 0.125);
//   auto [dq, dk, dv] = spmd::runtime::ring_attention_backward<64, true>(g, q, k, v, y, lse, 0.125);
//
// q, k and v (batch, positions, heads x D) split on the positions (Shard(1)) over one mesh dim
// of n ranks, in one layout (k and v of their own length where there is no mask). Each rank
// keeps its queries and holds one K/V block at a time: in step t it holds the block of the
// rank t places before it, computes its queries' attention to those keys (the causal mask
// shifted by both blocks' first positions; a block wholly after the queries is skipped) and
// merges it into its output by the log-sum-exp: with L the rows' log-sum-exp so far and b the
// block's, L' = log(e^L + e^b), out' = out e^(L − L') + Σ e^(s − L') v — in the element type
// (f32 for float: the merge never rounds below it). Then every rank passes its block on (one
// slot of plan/p2p_schedule.hpp's ring, n − 1 slots). The blocks travel padded to the longest
// block's length, so lengths n does not divide, and ranks holding none, are no special case.
//
// The backward passes K/V the same way and dK/dV with them: in step t the rank adds its
// queries' part to the travelling dK/dV of the block it holds (P recomputed from the saved
// log-sum-exp, dS = P ∘ (dP − rowsum(dO ∘ out))), and after n slots each dK/dV is home. The
// rank keeps dq. Memory: a rank holds two K/V blocks' worth (its K/V and dK/dV in flight),
// not the whole sequence the all-gather method holds. Collectives: none; 2(n − 1) blocks
// forward, 4n − 2 backward, as point-to-point slots (comm_counter's count_p2p).
//
// Float and double. Host backends (the simulation, MPI): the kernels are BLAS products over
// the heads where they lie (runtime/ops/attention.hpp's). Device backends (CUDA, NCCL) run
// the same slots themselves over the same places (backends/cuda/ring.hpp). The autograd layer's attention takes
// it with context_method::ring; docs/context_parallel.md compares it with the all-gather.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/head_tail.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/host/vector_math.hpp"
#include "spmd/plan/p2p_schedule.hpp"
#include "spmd/runtime/backend.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/runtime/ops/attention.hpp"
#include "spmd/runtime/ops/gemm.hpp"
#include "spmd/runtime/ops/ring_places.hpp"

namespace spmd::runtime {

/// How attention reaches keys on other ranks when the positions are split: gather them all
/// (the default; every backend), or pass them around a ring (host backends); ring_head_tail:
/// the ring over a sequence stored in head-tail order (core/head_tail.hpp), which balances a
/// causal mask's work over the ranks.
enum class context_method { all_gather, ring, ring_head_tail };

/// The method a model's attention takes where its code does not name one (nn/modules.hpp's
/// causal_self_attention; spmd-train --cp-method), for the calling thread while the scope
/// lives (PyTorch's context_parallel options). Outside any scope: all_gather.
class context_method_scope {
 public:
  explicit context_method_scope(context_method m) : prev_(current_ref()) { current_ref() = m; }
  ~context_method_scope() { current_ref() = prev_; }
  context_method_scope(const context_method_scope&) = delete;
  context_method_scope& operator=(const context_method_scope&) = delete;
  static context_method current() { return current_ref(); }

 private:
  static context_method& current_ref() {
    thread_local context_method m = context_method::all_gather;
    return m;
  }
  context_method prev_;
};

/// A device backend that runs the ring itself (backends/cuda/ring.hpp: ring_forward and
/// ring_backward over its storage, p2p_slot to pass the blocks on).
template <class Bk>
concept device_ring = requires { requires Bk::has_ring; };

namespace ring_detail {

/// The mesh dim layout L splits the positions (dim 1) on: −1 none, −2 a Partial, −3 more than one.
template <class L>
constexpr int ring_dim() {
  const placement_vec p = L::placements_type::value();
  int dim = -1;
  for (int d = 0; d < p.size(); ++d) {
    if (p[d].is_partial()) return -2;
    if (p[d].is_shard(1) || p[d].is_shard(-2)) {
      if (dim >= 0) return -3;
      dim = d;
    }
  }
  return dim;
}
template <class L>
constexpr void check_layout() {
  constexpr int d = ring_dim<L>();
  static_assert(d != -2, "spmd::ring_attention: q, k and v must not be Partial (softmax is not linear).");
  static_assert(d != -3,
                "spmd::ring_attention: the ring passes K/V around one mesh dim; these placements split "
                "the positions over two (use the all-gather method, or split them on one).");
  // The ring's table on this mesh dim, paired slot by slot (else the error names the slot),
  // where the dim's size is static. A run-time size gets the same table, proved paired for 1
  // to 64 ranks once in tests/static/p2p.cpp: not here, where every including unit would pay
  // for it (g++: 10 s and 730 MB of constant evaluation).
  using M = typename L::mesh_type;
  if constexpr (d >= 0 && M::is_static) {
    constexpr int n = static_cast<int>(M::nominal_shape_vec()[d]);
    static_assert(p2p::require_paired<p2p::ring_table<n, 2>>());
  }
}

/// Head-tail order needs a causal sequence that 2·cp divides: said here where the length and
/// the ring's mesh dim are static (else place_of throws, naming the numbers).
template <bool HeadTail, class LQ, class LK>
constexpr void check_head_tail() {
  if constexpr (HeadTail) {
    constexpr int d = ring_dim<LQ>();
    using M = typename LQ::mesh_type;
    constexpr index_t cq = LQ::extents_type::static_extent(1), ck = LK::extents_type::static_extent(1);
    if constexpr (d >= 0 && M::is_static) {
      constexpr index_t n = M::nominal_shape_vec()[d];
      static_assert(cq == dyn || head_tail::splits(cq, n),
                    "spmd::ring_attention: a sequence that cannot be split as asked: head-tail balancing cuts it "
                    "into 2·cp equal chunks, and 2·cp does not divide its length.");
      static_assert(ck == dyn || head_tail::splits(ck, n),
                    "spmd::ring_attention: a sequence that cannot be split as asked: head-tail balancing cuts the "
                    "keys into 2·cp equal chunks, and 2·cp does not divide their length.");
    }
  }
}

/// The two parts (K, V) of a rank's block, each (nb, len, w), into `out` padded to (2, nb, k_max, w).
template <class T>
void pack(T* out, const T* k, const T* v, index_t nb, index_t len, index_t k_max, index_t w) {
  for (int part = 0; part < 2; ++part)
    for (index_t b = 0; b < nb; ++b) {
      T* o = out + (part * nb + b) * k_max * w;
      const T* in = (part == 0 ? k : v) + b * len * w;
      if (len > 0) std::memcpy(o, in, static_cast<std::size_t>(len * w) * sizeof(T));
      std::fill(o + len * w, o + k_max * w, T(0));
    }
}
/// Part `part` of a padded block, back to (nb, len, w).
template <class T>
void unpack(T* out, const T* in, int part, index_t nb, index_t len, index_t k_max, index_t w) {
  for (index_t b = 0; b < nb; ++b)
    if (len > 0)
      std::memcpy(out + b * len * w, in + (part * nb + b) * k_max * w, static_cast<std::size_t>(len * w) * sizeof(T));
}

/// One run of a rank's queries (nb, cq, w): cq rows from q_row, from global position q_first)
/// against one run of a key block (padded rows k_max: k_len rows from k_row, from global
/// position k_first), heads of d. Rows are counted from the runs' first.
struct block {
  index_t nb, cq, w, d, k_max, q_row, q_len, q_first, k_row, k_len, k_first;
  index_t per() const { return w / d; }
  index_t heads() const { return nb * per(); }
  index_t q_at(index_t i, index_t row) const { return (i / per()) * cq * w + (q_row + row) * w + (i % per()) * d; }
  index_t k_at(index_t i) const { return (i / per()) * k_max * w + k_row * w + (i % per()) * d; }
  /// The keys query row `row` sees.
  index_t seen(index_t row, bool causal) const {
    if (!causal) return k_len;
    return std::clamp<index_t>(q_first + row - k_first + 1, 0, k_len);
  }
  /// The first row of [r0, r1) that sees a key (r1: none does).
  index_t first_seeing(index_t r0, index_t r1, bool causal) const {
    if (k_len == 0) return r1;
    if (!causal) return r0;
    return std::clamp<index_t>(k_first - q_first, r0, r1);
  }
};

template <class T>
T exp_of(T x) {
  return std::exp(x);
}
/// row[j] = e^(row[j] − m) for j < n (float: the vector exp).
template <class T>
void exp_shifted(T* row, index_t n, T m) {
  for (index_t j = 0; j < n; ++j) row[j] -= m;
  if constexpr (std::is_same_v<T, float>) host::vector_math::map<unary_fn::exp>(row, row, n);
  else
    for (index_t j = 0; j < n; ++j) row[j] = std::exp(row[j]);
}

/// Head i's queries against the block: merged into out (rows of d at stride w) and lse (cq).
template <bool Causal, class T>
void forward_block(const block& b, index_t i, T* out, T* lse, const T* q, const T* k, const T* v, T scale) {
  constexpr T ninf = -std::numeric_limits<T>::infinity();
  lse += b.q_row;
  for (index_t r0 = 0; r0 < b.q_len; r0 += attention_detail::tile_rows) {
    const index_t r1 = std::min(b.q_len, r0 + attention_detail::tile_rows);
    const index_t a = b.first_seeing(r0, r1, Causal);
    if (a == r1) continue;
    const index_t rows = r1 - a, kn = b.seen(r1 - 1, Causal);
    T* s = attention_detail::scratch<T>(rows * kn, 0);
    detail::gemm_ld(s, kn, q + b.q_at(i, a), b.w, k + b.k_at(i), b.w, rows, kn, b.d, false, true, scale);
    for (index_t r = 0; r < rows; ++r) {
      T* row = s + r * kn;
      const index_t n = b.seen(a + r, Causal);
      T m = ninf;
      for (index_t j = 0; j < n; ++j) m = std::fmax(m, row[j]);
      exp_shifted(row, n, m);
      T sum = 0;
      for (index_t j = 0; j < n; ++j) sum += row[j];
      std::fill(row + n, row + kn, T(0));
      const T here = m + std::log(sum);  // the block's log-sum-exp of the row
      T& l = lse[a + r];
      const T merged = l == ninf ? here : std::fmax(l, here) + std::log1p(std::exp(-std::fabs(l - here)));
      const T keep = l == ninf ? T(0) : std::exp(l - merged), take = std::exp(m - merged);
      T* o = out + b.q_at(i, a + r);
      for (index_t e = 0; e < b.d; ++e) o[e] *= keep;
      for (index_t j = 0; j < n; ++j) row[j] *= take;  // e^(s − merged)
      l = merged;
    }
    T* add = attention_detail::scratch<T>(rows * b.d, 1);
    detail::gemm_ld(add, b.d, s, kn, v + b.k_at(i), b.w, rows, b.d, kn, false, false, T(1));
    for (index_t r = 0; r < rows; ++r) {
      T* o = out + b.q_at(i, a + r);
      for (index_t e = 0; e < b.d; ++e) o[e] += add[r * b.d + e];
    }
  }
}

/// Head i's part of the backward against the block: dq (rows of d at stride w) += dS k; the
/// block's dk += dSᵀ q and dv += Pᵀ g (in the padded block's rows). delta: rowsum(g ∘ out).
template <bool Causal, class T>
void backward_block(const block& b, index_t i, T* dq, T* dk, T* dv, const T* g, const T* q, const T* k, const T* v,
                    const T* lse, const T* delta, T scale) {
  lse += b.q_row;
  delta += b.q_row;
  for (index_t r0 = 0; r0 < b.q_len; r0 += attention_detail::tile_rows) {
    const index_t r1 = std::min(b.q_len, r0 + attention_detail::tile_rows);
    const index_t a = b.first_seeing(r0, r1, Causal);
    if (a == r1) continue;
    const index_t rows = r1 - a, kn = b.seen(r1 - 1, Causal);
    T* p = attention_detail::scratch<T>(rows * kn, 0);
    T* dp = attention_detail::scratch<T>(rows * kn, 1);
    T* part = attention_detail::scratch<T>(std::max(rows, kn) * b.d, 2);
    detail::gemm_ld(p, kn, q + b.q_at(i, a), b.w, k + b.k_at(i), b.w, rows, kn, b.d, false, true, scale);
    for (index_t r = 0; r < rows; ++r) {
      T* row = p + r * kn;
      const index_t n = b.seen(a + r, Causal);
      exp_shifted(row, n, lse[a + r]);
      std::fill(row + n, row + kn, T(0));
    }
    const index_t kat = b.k_at(i);
    auto add_rows = [&](T* to, index_t stride_rows, index_t first) {  // to[first + r] += part[r]
      for (index_t r = 0; r < stride_rows; ++r)
        for (index_t e = 0; e < b.d; ++e) to[(first + r) * b.w + e] += part[r * b.d + e];
    };
    detail::gemm_ld(part, b.d, p, kn, g + b.q_at(i, a), b.w, kn, b.d, rows, true, false, T(1));  // Pᵀ g
    add_rows(dv + kat, kn, 0);
    detail::gemm_ld(dp, kn, g + b.q_at(i, a), b.w, v + kat, b.w, rows, kn, b.d, false, true, T(1));  // g vᵀ
    for (index_t r = 0; r < rows; ++r)
      for (index_t j = 0; j < kn; ++j) dp[r * kn + j] = p[r * kn + j] * (dp[r * kn + j] - delta[a + r]) * scale;
    detail::gemm_ld(part, b.d, dp, kn, k + kat, b.w, rows, b.d, kn, false, false, T(1));  // dS k
    add_rows(dq + b.q_at(i, 0), rows, a);
    detail::gemm_ld(part, b.d, dp, kn, q + b.q_at(i, a), b.w, kn, b.d, rows, true, false, T(1));  // dSᵀ q
    add_rows(dk + kat, kn, 0);
  }
}

template <class T>
void zero(local_set<T>& x, index_t i, const shape_vec& shape) {
  x.assign(i, shape);
  if (x.size(i) > 0) std::fill(x.data(i), x.data(i) + x.size(i), T(0));
}

/// What both directions require of their inputs, said at compile time.
template <bool HeadTail, class T, class Bk, class LQ, class LK>
constexpr void check_inputs() {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                "spmd::ring_attention: the ring computes in float or double; for other element types use the "
                "autograd layer's attention with context_method::all_gather, which composes bmm and softmax.");
  static_assert(host_memory<Bk> || device_ring<Bk>,
                "spmd::ring_attention: this backend has no ring (the simulation, MPI, CUDA and NCCL have one); "
                "use context_method::all_gather.");
  static_assert(LQ::rank == 3 && LK::rank == 3, "spmd::ring_attention: q, k and v must be (batch, positions, heads x head dim).");
  static_assert(std::is_same_v<typename LQ::placements_type, typename LK::placements_type>,
                "spmd::ring_attention: k and v travel in the queries' placements; redistribute them to q's "
                "first (the autograd layer's attention does).");
  check_layout<LQ>();
  check_head_tail<HeadTail, LQ, LK>();
}

/// Every held rank's place, and its K/V block packed (2, nb, k_max, w) into kv.
template <index_t D, class T, class LQ, class LK, class Bk>
std::vector<place> start(const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k, const dtensor<T, LK, Bk>& v, int dim,
                         bool head_tail, local_set<T>& kv) {
  std::vector<place> places;
  for (const index_t i : q.locals().held()) {
    attention_detail::check_blocks<D>("ring_attention", q.locals().shape(i)[2], q.locals().view(i), k.locals().view(i),
                                      v.locals().view(i));
    places.push_back(place_of(q.layout(), k.layout(), dim, i, head_tail));
    const place& pl = places.back();
    const shape_vec& ks = k.locals().shape(i);
    kv.assign(i, shape_of({2, ks[0], pl.k_max, ks[2]}));
    pack(kv.data(i), k.locals().cdata(i), v.locals().cdata(i), ks[0], ks[1], pl.k_max, ks[2]);
  }
  return places;
}

/// f(block) for each pair of a query run of the rank and a key run of block j (its queries
/// (nb, cq, w): shape qs).
template <index_t D, class F>
void for_each_pair(const place& pl, index_t j, const shape_vec& qs, F&& f) {
  for (int a = 0; a < pl.q.count; ++a)
    for (int b = 0; b < pl.k[static_cast<std::size_t>(j)].count; ++b) {
      const run& qr = pl.q.at[a];
      const run& kr = pl.k[static_cast<std::size_t>(j)].at[b];
      if (qr.len == 0 || kr.len == 0) continue;
      f(block{qs[0], qs[1], qs[2], D, pl.k_max, qr.row, qr.len, qr.first, kr.row, kr.len, kr.first});
    }
}

/// Every held rank's place, for a device backend (whose blocks are contiguous by construction;
/// the width is checked as the host's start() checks it).
template <index_t D, class LQ, class LK, class S>
std::vector<place> device_places(const LQ& lq, const LK& lk, const S& ql, int dim, bool head_tail) {
  std::vector<place> places;
  for (const index_t i : ql.held()) {
    attention_detail::check_width<D>("ring_attention", ql.shape(i)[2]);
    places.push_back(place_of(lq, lk, dim, i, head_tail));
  }
  return places;
}

}  // namespace ring_detail

/// The ring's forward: the output (q's layout) and each held rank's log-sum-exp per
/// (batch, head, query) row, which the backward reads. HeadTail: the sequence dim holds the
/// positions in head-tail order (core/head_tail.hpp: rank i's block is chunks i and 2n − 1 − i),
/// which balances the causal mask's work over the ranks.
template <index_t HeadDim, bool Causal, bool HeadTail = false, element T, class LQ, class LK, class Bk>
auto ring_attention(const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k, const dtensor<T, LK, Bk>& v,
                    double scale) {
  ring_detail::check_inputs<HeadTail, T, Bk, LQ, LK>();
  constexpr int dim = ring_detail::ring_dim<LQ>();
  using M = typename LQ::mesh_type;
  if constexpr (!host_memory<Bk>) {
    auto [out, lse] = Bk::template ring_forward<Bk, HeadDim, Causal, dim, M>(
        q.locals(), k.locals(), v.locals(),
        ring_detail::device_places<HeadDim>(q.layout(), k.layout(), q.locals(), dim, HeadTail), scale);
    return std::make_pair(dtensor<T, LQ, Bk>(detail::internal_t{}, q.layout(), std::move(out)), std::move(lse));
  } else {
  const local_set<T>& ql = q.locals();
  local_set<T> kv(ql.ranks(), ql.held_ranks()), out(ql.ranks(), ql.held_ranks()), lse(ql.ranks(), ql.held_ranks());
  const std::vector<ring_detail::place> places = ring_detail::start<HeadDim>(q, k, v, dim, HeadTail, kv);
  for (const index_t i : ql.held()) {
    const shape_vec& qs = ql.shape(i);
    ring_detail::zero(out, i, qs);
    lse.assign(i, ring_detail::shape_of({qs[0] * (qs[2] / HeadDim), qs[1]}));
    std::fill(lse.data(i), lse.data(i) + lse.size(i), -std::numeric_limits<T>::infinity());
  }
  const index_t n = places.empty() ? 1 : places[0].n;
  for (index_t t = 0; t < n; ++t) {
    std::size_t at = 0;
    for (const index_t i : ql.held()) {
      const ring_detail::place& pl = places[at++];
      if (out.size(i) == 0) continue;
      T* o = out.data(i);
      T* l = lse.data(i);
      const T* qd = ql.cdata(i);
      const T* kd = kv.cdata(i);
      ring_detail::for_each_pair<HeadDim>(pl, (pl.pos - t + n) % n, ql.shape(i), [&](const ring_detail::block& b) {
        const T* vd = kd + b.nb * b.k_max * b.w;
        attention_detail::for_each_head(b.heads(), [&](index_t h) {
          ring_detail::forward_block<Causal>(b, h, o, l + h * b.cq, qd, kd, vd, static_cast<T>(scale));
        });
      });
    }
    if constexpr (dim >= 0)
      if (t + 1 < n) Bk::template p2p_slot<T, M>(kv, dim, p2p::ring_action);
  }
  return std::make_pair(dtensor<T, LQ, Bk>(detail::internal_t{}, q.layout(), std::move(out)), std::move(lse));
  }
}

/// The ring's backward: dq (q's layout), dk and dv (k's), from the output's gradient g, the
/// inputs, the forward's output y and its log-sum-exp.
template <index_t HeadDim, bool Causal, bool HeadTail = false, element T, class LQ, class LK, class Bk>
auto ring_attention_backward(const dtensor<T, LQ, Bk>& g, const dtensor<T, LQ, Bk>& q, const dtensor<T, LK, Bk>& k,
                             const dtensor<T, LK, Bk>& v, const dtensor<T, LQ, Bk>& y,
                             const storage_t<Bk, T>& lse, double scale) {
  ring_detail::check_inputs<HeadTail, T, Bk, LQ, LK>();
  constexpr int dim = ring_detail::ring_dim<LQ>();
  using M = typename LQ::mesh_type;
  if constexpr (!host_memory<Bk>) {
    auto [dq, dk, dv] = Bk::template ring_backward<Bk, HeadDim, Causal, dim, M>(
        g.locals(), q.locals(), k.locals(), v.locals(), y.locals(), lse,
        ring_detail::device_places<HeadDim>(q.layout(), k.layout(), q.locals(), dim, HeadTail), scale);
    return std::make_tuple(dtensor<T, LQ, Bk>(detail::internal_t{}, q.layout(), std::move(dq)),
                           dtensor<T, LK, Bk>(detail::internal_t{}, k.layout(), std::move(dk)),
                           dtensor<T, LK, Bk>(detail::internal_t{}, v.layout(), std::move(dv)));
  } else {
  const local_set<T>& ql = q.locals();
  local_set<T> kv(ql.ranks(), ql.held_ranks()), dkv(ql.ranks(), ql.held_ranks()), dq(ql.ranks(), ql.held_ranks()),
      delta(ql.ranks(), ql.held_ranks());
  const std::vector<ring_detail::place> places = ring_detail::start<HeadDim>(q, k, v, dim, HeadTail, kv);
  for (const index_t i : ql.held()) {
    const shape_vec& qs = ql.shape(i);
    ring_detail::zero(dkv, i, kv.shape(i));
    ring_detail::zero(dq, i, qs);
    // delta = rowsum(g ∘ y) per (batch, head, row)
    const index_t per = qs[2] / HeadDim;
    delta.assign(i, ring_detail::shape_of({qs[0] * per, qs[1]}));
    const T* gd = g.locals().cdata(i);
    const T* yd = y.locals().cdata(i);
    T* dd = delta.data(i);
    for (index_t h = 0; h < qs[0] * per; ++h)
      for (index_t r = 0; r < qs[1]; ++r) {
        const index_t at = (h / per) * qs[1] * qs[2] + r * qs[2] + (h % per) * HeadDim;
        T s = 0;
        for (index_t e = 0; e < HeadDim; ++e) s += gd[at + e] * yd[at + e];
        dd[h * qs[1] + r] = s;
      }
  }
  const index_t n = places.empty() ? 1 : places[0].n;
  for (index_t t = 0; t < n; ++t) {
    std::size_t at = 0;
    for (const index_t i : ql.held()) {
      const ring_detail::place& pl = places[at++];
      if (dq.size(i) == 0) continue;
      T* dqd = dq.data(i);
      T* dk = dkv.data(i);
      const T* kd = kv.cdata(i);
      const T* gd = g.locals().cdata(i);
      const T* qd = ql.cdata(i);
      const T* l = lse.cdata(i);
      const T* dd = delta.cdata(i);
      ring_detail::for_each_pair<HeadDim>(pl, (pl.pos - t + n) % n, ql.shape(i), [&](const ring_detail::block& b) {
        T* dv = dk + b.nb * b.k_max * b.w;
        const T* vd = kd + b.nb * b.k_max * b.w;
        attention_detail::for_each_head(b.heads(), [&](index_t h) {
          ring_detail::backward_block<Causal>(b, h, dqd, dk, dv, gd, qd, kd, vd, l + h * b.cq, dd + h * b.cq,
                                              static_cast<T>(scale));
        });
      });
    }
    if constexpr (dim >= 0) {
      if (t + 1 < n) Bk::template p2p_slot<T, M>(kv, dim, p2p::ring_action);
      Bk::template p2p_slot<T, M>(dkv, dim, p2p::ring_action);  // after the last, each dK/dV is home
    }
  }
  local_set<T> dk(ql.ranks(), ql.held_ranks()), dv(ql.ranks(), ql.held_ranks());
  std::size_t at = 0;
  for (const index_t i : ql.held()) {
    const ring_detail::place& pl = places[at++];
    const shape_vec& ks = k.locals().shape(i);
    dk.assign(i, ks);
    dv.assign(i, ks);
    ring_detail::unpack(dk.data(i), dkv.cdata(i), 0, ks[0], ks[1], pl.k_max, ks[2]);
    ring_detail::unpack(dv.data(i), dkv.cdata(i), 1, ks[0], ks[1], pl.k_max, ks[2]);
  }
  return std::make_tuple(dtensor<T, LQ, Bk>(detail::internal_t{}, q.layout(), std::move(dq)),
                         dtensor<T, LK, Bk>(detail::internal_t{}, k.layout(), std::move(dk)),
                         dtensor<T, LK, Bk>(detail::internal_t{}, v.layout(), std::move(dv)));
  }
}

}  // namespace spmd::runtime
