// spmd/runtime/ops/reduction.hpp — reductions of dtensors over compile-time dims: sum, mean, max,
// min, prod (negative dims count from the end; no dims: every dim, a 0-d result).
//
//   auto s = spmd::sim::sum<1>(x);                  // x (4, 8) S(1) -> (4) P(sum)
//   auto m = spmd::sim::mean<-1>(x, spmd::sim::keepdim);   // (4, 1); P(avg) only if even
//   auto t = spmd::sim::max<>(x);                   // every dim: 0-d
//   auto r = spmd::sim::reduce<spmd::ops::reduce_kind::sum, spmd::sim::over<0>, false,
//                              spmd::placements<spmd::replicate>>(x);   // forced output
//
// The dims are a template argument list, so the forced output placements (out_sharding)
// go through `reduce`, whose arguments are all named. The sharding is chosen by the
// compiler (spmd/ops/reduction.hpp has the rules); every rank reduces its own block with one
// pass over it, accumulating in the element type (bfloat16: in float, rounded once at the
// end). A mean divides by the rank's own count of reduced elements: with the reduced dims
// split evenly (the only way a mean is left P(avg)) those local means average to the mean.
// mean needs a floating-point element type (an integer mean would truncate).
#pragma once

#include <array>

#include <type_traits>
#include <vector>

#include "spmd/ops/reduction.hpp"
#include "spmd/host/element.hpp"
#include "spmd/runtime/ops/apply.hpp"

namespace spmd::runtime {

template <ops::reduce_kind Kind, bool KeepDim, int... Dims>
struct op_kernel<ops::reduction<Kind, KeepDim, Dims...>> {
  static constexpr bool rank_independent = true;  // apply.hpp: replicas share results
  using op_type = ops::reduction<Kind, KeepDim, Dims...>;
  // A mean combines as a sum; the division comes last.
  static constexpr reduce_op combine_op = Kind == ops::reduce_kind::mean ? reduce_op::sum : ops::partial_op_of(Kind);

  /// ao[j] = ao[j] ∘ x[j]: each accumulator still takes the rows in order (the same bits),
  /// the row in vector blocks (elementwise.hpp's vector_block: no alias check needed, as the
  /// accumulators are the output or a buffer of their own, never the input).
  template <class Acc, class T>
  static void combine_row(Acc* SPMD_RESTRICT ao, const T* SPMD_RESTRICT x, index_t n) {
    constexpr index_t w = 16;
    index_t j = 0;
    for (; j + w <= n; j += w)
      for (index_t q = 0; q < w; ++q) ao[j + q] = combine<combine_op>(ao[j + q], static_cast<Acc>(x[j + q]));
    for (; j < n; ++j) ao[j] = combine<combine_op>(ao[j], static_cast<Acc>(x[j]));
  }

