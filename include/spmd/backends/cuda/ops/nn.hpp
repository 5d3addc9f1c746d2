// spmd/backends/cuda/ops/nn.hpp — softmax, log_softmax, layer_norm and embedding on the
// device: one launch for every rank, a thread per row (softmax, layer_norm: in double, as
// the host) or per element.
#pragma once

#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/cuda/backend.hpp"
#include "spmd/backends/cuda/graph.hpp"
#include "spmd/backends/cuda/ops/geometry.hpp"
#include "spmd/runtime/ops/nn.hpp"

namespace spmd::cuda {

namespace detail {

/// Reports the first held rank whose indices the kernel flagged (`bad`: per rank, whether one
/// was outside [0, limit) and which): std::out_of_range naming it, after reading the flags back
/// (one synchronisation). Inside a step_graph's capture the flags are copied at every launch
/// into host memory the graph keeps, and read when the launch has finished (step_graph::wait).
inline void report_bad_index(const device_buffer<index_t>& bad, index_t ranks, index_range held, const char* who,
                             const char* range, index_t limit) {
  const std::size_t bytes = static_cast<std::size_t>(2 * ranks) * sizeof(index_t);
  auto report = [who, range, limit, held](const index_t* flags) {
    for (const index_t i : held)
      if (flags[2 * i] != 0)
        throw std::out_of_range(std::string(who) + ": index " + std::to_string(flags[2 * i + 1]) + " of mesh index " +
                                std::to_string(i) + "'s indices is outside the " + range + " [0, " +
                                std::to_string(limit) + ")");
  };
  if (step_graph* g = capturing_graph()) {
    const index_t* flags = static_cast<const index_t*>(g->keep_host(bytes));
    check(cudaMemcpyAsync(const_cast<index_t*>(flags), bad.data(), bytes, cudaMemcpyDeviceToHost, current_stream()),
          "cudaMemcpyAsync (device to host)");
    g->after_launch([flags, report] { report(flags); });
    return;
  }
  std::vector<index_t> flags(static_cast<std::size_t>(2 * ranks));
  check(cudaMemcpyAsync(flags.data(), bad.data(), bytes, cudaMemcpyDeviceToHost, current_stream()),
        "cudaMemcpyAsync (device to host)");
  synchronize();
  report(flags.data());
}

}  // namespace detail

template <int Dim, bool Log>
struct device_op<spmd::ops::softmax<Dim, Log>> {
  template <class T, class Off>
  static void run(const spmd::ops::softmax<Dim, Log>&, device_set<T>& out, Off&, const device_set<T>& x) {
    auto jobs = make_job_launcher<out_in<T>, softmax_geom>(
        [](const auto& b) { kernels::softmax<Log, T>(b, current_stream()); });
    for (const index_t i : out.held()) {
      const shape_vec& shape = x.shape(i);
      if (shape[Dim] == 0) continue;
      const index_t stride = ops_detail::row_major_strides(shape)[Dim];
      const softmax_geom g{ops_detail::softmax_rows(shape, Dim), shape[Dim], stride, stride};
      jobs.add({out.data(i), x.data(i)}, g, g.rows.count());
    }
    jobs.finish();
  }
};

template <int N, bool Affine>
struct device_op<spmd::ops::layer_norm<N, Affine>> {
  template <class T, class Off, class... WB>
  static void run(const spmd::ops::layer_norm<N, Affine>& op, device_set<T>& out, Off&, const device_set<T>& x,
                  const WB&... wb) {
    const double eps = op.eps;
    auto jobs = make_job_launcher<norm_ptrs<T>, norm_geom>(
        [eps](const auto& batch) { kernels::layer_norm<Affine, T>(batch, eps, current_stream()); });
    for (const index_t i : out.held()) {
      const shape_vec& shape = x.shape(i);
      const auto [outer, inner] = ops_detail::layer_norm_geoms(shape, N);
      const T* w = nullptr;
      const T* b = nullptr;
      if constexpr (Affine) {
        const device_set<T>* p[] = {&wb...};
        w = p[0]->data(i);
        b = p[1]->data(i);
      }
      jobs.add({out.data(i), x.data(i), w, b}, norm_geom{outer, inner}, outer.count());
    }
    jobs.finish();
  }
};

template <int N, bool Affine>
struct device_op<spmd::ops::layer_norm_backward<N, Affine>> {
  template <class T, class Off, class... W>
  static void run(const spmd::ops::layer_norm_backward<N, Affine>& op, device_set<T>& out, Off&,
                  const device_set<T>& g, const device_set<T>& x, const W&... w) {
    const double eps = op.eps;
    auto jobs = make_job_launcher<norm_ptrs<T>, norm_geom>(
        [eps](const auto& batch) { kernels::layer_norm_backward<Affine, T>(batch, eps, current_stream()); });
    for (const index_t i : out.held()) {
      const auto [outer, inner] = ops_detail::layer_norm_geoms(x.shape(i), N);
      const T* pw = nullptr;
      if constexpr (Affine) pw = (w.data(i), ...);
      // norm_ptrs' b carries g (launch.hpp): a block of x's shape, so x's offsets
      jobs.add({out.data(i), x.data(i), pw, g.data(i)}, norm_geom{outer, inner}, outer.count());
    }
    jobs.finish();
  }
};

template <>
struct device_op<spmd::ops::embedding> {
  /// Checks indices on the device and synchronises once to report a bad one (so an embedding
  /// is not captured in a CUDA graph; the lookup itself does not wait).
  template <class T, class I, class Off>
  static void run(const spmd::ops::embedding& op, device_set<T>& out, Off& offsets, const device_set<T>& w,
                  const device_set<I>& idx) {
    device_buffer<index_t> bad(2 * out.ranks());
    check(cudaMemsetAsync(bad.data(), 0, static_cast<std::size_t>(2 * out.ranks()) * sizeof(index_t),
                          current_stream()),
          "cudaMemsetAsync");
    const index_t vocab = op.vocab;
    auto jobs = make_job_launcher<embedding_ptrs<T, I>, embedding_geom>(
        [vocab](const auto& b) { kernels::embedding<T, I>(b, vocab, current_stream()); });
    for (const index_t i : out.held()) {
      const auto off = offsets(i);
      const index_t first = off.in[0][0], rows = w.shape(i)[0], h = w.shape(i)[1];
      jobs.add({out.data(i), w.data(i), idx.data(i), first, bad.data() + 2 * i}, embedding_geom{rows, h},
               out.size(i));
    }
    jobs.finish();
    detail::report_bad_index(bad, out.ranks(), out.held(), "spmd::embedding", "vocabulary", op.vocab);
  }
};

template <class U, index_t C>
struct device_op<spmd::ops::one_hot<U, C>> {
  /// As embedding: checks the indices on the device and synchronises once to report a bad one.
  template <class I, class Off>
  static void run(const spmd::ops::one_hot<U, C>&, device_set<U>& out, Off&, const device_set<I>& idx) {
    device_buffer<index_t> bad(2 * out.ranks());
    check(cudaMemsetAsync(bad.data(), 0, static_cast<std::size_t>(2 * out.ranks()) * sizeof(index_t),
                          current_stream()),
          "cudaMemsetAsync");
    auto jobs = make_job_launcher<one_hot_ptrs<U, I>, no_geom>(
        [](const auto& b) { kernels::one_hot<U, I>(b, C, current_stream()); });
    for (const index_t i : out.held()) jobs.add({out.data(i), idx.data(i), bad.data() + 2 * i}, {}, out.size(i));
    jobs.finish();
    detail::report_bad_index(bad, out.ranks(), out.held(), "spmd::one_hot", "classes", C);
  }
};

}  // namespace spmd::cuda
