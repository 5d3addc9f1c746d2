// tests/pipeline/chain.hpp — a model cut into stages for the pipeline executor's tests: a
// chain of S layers over (rows, width) activations, the rows split over the mesh's dp dim,
//
//   x_{s+1} = tanh(x_s · W_sᵀ)  for s < S − 1,   loss = cross_entropy(x · W_lastᵀ, targets)
//
// every parameter replicated. `stages` runs one microbatch of 4 rows at a time, its loss the
// microbatch's mean over M; `whole` runs the full batch of 4M rows at once: one device's
// step, the reference the pipeline's gradients are compared with.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace chain {

namespace rt = spmd::runtime;
using spmd::index_t;

constexpr index_t rows = 4, width = 6, classes = 5;

/// Deterministic values in [-0.5, 0.5): element i of stream `seed`.
inline double value(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 1;
  x ^= x >> 31;
  x *= 0x94D049BB133111EBull;
  x ^= x >> 29;
  return double(x % 1000003) / 1000003.0 - 0.5;
}
template <class T>
std::vector<T> values(std::uint64_t seed, std::size_t n, double scale = 1.0) {
  std::vector<T> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(scale * value(seed, i));
  return v;
}

/// The parameters of S stages over mesh M and backend B, element T.
template <class T, class M, class B>
struct params {
  using factories = rt::factories<B>;
  using hidden_layout = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<width, width>>;
  using last_layout = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<classes, width>>;
  using hidden_var = decltype(rt::requires_grad(factories::template distribute_tensor<hidden_layout>(std::vector<T>{})));
  using last_var = decltype(rt::requires_grad(factories::template distribute_tensor<last_layout>(std::vector<T>{})));
  std::vector<hidden_var> hidden;  // stages 0 .. S − 2
  std::vector<last_var> last;      // one: stage S − 1

  explicit params(int stages) {
    for (int s = 0; s + 1 < stages; ++s)
      hidden.push_back(rt::requires_grad(
          factories::template distribute_tensor<hidden_layout>(values<T>(100 + std::uint64_t(s), width * width)), "w"));
    last.push_back(rt::requires_grad(
        factories::template distribute_tensor<last_layout>(values<T>(99, classes * width)), "w_last"));
  }
};

/// Every stage's parameter gradient, in stage order: its full value, or none where the
/// parameter has no gradient here (a stage of another process's pipeline rank).
template <class T, class M, class B>
std::vector<std::vector<T>> gradients(params<T, M, B>& p) {
  std::vector<std::vector<T>> g;
  for (auto& w : p.hidden) g.push_back(w.has_grad() ? w.grad().full_tensor() : std::vector<T>{});
  g.push_back(p.last[0].has_grad() ? p.last[0].grad().full_tensor() : std::vector<T>{});
  return g;
}

/// The step's data: Rows × M rows of inputs and their classes.
template <class T>
struct batch {
  int microbatches;
  std::vector<T> x;
  std::vector<std::int64_t> targets;
  explicit batch(int m) : microbatches(m), x(values<T>(7, std::size_t(rows * m * width), 2.0)) {
    for (std::size_t i = 0; i < std::size_t(rows * m); ++i)
      targets.push_back(static_cast<std::int64_t>((value(8, i) + 0.5) * classes) % classes);
  }
};

/// The chain as pipeline stages (runtime/pipeline.hpp), microbatches of `rows` rows.
template <class T, class M, class B>
struct stages {
  using factories = rt::factories<B>;
  using act_layout = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<rows, width>>;
  using target_layout = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<rows>>;
  /// What the stages pass on: the forward's output (on a mesh of one rank the compiler
  /// writes Shard(0) as Replicate, so it is read off the operation, not written here)
  using activation = typename decltype(rt::tanh(rt::matmul_t(
      std::declval<rt::dtensor<T, act_layout, B>>(), std::declval<typename params<T, M, B>::hidden_var>())))::value_type;

  params<T, M, B>& p;
  const batch<T>& data;
  int count;  // stages

  rt::dtensor<T, act_layout, B> input(int m) const {
    const auto first = data.x.begin() + std::ptrdiff_t(m * rows * width);
    return factories::template distribute_tensor<act_layout>(std::vector<T>(first, first + rows * width));
  }
  template <class In>
  auto forward(int s, int m, const In* in) {
    if (in) return rt::tanh(rt::matmul_t(*in, p.hidden[std::size_t(s)]));
    return rt::tanh(rt::matmul_t(input(m), p.hidden[std::size_t(s)]));
  }
  template <class In>
  auto loss(int, int m, const In* in) {
    const auto first = data.targets.begin() + std::ptrdiff_t(m * rows);
    const auto t = factories::template distribute_tensor<target_layout>(std::vector<std::int64_t>(first, first + rows));
    const T share = T(1) / T(data.microbatches);
    if (in) return rt::cross_entropy<classes>(rt::matmul_t(*in, p.last[0]), t) * share;
    return rt::cross_entropy<classes>(rt::matmul_t(input(m), p.last[0]), t) * share;
  }
};

/// One device's step on the whole batch (Rows × Mb rows): the loss; the gradients left in `p`.
template <int Mb, class T, class M, class B>
double whole(params<T, M, B>& p, const batch<T>& data) {
  using factories = rt::factories<B>;
  using L = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<rows * Mb, width>>;
  using LT = spmd::layout<M, spmd::placements<spmd::shard<0>>, spmd::extents<rows * Mb>>;
  const auto x = factories::template distribute_tensor<L>(data.x);
  const auto targets = factories::template distribute_tensor<LT>(data.targets);
  if (p.hidden.empty()) {
    auto loss = rt::cross_entropy<classes>(rt::matmul_t(x, p.last[0]), targets);
    loss.backward();
    return static_cast<double>(loss.value().full_tensor()[0]);
  }
  auto h = rt::tanh(rt::matmul_t(x, p.hidden[0]));
  for (std::size_t s = 1; s < p.hidden.size(); ++s) h = rt::tanh(rt::matmul_t(h, p.hidden[s]));
  auto loss = rt::cross_entropy<classes>(rt::matmul_t(h, p.last[0]), targets);
  loss.backward();
  return static_cast<double>(loss.value().full_tensor()[0]);
}

}  // namespace chain
