// spmd/backends/sim/local_mode.hpp — LocalTensorMode's job as a value: factories that make a local
// tensor over a rank set, and the per-rank constructors bound to that set.
//
//   constexpr spmd::sim::local_mode<spmd::mesh<4>> mode;     // LocalTensorMode(4)
//   auto x = mode.ones<float>({2, 3});                        // a local_tensor, 4 ranks
//   auto n = mode.randn<float>({2, 3}, gen);                  // the same draw on every rank
//   auto r = mode.rank_map([](auto rank) { ... });            // f(rank) per rank
//   auto ranks = mode.ranks();                                // local_int: each rank's id
//   auto plain = spmd::sim::host_tensor<float>::ones({2, 2}); // "mode.disable()": one tensor
//
// PyTorch's mode is a global switch that makes torch.ones return a LocalTensor while it is on.
// spmd has no global state: the rank set is a type, so "inside the mode" is calling the
// mode's factories, and "disabled" is calling host_tensor's. Nothing else changes behaviour
// behind the caller's back, and two modes over different rank sets can live side by side.
#pragma once

#include <utility>
#include <vector>

#include "spmd/host/element.hpp"
#include "spmd/host/host_tensor.hpp"
#include "spmd/backends/sim/local_int.hpp"
#include "spmd/backends/sim/local_random.hpp"
#include "spmd/backends/sim/local_tensor.hpp"

#include "spmd/backends/sim/names.hpp"

namespace spmd::sim {

template <class Mesh>
struct local_mode {
  using mesh_type = Mesh;
  static constexpr index_t world_size = Mesh::size;

  /// The same tensor on every rank.
  template <element T>
  static local_tensor<T, Mesh> tensor(const host_tensor<T>& t) {
    return local_tensor<T, Mesh>::replicated(t);
  }
  template <element T>
  static local_tensor<T, Mesh> full(std::vector<index_t> shape, T value) {
    return tensor(host_tensor<T>::full(std::move(shape), value));
  }
  template <element T>
  static local_tensor<T, Mesh> zeros(std::vector<index_t> shape) {
    return tensor(host_tensor<T>::zeros(std::move(shape)));
  }
  template <element T>
  static local_tensor<T, Mesh> ones(std::vector<index_t> shape) {
    return tensor(host_tensor<T>::ones(std::move(shape)));
  }
  template <element T>
  static local_tensor<T, Mesh> arange(std::vector<index_t> shape) {
    return tensor(host_tensor<T>::arange(std::move(shape)));
  }

  /// U[0, 1) of `shape`, the same on every rank (torch.rand under the mode; local_random.hpp).
  template <element T>
  static local_tensor<T, Mesh> rand(std::vector<index_t> shape, generator& g = default_generator()) {
    return tensor(random_tensor<T>(std::move(shape),
                                   runtime::detail::uniform_draw(0.0, 1.0, "spmd::sim::local_mode::rand"), g));
  }
  /// N(0, 1) of `shape`, the same on every rank (torch.randn under the mode).
  template <element T>
  static local_tensor<T, Mesh> randn(std::vector<index_t> shape, generator& g = default_generator()) {
    return tensor(random_tensor<T>(std::move(shape),
                                   runtime::detail::normal_draw(0.0, 1.0, "spmd::sim::local_mode::randn"), g));
  }

  /// Each rank's id, as a per-rank integer.
  static local_int<Mesh> ranks() {
    local_int<Mesh> r;
    for (index_t i = 0; i < Mesh::size; ++i) r.at_index(i) = Mesh::rank_at(i);
    return r;
  }
  /// sim::rank_map over this rank set.
  template <class F>
  static auto rank_map(F&& f) {
    return sim::rank_map<Mesh>(std::forward<F>(f));
  }
  /// sim::tensor_map (the rank set is x's).
  template <element T, class F>
  static auto tensor_map(const local_tensor<T, Mesh>& x, F&& f) {
    return sim::tensor_map(x, std::forward<F>(f));
  }
};

}  // namespace spmd::sim
