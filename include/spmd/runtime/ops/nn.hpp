// spmd/runtime/ops/nn.hpp — softmax, log_softmax, layer_norm and embedding on dtensors.
//
//   auto p = spmd::sim::softmax<1>(x);                  // x S(0): stays S(0), no communication
//   auto l = spmd::sim::log_softmax<-1>(x);             // negative dims count from the end
//   auto y = spmd::sim::layer_norm<1>(x, w, b, 1e-5);   // normalise the last dim
//   auto z = spmd::sim::layer_norm<2>(x);               // no weight, no bias
//   auto e = spmd::sim::embedding(idx, w);              // w S(0): P(sum), the masked partial
//   auto r = spmd::sim::softmax<1, spmd::placements<spmd::replicate>>(x);   // forced output
//
// The sharding rules are in spmd/ops/nn.hpp; the compiler chooses the placements. The
// active dims are never sharded, so every kernel sees whole rows. float rows along a
// contiguous last dim take host/vector_math.hpp's kernels (in float, 16 lanes at a time, the
// same bits on every CPU path: docs/numerics.md); every other case computes in double and
// rounds once to the element type. The op's dim comes first among the template arguments
// (the forced output second), as in softmax<Dim>(x).
//
//   auto gx = spmd::sim::layer_norm_backward<1>(g, x, w, 1e-5);   // layer_norm's input gradient
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "spmd/host/vector_math.hpp"
#include "spmd/ops/nn.hpp"
#include "spmd/runtime/ops/apply.hpp"

