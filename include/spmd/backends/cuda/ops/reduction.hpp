// spmd/backends/cuda/ops/reduction.hpp — sum, mean, max, min, prod over dims on the device:
// one launch for every rank, one thread per output element, meeting its inputs in the host
// kernel's order.
#pragma once

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/backends/cuda/ops/geometry.hpp"
#include "spmd/runtime/ops/reduction.hpp"

namespace spmd::cuda {

template <spmd::ops::reduce_kind Kind, bool KeepDim, int... Dims>
struct device_op<spmd::ops::reduction<Kind, KeepDim, Dims...>> {
  using op_type = spmd::ops::reduction<Kind, KeepDim, Dims...>;
  static constexpr bool mean = Kind == spmd::ops::reduce_kind::mean;
  static constexpr reduce_op combine_op = mean ? reduce_op::sum : spmd::ops::partial_op_of(Kind);

  template <class T, class Off>
  static void run(const op_type&, device_set<T>& out, Off&, const device_set<T>& in) {
    if constexpr (mean && !is_floating_element<T>) {
      return;  // refused before the backend runs (ops::reduction)
    } else {
      auto jobs = make_job_launcher<out_in<T>, reduce_geom>([](const auto& b) {
        if constexpr (mean) kernels::reduce<reduce_op::sum, true, T>(b, current_stream());
        else kernels::reduce<combine_op, false, T>(b, current_stream());
      });
      for (const index_t i : out.held()) {
        const shape_vec& shape = in.shape(i);
        const int r = shape.size();
        const auto red = spmd::ops::reduction_detail::reduced_of<Dims...>(r);
        if (red.error != spmd::ops::reduction_detail::dims_error::none) op_type::checked(r);  // throws
        const auto [kept, reduced] = ops_detail::reduction_geoms(shape, red.of);
        jobs.add({out.data(i), in.data(i)}, reduce_geom{kept, reduced}, kept.count());
      }
      jobs.finish();
    }
  }
};

}  // namespace spmd::cuda
