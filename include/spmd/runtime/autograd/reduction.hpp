// spmd/runtime/autograd/reduction.hpp — sum, mean, max, min on variables.
//
// sum: the gradient spread over the reduced dims; mean: the same divided by the global count
// of reduced elements (not a rank's own count: the mean of the whole tensor is what is
// differentiated, whatever the sharding); max/min (torch.amax/amin): the gradient shared
// evenly among the elements equal to the result (PyTorch's rule for ties).
#pragma once

#include "spmd/runtime/autograd/operand.hpp"
#include "spmd/runtime/autograd/shape_grad.hpp"
#include "spmd/runtime/ops/reduction.hpp"

namespace spmd::runtime {

template <ops::reduce_kind Kind, class Over, bool KeepDim = false, class Forced = void, element T,
          class L, class B, class GP>
auto reduce(const variable<T, L, B, GP>& x) {
  static_assert(Kind != ops::reduce_kind::prod,
                "spmd::autograd: prod has no backward yet; use exp(sum(log(x))) for positive x.");
  auto y = runtime::reduce<Kind, Over, KeepDim, Forced>(x.value());
  constexpr bool keeps_result = Kind == ops::reduce_kind::max || Kind == ops::reduce_kind::min;
  // max and min need their result backwards (which elements won); sum and mean do not.
  auto saved = [&] {
    if constexpr (keeps_result) return share(y);
    else return nullptr;
  }();
  return autograd_detail::make_result(
      std::move(y), ops::reduce_kind_name(Kind),
      [x, saved](const auto& g) {
        using namespace autograd_detail;
        (void)saved;  // a null pointer for sum and mean
        constexpr dim_list D = []<int... Dims>(over<Dims...>) {
          return reduced_dims<static_cast<int>(L::rank), Dims...>();
        }(Over{});
        const auto& xv = x.value();
        // g and the result with the reduced dims back (extent 1); leading reduced dims need
        // none, as broadcasting aligns shapes on the right (a full reduction's 0-d gradient
        // spreads as it is).
        auto gu = [&] {
          if constexpr (KeepDim || is_leading(D)) return g;
          else return unsqueeze_at<D>(g);
        }();
        if constexpr (Kind == ops::reduce_kind::sum) {
          send(x, expand_to(gu, xv));
        } else if constexpr (Kind == ops::reduce_kind::mean) {
          const double n = static_cast<double>(count_over<D>(xv.shape()));
          send(x, expand_to(runtime::div(gu, static_cast<T>(n)), xv));
        } else {
          static_assert(keeps_result);
          auto yu = [&] {
            if constexpr (KeepDim) return *saved;
            else return unsqueeze_at<D>(*saved);
          }();
          auto mask = runtime::equal(xv, yu);
          auto count = runtime::reduce<ops::reduce_kind::sum, Over, true>(mask);
          send(x, runtime::mul(mask, runtime::div(gu, count)));
        }
      },
      x);
}

#define SPMD_AUTOGRAD_REDUCTION(fname, kind)                                                   \
  template <int... Dims, element T, class L, class B, class GP>                                \
  auto fname(const variable<T, L, B, GP>& x) {                                                 \
    return reduce<ops::reduce_kind::kind, over<Dims...>>(x);                                   \
  }                                                                                            \
  template <int... Dims, element T, class L, class B, class GP>                                \
  auto fname(const variable<T, L, B, GP>& x, keepdim_t) {                                      \
    return reduce<ops::reduce_kind::kind, over<Dims...>, true>(x);                             \
  }

SPMD_AUTOGRAD_REDUCTION(sum, sum)
SPMD_AUTOGRAD_REDUCTION(mean, mean)
SPMD_AUTOGRAD_REDUCTION(max, max)
SPMD_AUTOGRAD_REDUCTION(min, min)
#undef SPMD_AUTOGRAD_REDUCTION

}  // namespace spmd::runtime