namespace spmd::runtime {

namespace nn_detail {

/// Calls f(idx) for every multi-index of `shape`, row-major (once for a rank-0 shape, never
/// for an empty one).
template <class F>
void for_each_index(const shape_vec& shape, F&& f) {
  shape_vec idx{};
  for (index_t e : shape) {
    if (e == 0) return;
    idx.push_back(0);
  }
  for (;;) {
    f(idx);
    int d = shape.size() - 1;
    for (; d >= 0; --d) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

/// Calls f(rows, offset in v0, offset in v...) for runs of rows of the last dim of views of
/// one shape: the dims before the last two walked, the rows of a run at the offsets plus r
/// times each view's row_stride (the index arithmetic once per run, not per element).
template <class F, class V0, class... V>
void for_each_row_run(F&& f, const V0& v0, const V&... v) {
  const int r = v0.rank();
  if (r == 1) return f(index_t{1}, index_t{0}, (void(v), index_t{0})...);
  shape_vec outer{};
  for (int d = 0; d < r - 2; ++d) outer.push_back(v0.extent(d));
  const index_t rows = v0.extent(r - 2);
  for_each_index(outer, [&](const shape_vec& o) {
    auto at = [&](const auto& w) {
      index_t off = 0;
      for (int d = 0; d < o.size(); ++d) off += o[d] * w.stride(d);
      return off;
    };
    f(rows, at(v0), at(v)...);
  });
}

/// The stride between rows of the last dim (the row's length for a rank-1 view).
template <class T>
index_t row_stride(const strided_view<T>& v) {
  return v.rank() >= 2 ? v.stride(v.rank() - 2) : v.extent(0);
}

/// True when every view walks its last dim contiguously (the rank-1 ones: the weights) and
/// the rows are not empty: the row kernels' case.
template <class T, class U, class... V>
bool last_dim_rows(const strided_view<T>& x, const strided_view<U>& out, const V&... v) {
  const int r = x.rank();
  return r >= 1 && x.size() > 0 && x.stride(r - 1) == 1 && out.stride(r - 1) == 1 &&
         ((v.stride(v.rank() - 1) == 1) && ...);
}

/// What an index check names: "<op>: <item> 7 at [0, 3] of rank 1's <items> is outside <range> [0, 5)".
struct index_words {
  const char* op;
  const char* item;
  const char* items;
  const char* range;
};
inline constexpr index_words vocabulary_words{"spmd::embedding", "index", "indices", "the vocabulary"};
inline constexpr index_words target_words{"spmd::cross_entropy", "target", "targets", "the classes"};

/// The index at p of a rank's indices, checked against [0, bound): one outside throws
/// std::out_of_range naming it, its position and the rank (in the op's words).
template <class I>
index_t checked_index(const strided_view<const I>& idx, const shape_vec& p, index_t bound, const op_rank_info& info,
                      const index_words& w) {
  const index_t id = static_cast<index_t>(idx.at(p));
  if (id < 0 || id >= bound)
    throw std::out_of_range(std::string(w.op) + ": " + w.item + " " + std::to_string(id) + " at " +
                            ops::nn_detail::shape_text(p) + " of rank " + std::to_string(info.rank) + "'s " + w.items +
                            " is outside " + w.range + " [0, " + std::to_string(bound) + ")");
  return id;
}

/// The element offset of (outer..., inner...) in a view.
template <class T>
index_t offset_of(const strided_view<T>& v, const shape_vec& outer, const shape_vec& inner) {
  index_t off = 0;
  for (int d = 0; d < outer.size(); ++d) off += outer[d] * v.stride(d);
  for (int d = 0; d < inner.size(); ++d) off += inner[d] * v.stride(outer.size() + d);
  return off;
}

template <class T>
constexpr bool is_floating = is_floating_element<T>;

/// Dim (negative: from the end) as 0..Rank-1, or -1 when outside.
constexpr int normal_dim(int dim, int rank) {
  const int d = dim < 0 ? dim + rank : dim;
  return d >= 0 && d < rank ? d : -1;
}

/// The static extents of x's last N dims and of w agree (dyn agrees with anything).
template <class EX, class EW, int N>
constexpr bool normalised_extents_match() {
  if (EW::rank() != static_cast<std::size_t>(N) || EX::rank() < static_cast<std::size_t>(N))
    return false;
  for (std::size_t d = 0; d < static_cast<std::size_t>(N); ++d) {
    const index_t a = EX::static_extent(EX::rank() - N + d), b = EW::static_extent(d);
    if (a != dyn && b != dyn && a != b) return false;
  }
  return true;
}

}  // namespace nn_detail

template <int Dim, bool Log>
struct op_kernel<ops::softmax<Dim, Log>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class U, class T>
  static void run(const ops::softmax<Dim, Log>&, strided_view<U> out, const op_rank_info&,
                  strided_view<const T> x) {
    if constexpr (std::is_same_v<T, float> && std::is_same_v<U, float>) {
      // float rows along the last, contiguous dim: host/vector_math.hpp's, in float
      if (Dim == x.rank() - 1 && nn_detail::last_dim_rows(x, out)) {
        nn_detail::for_each_row_run([&](index_t rows, index_t ox, index_t oo) {
          host::vector_math::softmax_rows<Log>(x.data() + ox, nn_detail::row_stride(x), out.data() + oo,
                                               nn_detail::row_stride(out), rows, x.extent(Dim));
        }, x, out);
        return;
      }
    }
    shape_vec rows = x.extents();  // one multi-index per row: Dim pinned to 0
    const index_t n = rows[Dim], sx = x.stride(Dim), so = out.stride(Dim);
    if (n == 0) return;  // no rows to normalise (and no element to point at)
    rows[Dim] = 1;
    nn_detail::for_each_index(rows, [&](const shape_vec& i) {
      const T* px = &x.at(i);
      U* po = &out.at(i);
      // Subtracting the row's max keeps exp() in range for any input.
      double m = -std::numeric_limits<double>::infinity();
      for (index_t k = 0; k < n; ++k) m = std::fmax(m, static_cast<double>(px[k * sx]));
      double s = 0;
      for (index_t k = 0; k < n; ++k) s += std::exp(static_cast<double>(px[k * sx]) - m);
      const double log_s = std::log(s);
      for (index_t k = 0; k < n; ++k) {
        const double v = static_cast<double>(px[k * sx]) - m;
        po[k * so] = static_cast<U>(Log ? v - log_s : std::exp(v) / s);
      }
    });
  }
};

template <int N, bool Affine>
struct op_kernel<ops::layer_norm<N, Affine>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class U, class T, class... WB>
  static void run(const ops::layer_norm<N, Affine>& op, strided_view<U> out, const op_rank_info&,
                  strided_view<const T> x, WB... wb) {
    if constexpr (N == 1 && std::is_same_v<T, float> && std::is_same_v<U, float>) {
      if (nn_detail::last_dim_rows(x, out, wb...)) {  // host/vector_math.hpp's rows, in float
        const float* w = nullptr;
        const float* b = nullptr;
        if constexpr (Affine) {
          const float* p[] = {wb.data()...};  // (weight, bias)
          w = p[0];
          b = p[1];
        }
        nn_detail::for_each_row_run([&](index_t rows, index_t ox, index_t oo) {
          host::vector_math::layer_norm_rows(x.data() + ox, nn_detail::row_stride(x), out.data() + oo,
                                             nn_detail::row_stride(out), rows, x.extent(x.rank() - 1), w, b,
                                             static_cast<float>(op.eps));
        }, x, out);
        return;
      }
    }
    const int r = x.rank();
    shape_vec outer{}, inner{};
    for (int d = 0; d < r; ++d) (d < r - N ? outer : inner).push_back(x.extent(d));
    index_t count = 1;
    for (index_t e : inner) count *= e;
    nn_detail::for_each_index(outer, [&](const shape_vec& o) {
      // Two passes (mean, then squared deviations): no cancellation for large means.
      double mean = 0, var = 0;
      nn_detail::for_each_index(inner, [&](const shape_vec& i) {
        mean += static_cast<double>(x.data()[nn_detail::offset_of(x, o, i)]);
      });
      mean /= static_cast<double>(count);
      nn_detail::for_each_index(inner, [&](const shape_vec& i) {
        const double dx = static_cast<double>(x.data()[nn_detail::offset_of(x, o, i)]) - mean;
        var += dx * dx;
      });
      var /= static_cast<double>(count);  // biased, as torch.nn.LayerNorm
      const double inv = 1.0 / std::sqrt(var + op.eps);
      nn_detail::for_each_index(inner, [&](const shape_vec& i) {
        double v = (static_cast<double>(x.data()[nn_detail::offset_of(x, o, i)]) - mean) * inv;
        if constexpr (Affine) v = affine(v, i, wb...);
        out.data()[nn_detail::offset_of(out, o, i)] = static_cast<U>(v);
      });
    });
  }

