// spmd/backends/cuda/ops/elementwise.hpp — the elementwise operators on the device: one
// launch per rank's block, the arithmetic of core/element_math.hpp.
#pragma once

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/backends/cuda/ops/geometry.hpp"
#include "spmd/runtime/ops/elementwise.hpp"

namespace spmd::cuda {

template <class Fn>
struct device_op<spmd::ops::unary<Fn>> {
  template <class T, class Off>
  static void run(const spmd::ops::unary<Fn>&, device_set<T>& out, Off&, const device_set<T>& x) {
    for (const index_t i : out.held())
      kernels::unary<Fn::id, T>(out.data(i), x.data(i), out.size(i), current_stream());
  }
};

template <class Fn>
struct device_op<spmd::ops::binary<Fn>> {
  template <class T, class Off>
  static void run(const spmd::ops::binary<Fn>&, device_set<T>& out, Off&, const device_set<T>& a,
                  const device_set<T>& b) {
    for (const index_t i : out.held()) {
      kernels::binary<Fn::id, T>(out.data(i), a.data(i), b.data(i),
                                 ops_detail::binary_geom(out.shape(i), a.shape(i), b.shape(i)),
                                 current_stream());
    }
  }
};

template <class Fn, bool ScalarLeft, class S>
struct device_op<spmd::ops::with_scalar<Fn, ScalarLeft, S>> {
  template <class T, class Off>
  static void run(const spmd::ops::with_scalar<Fn, ScalarLeft, S>& op, device_set<T>& out, Off&,
                  const device_set<T>& x) {
    const T c = op.value;
    for (const index_t i : out.held())
      kernels::scalar<Fn::id, ScalarLeft, T>(out.data(i), x.data(i), c, out.size(i), current_stream());
  }
};

}  // namespace spmd::cuda
