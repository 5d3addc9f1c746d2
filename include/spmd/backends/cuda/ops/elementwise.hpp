// spmd/backends/cuda/ops/elementwise.hpp — the elementwise operators on the device: one
// launch for every rank's block (job_batch.hpp), the arithmetic of core/element_math.hpp.
#pragma once

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/backends/cuda/ops/geometry.hpp"
#include "spmd/runtime/ops/elementwise.hpp"

namespace spmd::cuda {

template <class Fn>
struct device_op<spmd::ops::unary<Fn>> {
  template <class T, class Off>
  static void run(const spmd::ops::unary<Fn>&, device_set<T>& out, Off&, const device_set<T>& x) {
    auto jobs = make_job_launcher<out_in<T>, no_geom>(
        [](const auto& b) { kernels::unary<Fn::id, T>(b, current_stream()); });
    for (const index_t i : out.held()) jobs.add({out.data(i), x.data(i)}, {}, out.size(i));
    jobs.finish();
  }
};

template <class Fn>
struct device_op<spmd::ops::binary<Fn>> {
  template <class T, class Off>
  static void run(const spmd::ops::binary<Fn>&, device_set<T>& out, Off&, const device_set<T>& a,
                  const device_set<T>& b) {
    auto jobs = make_job_launcher<out_ab<T>, index_geom>(
        [](const auto& batch) { kernels::binary<Fn::id, T>(batch, current_stream()); });
    for (const index_t i : out.held())
      jobs.add({out.data(i), a.data(i), b.data(i)}, ops_detail::binary_geom(out.shape(i), a.shape(i), b.shape(i)),
               out.size(i));
    jobs.finish();
  }
};

template <class Fn, bool ScalarLeft, class S>
struct device_op<spmd::ops::with_scalar<Fn, ScalarLeft, S>> {
  template <class T, class Off>
  static void run(const spmd::ops::with_scalar<Fn, ScalarLeft, S>& op, device_set<T>& out, Off&,
                  const device_set<T>& x) {
    const T c = op.value;
    auto jobs = make_job_launcher<out_in<T>, no_geom>(
        [c](const auto& b) { kernels::scalar<Fn::id, ScalarLeft, T>(b, c, current_stream()); });
    for (const index_t i : out.held()) jobs.add({out.data(i), x.data(i)}, {}, out.size(i));
    jobs.finish();
  }
};

}  // namespace spmd::cuda