 private:
  template <class T>
  static double affine(double v, const shape_vec& i, strided_view<const T> w, strided_view<const T> b) {
    return v * static_cast<double>(w.at(i)) + static_cast<double>(b.at(i));
  }
};

template <int N, bool Affine>
struct op_kernel<ops::layer_norm_backward<N, Affine>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class U, class T, class... W>
  static void run(const ops::layer_norm_backward<N, Affine>& op, strided_view<U> out, const op_rank_info&,
                  strided_view<const T> g, strided_view<const T> x, W... w) {
    if constexpr (N == 1 && std::is_same_v<T, float> && std::is_same_v<U, float>) {
      if (nn_detail::last_dim_rows(x, out, g, w...)) {  // host/vector_math.hpp's rows, in float
        const float* pw = nullptr;
        if constexpr (Affine) pw = (w.data(), ...);
        nn_detail::for_each_row_run([&](index_t rows, index_t og, index_t ox, index_t oo) {
          host::vector_math::layer_norm_backward_rows(g.data() + og, nn_detail::row_stride(g), x.data() + ox,
                                                      nn_detail::row_stride(x), pw, out.data() + oo,
                                                      nn_detail::row_stride(out), rows, x.extent(x.rank() - 1),
                                                      static_cast<float>(op.eps));
        }, g, x, out);
        return;
      }
    }
    // Any views and element types: in double, per row (the reference the float rows are
    // tested against, tests/ops/nn).
    const int r = x.rank();
    shape_vec outer{}, inner{};
    for (int d = 0; d < r; ++d) (d < r - N ? outer : inner).push_back(x.extent(d));
    const double count = [&] {
      double c = 1;
      for (index_t e : inner) c *= static_cast<double>(e);
      return c;
    }();
    nn_detail::for_each_index(outer, [&](const shape_vec& o) {
      auto xv = [&](const shape_vec& i) { return static_cast<double>(x.data()[nn_detail::offset_of(x, o, i)]); };
      auto gh = [&](const shape_vec& i) {
        double v = static_cast<double>(g.data()[nn_detail::offset_of(g, o, i)]);
        if constexpr (Affine) v *= static_cast<double>((w.at(i), ...));
        return v;
      };
      double mean = 0, var = 0;
      nn_detail::for_each_index(inner, [&](const shape_vec& i) { mean += xv(i); });
      mean /= count;
      nn_detail::for_each_index(inner, [&](const shape_vec& i) { var += (xv(i) - mean) * (xv(i) - mean); });
      const double rstd = 1.0 / std::sqrt(var / count + op.eps);
      double sum_g = 0, sum_gx = 0;
      nn_detail::for_each_index(inner, [&](const shape_vec& i) {
        sum_g += gh(i);
        sum_gx += gh(i) * (xv(i) - mean) * rstd;
      });
      nn_detail::for_each_index(inner, [&](const shape_vec& i) {
        const double xh = (xv(i) - mean) * rstd;
        out.data()[nn_detail::offset_of(out, o, i)] =
            static_cast<U>(rstd * (gh(i) - sum_g / count - xh * (sum_gx / count)));
      });
    });
  }
};

