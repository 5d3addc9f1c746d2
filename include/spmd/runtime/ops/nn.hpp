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
// active dims are never sharded, so every kernel sees whole rows. The kernels compute in
// double (the simulation checks placements and values, not device arithmetic) and round
// once to the element type. The op's dim comes first among the template arguments (the
// forced output second), as in softmax<Dim>(x).
#pragma once

#include <cmath>
#include <concepts>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

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
      const index_t id = static_cast<index_t>(idx.at(p));
      if (id < 0 || id >= op.vocab)
        throw std::out_of_range("spmd::embedding: index " + std::to_string(id) + " at " +
                                ops::nn_detail::shape_text(p) + " of rank " +
                                std::to_string(info.rank) +
                                "'s indices is outside the vocabulary [0, " +
                                std::to_string(op.vocab) + ")");
      const index_t row = id - first;
      const bool held = row >= 0 && row < rows;
      index_t o = 0;
      for (int d = 0; d < r; ++d) o += p[d] * out.stride(d);
      for (index_t k = 0; k < h; ++k)
        out.data()[o + k * out.stride(r)] = held ? static_cast<U>(w(row, k)) : static_cast<U>(0);
    });
  }
};

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

template <class U, index_t C>
struct op_kernel<ops::one_hot<U, C>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  template <class I>
  static void run(const ops::one_hot<U, C>&, strided_view<U> out, const op_rank_info& info,
                  strided_view<const I> idx) {
    index_t p = 0;
    nn_detail::for_each_index(idx.extents(), [&](const shape_vec& at) {
      const index_t id = static_cast<index_t>(idx.at(at));
      if (id < 0 || id >= C)
        throw std::out_of_range("spmd::one_hot: index " + std::to_string(id) + " at " +
                                ops::nn_detail::shape_text(at) + " of rank " + std::to_string(info.rank) +
                                "'s indices is outside the classes [0, " + std::to_string(C) + ")");
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
