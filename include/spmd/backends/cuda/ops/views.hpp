// spmd/backends/cuda/ops/views.hpp — transpose, permute, the reshapes and cat on the device:
// strided copies, every rank's (and every part's of a cat) in one launch (a view's local
// block is a fresh contiguous block, as on the host).
#pragma once

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/backends/cuda/ops/geometry.hpp"
#include "spmd/runtime/ops/cat.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace spmd::cuda {

namespace ops_detail {

/// Collects strided copies (one or more per rank) into one launch.
template <class T>
auto copy_jobs() {
  return make_job_launcher<out_in<T>, index_geom>([](const auto& b) { kernels::copy<T>(b, current_stream()); });
}

/// out (contiguous) = in read with its dims in the order `perm`.
template <class T, class Jobs>
void permuted_copy(Jobs& jobs, device_set<T>& out, const device_set<T>& in, index_t i, const shape_vec& perm) {
  jobs.add({out.data(i), in.data(i)}, permute_geom(out.shape(i), in.shape(i), perm), out.size(i));
}

/// The same elements in row-major order, a new shape.
template <class T, class Jobs>
void flat_copy(Jobs& jobs, device_set<T>& out, const device_set<T>& in, index_t i) {
  if (out.size(i) != in.size(i))
    throw std::logic_error("spmd::cuda: a reshape's local block has " + std::to_string(in.size(i)) +
                           " elements, its output block " + std::to_string(out.size(i)));
  shape_vec flat{};
  flat.push_back(out.size(i));
  jobs.add({out.data(i), in.data(i)}, contiguous_geom(flat), out.size(i));
}

/// Reshapes of every kind: a flat copy per rank, one launch.
struct reshape_op {
  template <class Op, class T, class Off>
  static void run(const Op&, device_set<T>& out, Off&, const device_set<T>& in) {
    auto jobs = copy_jobs<T>();
    for (const index_t i : out.held()) flat_copy(jobs, out, in, i);
    jobs.finish();
  }
};

}  // namespace ops_detail

template <int D0, int D1>
struct device_op<spmd::ops::transpose<D0, D1>> {
  template <class T, class Off>
  static void run(const spmd::ops::transpose<D0, D1>&, device_set<T>& out, Off&, const device_set<T>& in) {
    auto jobs = ops_detail::copy_jobs<T>();
    for (const index_t i : out.held()) {
      shape_vec perm{};
      for (int d = 0; d < in.shape(i).size(); ++d) perm.push_back(d == D0 ? D1 : d == D1 ? D0 : d);
      ops_detail::permuted_copy(jobs, out, in, i, perm);
    }
    jobs.finish();
  }
};

template <int... P>
struct device_op<spmd::ops::permute<P...>> {
  template <class T, class Off>
  static void run(const spmd::ops::permute<P...>&, device_set<T>& out, Off&, const device_set<T>& in) {
    auto jobs = ops_detail::copy_jobs<T>();
    for (const index_t i : out.held())
      ops_detail::permuted_copy(jobs, out, in, i, shape_vec{{P...}, static_cast<int>(sizeof...(P))});
    jobs.finish();
  }
};

template <int D>
struct device_op<spmd::ops::squeeze<D>> : ops_detail::reshape_op {};
template <int D>
struct device_op<spmd::ops::unsqueeze<D>> : ops_detail::reshape_op {};
template <int S, int E>
struct device_op<spmd::ops::flatten<S, E>> : ops_detail::reshape_op {};
template <index_t... E>
struct device_op<spmd::ops::reshape<E...>> : ops_detail::reshape_op {};

template <int Dim>
struct device_op<spmd::ops::cat<Dim>> {
  template <class T, class Off, class... In>
  static void run(const spmd::ops::cat<Dim>&, device_set<T>& out, Off&, const In&... in) {
    auto jobs = ops_detail::copy_jobs<T>();
    for (const index_t i : out.held()) {
      const shape_vec os = ops_detail::row_major_strides(out.shape(i));
      index_t offset = 0;
      auto place = [&](const device_set<T>& part) {
        const shape_vec& ps = part.shape(i);
        if (part.size(i) == 0) return;
        jobs.add({out.data(i) + offset * os[Dim], part.data(i)}, ops_detail::cat_part_geom(out.shape(i), ps),
                 part.size(i));
        offset += ps[Dim];
      };
      (place(in), ...);
    }
    jobs.finish();
  }
};

template <int Dim, index_t Start, index_t Len>
struct device_op<spmd::ops::narrow<Dim, Start, Len>> {
  template <class T, class Off>
  static void run(const spmd::ops::narrow<Dim, Start, Len>&, device_set<T>& out, Off&, const device_set<T>& in) {
    auto jobs = ops_detail::copy_jobs<T>();
    for (const index_t i : out.held()) {
      if (out.size(i) == 0) continue;
      const shape_vec& is = in.shape(i);
      shape_vec perm{};
      for (int d = 0; d < is.size(); ++d) perm.push_back(d);
      // Contiguous output, the input read at its own strides from the slice's first element.
      jobs.add({out.data(i), in.data(i) + Start * ops_detail::row_major_strides(is)[Dim]},
               ops_detail::permute_geom(out.shape(i), is, perm), out.size(i));
    }
    jobs.finish();
  }
};

}  // namespace spmd::cuda