template <>
struct op_kernel<ops::embedding> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class U, class T, class I>
  static void run(const ops::embedding& op, strided_view<U> out, const op_rank_info& info,
                  strided_view<const T> w, strided_view<const I> idx) {
    // The weight block's rows are [first, first + rows) of the vocabulary: with the weight
    // S(0) a rank holds some rows only and writes zeros for the rest (the masked partial).
    const index_t first = info.in_offset(0)[0], rows = w.extent(0), h = w.extent(1);
    const int r = idx.rank();
    nn_detail::for_each_index(idx.extents(), [&](const shape_vec& p) {
      const index_t id = nn_detail::checked_index(idx, p, op.vocab, info, nn_detail::vocabulary_words);
      const index_t row = id - first;
      const bool held = row >= 0 && row < rows;
      const index_t o = nn_detail::offset_of(out, p, {});
      for (index_t k = 0; k < h; ++k)
        out.data()[o + k * out.stride(r)] = held ? static_cast<U>(w(row, k)) : static_cast<U>(0);
    });
  }
};

template <index_t V>
struct op_kernel<ops::embedding_backward<V>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class T, class I>
  static void run(const ops::embedding_backward<V>&, strided_view<T> out, const op_rank_info& info,
                  strided_view<const T> g, strided_view<const I> idx) {
    // out (V, h) a fresh contiguous block; g's rows (positions, h) and the indices walked in
    // position order, each row added into its index's row: the same order on every backend
    const index_t h = out.extent(1);
    for (index_t k = 0; k < out.size(); ++k) out.data()[k] = T(0);
    const int r = idx.rank();
    nn_detail::for_each_index(idx.extents(), [&](const shape_vec& p) {
      const index_t id = nn_detail::checked_index(idx, p, V, info, nn_detail::vocabulary_words);
      const T* src = g.data() + nn_detail::offset_of(g, p, {});
      T* dst = out.data() + id * h;
      const index_t sh = g.stride(r);
      if (sh == 1)
        for (index_t k = 0; k < h; ++k) dst[k] += src[k];
      else
        for (index_t k = 0; k < h; ++k) dst[k] += src[k * sh];
    });
  }
};

/// embedding's weight gradient from the output's gradient g (indices' shape + (H)): the
/// (Vocab, H) sum of g's rows by index, a scatter-add in position order (deterministic).
/// float and double on host backends (the autograd layer's embedding uses it there).
template <index_t Vocab, class Forced = void, element T, class LG, element I, class LI, class Bk>
auto embedding_backward(const dtensor<T, LG, Bk>& g, const dtensor<I, LI, Bk>& indices) {
  static_assert(host_memory<Bk>, "spmd::embedding_backward: a host backends' operator (the simulation, MPI).");
  static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                "spmd::embedding_backward: the indices must be int32 or int64.");
  static_assert(LG::rank == LI::rank + 1, "spmd::embedding_backward: g must have the indices' dims and one more (H).");
  return apply<Forced>(ops::embedding_backward<Vocab>{}, g, indices);
}