  // Inlined into apply.hpp's rank loop: out of line, the call and its argument copies were
  // 2-4 % of a small reduction's instructions at -O3 (bench/op_overhead).
  template <class T>
  SPMD_SIM_INLINE static void run(const op_type&, strided_view<T> out, const op_rank_info&, strided_view<const T> in) {
    using Acc = std::conditional_t<is_narrow_float<T>, float, T>;
    const int r = in.rank();
    // Which dims reduce, for each possible rank: a table the compiler fills (the user API
    // has already static_asserted that the dims fit this input's rank).
    static constexpr auto table = [] {
      std::array<ops::reduction_detail::reduced_dims, max_tensor_dims + 1> t{};
      for (int k = 0; k <= max_tensor_dims; ++k) t[static_cast<std::size_t>(k)] = ops::reduction_detail::reduced_of<Dims...>(k);
      return t;
    }();
    const auto& red = table[static_cast<std::size_t>(r)];
    if (red.error != ops::reduction_detail::dims_error::none) op_type::checked(r);  // throws, naming it
    // The output offset of each input dim: 0 where the dim is reduced.
    shape_vec os{};
    os.n = r;
    index_t count = 1;  // reduced elements per output element (this rank's block)
    for (int d = 0, k = 0; d < r; ++d) {
      if (red.of[d]) {
        os[d] = 0;
        count *= in.extent(d);
        if (KeepDim) ++k;
      } else {
        os[d] = out.stride(k++);
      }
    }
    // Accumulate in the output block itself when the element type is the accumulator type
    // (no allocation per call); bfloat16 accumulates in a float buffer.
    std::vector<Acc> acc;
    Acc* a = nullptr;
    if constexpr (std::is_same_v<Acc, T>) {
      a = out.data();
      for (index_t i = 0; i < out.size(); ++i) a[i] = reduction_start<Acc>(combine_op);
    } else {
      acc.assign(static_cast<std::size_t>(out.size()), reduction_start<Acc>(combine_op));
      a = acc.data();
    }
    if (r == 0) {
      a[0] = combine<combine_op>(a[0], static_cast<Acc>(in.data()[0]));
    } else if (in.size() > 0) {
      // Rows of the input's last dim, in memory order (the input block is contiguous).
      const index_t n = in.extent(r - 1), on = os[r - 1];
      shape_vec idx{};
      idx.n = r;
      for (int d = 0; d < r; ++d) idx[d] = 0;
      const T* x = in.data();
      index_t o = 0;
      for (;;) {
        if (on == 0) {  // the last dim is reduced: one accumulator for the row
          Acc s = a[o];
          for (index_t j = 0; j < n; ++j) s = combine<combine_op>(s, static_cast<Acc>(x[j]));
          a[o] = s;
        } else {  // kept: the row lands on a row of accumulators (out rows are contiguous)
          combine_row(a + o, x, n);
        }
        x += n;
        int d = r - 2;
        for (; d >= 0; --d) {
          o += os[d];
          if (++idx[d] < in.extent(d)) break;
          o -= os[d] * in.extent(d);
          idx[d] = 0;
        }
        if (d < 0) break;
      }
    }
    T* y = out.data();
    if constexpr (Kind == ops::reduce_kind::mean) {
      for (index_t i = 0; i < out.size(); ++i) y[i] = static_cast<T>(divide(a[i], count));
    } else if constexpr (!std::is_same_v<Acc, T>) {
      for (index_t i = 0; i < out.size(); ++i) y[i] = static_cast<T>(a[i]);
    }
  }
};

/// A list of dims to reduce, for `reduce`.
template <int... Dims>
struct over {};

/// The tag that keeps reduced dims as extent 1: sum<1>(x, keepdim).
struct keepdim_t {
  explicit keepdim_t() = default;
};
inline constexpr keepdim_t keepdim{};

namespace reduction_detail {

template <ops::reduce_kind Kind, class Over, bool KeepDim>
struct op_of;
template <ops::reduce_kind Kind, int... Dims, bool KeepDim>
struct op_of<Kind, over<Dims...>, KeepDim> {
  using type = ops::reduction<Kind, KeepDim, Dims...>;
  template <int Rank>
  static constexpr ops::reduction_detail::reduced_dims checked = ops::reduction_detail::reduced_of<Dims...>(Rank);
};

}  // namespace reduction_detail

/// Reduce `Kind` over the dims of `Over` (an over<...>; empty: every dim), keeping them as
/// extent 1 when KeepDim; `Forced` output placements when given.
template <ops::reduce_kind Kind, class Over, bool KeepDim = false, class Forced = void, element T, class L, class Bk>
auto reduce(const dtensor<T, L, Bk>& x) {
  using O = reduction_detail::op_of<Kind, Over, KeepDim>;
  constexpr auto dims = O::template checked<static_cast<int>(L::rank)>;
  static_assert(dims.error != ops::reduction_detail::dims_error::out_of_range,
                "spmd::sim::reduce: a reduced dim is outside the tensor's dims (a dim d of a "
                "rank-r tensor needs -r <= d < r).");
  static_assert(dims.error != ops::reduction_detail::dims_error::repeated,
                "spmd::sim::reduce: a reduced dim is listed twice (negative dims count from the end).");
  static_assert(Kind != ops::reduce_kind::mean || is_floating_element<T>,
                "spmd::sim::mean: the mean of an integer dtensor would truncate; convert it to float "
                "or double first.");
  return apply<Forced>(typename O::type{}, x);
}

#define SPMD_SIM_REDUCTION(fname, kind)                                                    \
  template <int... Dims, element T, class L, class Bk>                                              \
  auto fname(const dtensor<T, L, Bk>& x) {                                                    \
    return reduce<ops::reduce_kind::kind, over<Dims...>>(x);                              \
  }                                                                                       \
  template <int... Dims, element T, class L, class Bk>                                              \
  auto fname(const dtensor<T, L, Bk>& x, keepdim_t) {                                         \
    return reduce<ops::reduce_kind::kind, over<Dims...>, true>(x);                        \
  }

// sum<Dims...>(x), and sum<Dims...>(x, keepdim); likewise mean, max, min, prod.
SPMD_SIM_REDUCTION(sum, sum)
SPMD_SIM_REDUCTION(mean, mean)
SPMD_SIM_REDUCTION(max, max)
SPMD_SIM_REDUCTION(min, min)
SPMD_SIM_REDUCTION(prod, prod)
#undef SPMD_SIM_REDUCTION

}  // namespace spmd::runtime