/// softmax along Dim (negative: from the end): exp(x - max) / sum, per row.
template <int Dim, class Forced = void, element T, class L, class Bk>
auto softmax(const dtensor<T, L, Bk>& x) {
  constexpr int d = nn_detail::normal_dim(Dim, static_cast<int>(L::rank));
  static_assert(nn_detail::is_floating<T>,
                "spmd::softmax: the element type must be floating point (float, double, bfloat16).");
  static_assert(d >= 0, "spmd::softmax: Dim is outside the tensor's dims.");
  if constexpr (d >= 0) return apply<Forced>(ops::softmax<d, false>{}, x);
}

/// log_softmax along Dim (negative: from the end): x - max - log(sum(exp(x - max))).
template <int Dim, class Forced = void, element T, class L, class Bk>
auto log_softmax(const dtensor<T, L, Bk>& x) {
  constexpr int d = nn_detail::normal_dim(Dim, static_cast<int>(L::rank));
  static_assert(nn_detail::is_floating<T>,
                "spmd::log_softmax: the element type must be floating point (float, double, "
                "bfloat16).");
  static_assert(d >= 0, "spmd::log_softmax: Dim is outside the tensor's dims.");
  if constexpr (d >= 0) return apply<Forced>(ops::softmax<d, true>{}, x);
}

/// layer_norm over the last NormDims dims, then * weight + bias (both of those extents).
template <int NormDims, class Forced = void, element T, class LX, class LW, class LB, class Bk>
auto layer_norm(const dtensor<T, LX, Bk>& x, const dtensor<T, LW, Bk>& weight, const dtensor<T, LB, Bk>& bias,
                double eps = 1e-5) {
  static_assert(nn_detail::is_floating<T>,
                "spmd::layer_norm: the element type must be floating point (float, double, "
                "bfloat16).");
  static_assert(NormDims >= 1 && static_cast<std::size_t>(NormDims) <= LX::rank,
                "spmd::layer_norm: NormDims must be 1 to the rank of x.");
  constexpr bool ok =
      nn_detail::normalised_extents_match<typename LX::extents_type, typename LW::extents_type, NormDims>() &&
      nn_detail::normalised_extents_match<typename LX::extents_type, typename LB::extents_type, NormDims>();
  static_assert(ok,
                "spmd::layer_norm: the weight and the bias must have the extents of x's last "
                "NormDims dims.");
  if (!(eps >= 0)) throw std::invalid_argument("spmd::layer_norm: eps is " + std::to_string(eps) + ", not >= 0");
  if constexpr (ok && NormDims >= 1 && static_cast<std::size_t>(NormDims) <= LX::rank)
    return apply<Forced>(ops::layer_norm<NormDims, true>{eps}, x, weight, bias);
}

/// layer_norm over the last NormDims dims, without weight and bias.
template <int NormDims, class Forced = void, element T, class LX, class Bk>
auto layer_norm(const dtensor<T, LX, Bk>& x, double eps = 1e-5) {
  static_assert(nn_detail::is_floating<T>,
                "spmd::layer_norm: the element type must be floating point (float, double, "
                "bfloat16).");
  static_assert(NormDims >= 1 && static_cast<std::size_t>(NormDims) <= LX::rank,
                "spmd::layer_norm: NormDims must be 1 to the rank of x.");
  if (!(eps >= 0)) throw std::invalid_argument("spmd::layer_norm: eps is " + std::to_string(eps) + ", not >= 0");
  if constexpr (NormDims >= 1 && static_cast<std::size_t>(NormDims) <= LX::rank)
    return apply<Forced>(ops::layer_norm<NormDims, false>{eps}, x);
}

/// layer_norm's input gradient from the output's gradient g and the input x (both x's shape),
/// with the weight (the normalised extents) when the forward had one: what the autograd
/// layer's layer_norm sends back (runtime/autograd/nn.hpp), in one pass per row.
template <int NormDims, class Forced = void, element T, class LG, class LX, class Bk>
auto layer_norm_backward(const dtensor<T, LG, Bk>& g, const dtensor<T, LX, Bk>& x, double eps) {
  return apply<Forced>(ops::layer_norm_backward<NormDims, false>{eps}, g, x);
}
template <int NormDims, class Forced = void, element T, class LG, class LX, class LW, class Bk>
auto layer_norm_backward(const dtensor<T, LG, Bk>& g, const dtensor<T, LX, Bk>& x, const dtensor<T, LW, Bk>& weight,
                         double eps) {
  return apply<Forced>(ops::layer_norm_backward<NormDims, true>{eps}, g, x, weight);
}

/// The rows of weight (V, H) at `indices` (int32 or int64, any rank up to 7): shape
/// indices' + (H). Throws std::out_of_range naming the index and the rank when one is
/// outside [0, V).
template <class Forced = void, element I, class LI, element T, class LW, class Bk>
auto embedding(const dtensor<I, LI, Bk>& indices, const dtensor<T, LW, Bk>& weight) {
  constexpr bool int_indices = std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>;
  static_assert(int_indices, "spmd::embedding: the indices must be an int32 or int64 dtensor.");
  static_assert(LW::rank == 2, "spmd::embedding: the weight must be a matrix (vocabulary, hidden).");
  static_assert(LI::rank >= 1 && LI::rank < static_cast<std::size_t>(max_tensor_dims),
                "spmd::embedding: the indices must have 1 to 7 dims.");
  if constexpr (int_indices && LW::rank == 2 && LI::rank >= 1 &&
                LI::rank < static_cast<std::size_t>(max_tensor_dims))
    return apply<Forced>(ops::embedding{weight.shape()[0]}, weight, indices);
}

template <index_t C>
struct op_kernel<ops::cross_entropy_rows<C>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class U, class T, class I>
  static void run(const ops::cross_entropy_rows<C>&, strided_view<U> out, const op_rank_info& info,
                  strided_view<const T> x, strided_view<const I> t) {
    const int r = t.rank();
    const index_t sc = x.stride(r);
    nn_detail::for_each_index(t.extents(), [&](const shape_vec& p) {
      const index_t target = nn_detail::checked_index(t, p, C, info, nn_detail::target_words);
      const T* row = x.data() + nn_detail::offset_of(x, p, {});
      if constexpr (std::is_same_v<T, float>) {
        if (sc == 1) {  // host/vector_math.hpp's row, in float
          float lse;
          host::vector_math::logsumexp_rows(row, 0, &lse, 1, C);
          out.data()[nn_detail::offset_of(out, p, {})] = static_cast<U>(lse - row[target]);
          return;
        }
      }
      double m = -std::numeric_limits<double>::infinity(), sum = 0;  // in double: the reference
      for (index_t k = 0; k < C; ++k) m = std::max(m, static_cast<double>(row[k * sc]));
      for (index_t k = 0; k < C; ++k) sum += std::exp(static_cast<double>(row[k * sc]) - m);
      out.data()[nn_detail::offset_of(out, p, {})] =
          static_cast<U>((std::log(sum) + m) - static_cast<double>(row[target * sc]));
    });
  }
};

template <index_t C>
struct op_kernel<ops::cross_entropy_rows_backward<C>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class U, class T, class I>
  static void run(const ops::cross_entropy_rows_backward<C>&, strided_view<U> out, const op_rank_info& info,
                  strided_view<const T> g, strided_view<const T> x, strided_view<const I> t) {
    const int r = t.rank();
    const index_t sc = x.stride(r), so = out.stride(r);
    nn_detail::for_each_index(t.extents(), [&](const shape_vec& p) {
      const index_t target = nn_detail::checked_index(t, p, C, info, nn_detail::target_words);
      const T* row = x.data() + nn_detail::offset_of(x, p, {});
      U* o = out.data() + nn_detail::offset_of(out, p, {});
      if constexpr (std::is_same_v<T, float> && std::is_same_v<U, float>) {
        if (sc == 1 && so == 1) {  // softmax's row in float, then (p − 1 at the target) · g
          const float gr = g.data()[nn_detail::offset_of(g, p, {})];
          host::vector_math::softmax_rows<false>(row, 0, o, 0, 1, C);
          o[target] -= 1.0f;
          for (index_t k = 0; k < C; ++k) o[k] *= gr;
          return;
        }
      }
      const double gr = static_cast<double>(g.data()[nn_detail::offset_of(g, p, {})]);
      double m = -std::numeric_limits<double>::infinity(), sum = 0;
      for (index_t k = 0; k < C; ++k) m = std::max(m, static_cast<double>(row[k * sc]));
      for (index_t k = 0; k < C; ++k) sum += std::exp(static_cast<double>(row[k * sc]) - m);
      for (index_t k = 0; k < C; ++k)
        o[k * so] = static_cast<U>((std::exp(static_cast<double>(row[k * sc]) - m) / sum - (k == target ? 1.0 : 0.0)) * gr);
    });
  }
};

/// Cross entropy's loss of each row, fused (ops/nn.hpp): logits (rows..., C), targets
/// (rows...) int32 or int64 in [0, C); the targets' shape, logsumexp(x) − x[t]. The class dim
/// is gathered where sharded. Throws std::out_of_range naming a target outside [0, C). Host
/// backends (the autograd layer's cross entropy uses it there).
template <index_t C, class Forced = void, element T, class L, element I, class LT, class Bk>
auto cross_entropy_rows(const dtensor<T, L, Bk>& logits, const dtensor<I, LT, Bk>& targets) {
  static_assert(host_memory<Bk>, "spmd::cross_entropy_rows: a host backends' operator (the simulation, MPI).");
  static_assert(std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>,
                "spmd::cross_entropy_rows: the targets must be int32 or int64.");
  static_assert(L::rank == LT::rank + 1, "spmd::cross_entropy_rows: the logits must have the targets' dims and one more (C).");
  static_assert(L::extents_type::static_extent(L::rank - 1) == C,
                "spmd::cross_entropy_rows: C must be the logits' static class extent (the last dim).");
  return apply<Forced>(ops::cross_entropy_rows<C>{}, logits, targets);
}

/// Its gradient from the rows' gradient g (the targets' shape): g · (softmax(x) − one_hot(t)).
template <index_t C, class Forced = void, element T, class LG, class L, element I, class LT, class Bk>
auto cross_entropy_rows_backward(const dtensor<T, LG, Bk>& g, const dtensor<T, L, Bk>& logits,
                                 const dtensor<I, LT, Bk>& targets) {
  static_assert(host_memory<Bk>, "spmd::cross_entropy_rows: a host backends' operator (the simulation, MPI).");
  return apply<Forced>(ops::cross_entropy_rows_backward<C>{}, g, logits, targets);
}

template <class U, index_t C>
struct op_kernel<ops::one_hot<U, C>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class I>
  static void run(const ops::one_hot<U, C>&, strided_view<U> out, const op_rank_info& info,
                  strided_view<const I> idx) {
    index_t p = 0;
    nn_detail::for_each_index(idx.extents(), [&](const shape_vec& at) {
      const index_t id = nn_detail::checked_index(idx, at, C, info, {"spmd::one_hot", "index", "indices", "the classes"});
      U* row = out.data() + p * C;  // out is a fresh contiguous block (..., C)
      for (index_t k = 0; k < C; ++k) row[k] = static_cast<U>(k == id ? 1 : 0);
      ++p;
    });
  }
};

/// (indices' shape, Classes) of element type U: 1 at each index's class, 0 elsewhere
/// (torch.nn.functional.one_hot). Throws std::out_of_range naming an index outside
/// [0, Classes) and the rank holding it.
template <element U, index_t Classes, class Forced = void, element I, class LI, class Bk>
auto one_hot(const dtensor<I, LI, Bk>& indices) {
  constexpr bool int_indices = std::is_same_v<I, std::int32_t> || std::is_same_v<I, std::int64_t>;
  static_assert(int_indices, "spmd::one_hot: the indices must be an int32 or int64 dtensor.");
  static_assert(LI::rank < static_cast<std::size_t>(max_tensor_dims),
                "spmd::one_hot: the indices must have at most 7 dims.");
  if constexpr (int_indices) return apply<Forced>(ops::one_hot<U, Classes>{}, indices);
}

}  // namespace spmd::runtime
