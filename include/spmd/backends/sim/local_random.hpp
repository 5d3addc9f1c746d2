// spmd/backends/sim/local_random.hpp — random operators on local tensors (LocalTensor's), the
// simulation of a plain tensor on every rank drawn from generators seeded alike.
//
//   spmd::sim::local_mode<spmd::mesh<4>> mode;
//   auto x = mode.rand<float>({2, 3});                 // the same tensor on every rank
//   spmd::sim::normal_(x, 0.0, 1.0);                   // in place, every rank's shard
//   auto y = spmd::sim::dropout(x, 0.5);
//
// Each rank's shard is a whole tensor of its own (a local tensor has no global layout):
// element k of a shard (row-major) is element k of the draw, from the generator's state before
// the call, on every rank, as processes with equally seeded generators would give. Shards of
// equal shape are therefore equal. The generator advances once, by what the largest shard
// reads (random::words_for), so every rank of the simulation ends in the same state.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "spmd/host/random.hpp"
#include "spmd/backends/sim/local_tensor.hpp"
#include "spmd/runtime/random.hpp"

namespace spmd::sim {

// The dtensor overloads alongside these: a name declared here would otherwise hide the
// runtime's (qualified lookup does not follow `using namespace` past a declaration).
using runtime::bernoulli_;
using runtime::dropout;
using runtime::normal_;
using runtime::uniform_;

namespace detail {

/// The draw over shards of the given sizes: the generator's words for the largest one.
template <class T>
random::draw take_local_draw(generator& g, random::draw proto, std::uint64_t largest) {
  runtime::detail::check_random_element<T>();
  const generator_state s = g.take(random::words_for(proto.dist, sizeof(T), largest));
  proto.seed = s.seed;
  proto.offset = s.offset;
  return proto;
}

template <element T, class Mesh>
std::uint64_t largest_shard(const local_tensor<T, Mesh>& x) {
  index_t n = 0;
  for (index_t i = 0; i < Mesh::size; ++i) n = std::max(n, x.shards().size(i));
  return static_cast<std::uint64_t>(n);
}

template <element T, class Mesh>
local_tensor<T, Mesh>& draw_shards(local_tensor<T, Mesh>& x, const random::draw& proto, generator& g) {
  const random::draw d = take_local_draw<T>(g, proto, largest_shard(x));
  for (index_t i = 0; i < Mesh::size; ++i) {
    strided_view<T> v = x.local(Mesh::rank_at(i));
    host::fill_run<T>(d, 0, v.size(), v.data());
  }
  return x;
}

}  // namespace detail

/// Every rank's shard filled with U[from, to) in place.
template <element T, class Mesh>
local_tensor<T, Mesh>& uniform_(local_tensor<T, Mesh>& x, double from = 0.0, double to = 1.0,
                                generator& g = default_generator()) {
  return detail::draw_shards(x, runtime::detail::uniform_draw(from, to, "spmd::sim::uniform_"), g);
}
/// Every rank's shard filled with N(mean, std^2) in place.
template <element T, class Mesh>
local_tensor<T, Mesh>& normal_(local_tensor<T, Mesh>& x, double mean = 0.0, double std = 1.0,
                               generator& g = default_generator()) {
  return detail::draw_shards(x, runtime::detail::normal_draw(mean, std, "spmd::sim::normal_"), g);
}
/// Every rank's shard filled with 1 (probability p) or 0 in place.
template <element T, class Mesh>
local_tensor<T, Mesh>& bernoulli_(local_tensor<T, Mesh>& x, double p = 0.5,
                                  generator& g = default_generator()) {
  const std::uint64_t t = runtime::detail::probability_threshold(p, "spmd::sim::bernoulli_");
  return detail::draw_shards(x, random::draw{random::distribution::bernoulli, 0, 0, p, 0, t}, g);
}
/// Dropout of every rank's shard (x unchanged).
template <element T, class Mesh>
local_tensor<T, Mesh> dropout(const local_tensor<T, Mesh>& x, double p = 0.5,
                              generator& g = default_generator()) {
  const std::uint64_t t = runtime::detail::probability_threshold(p, "spmd::sim::dropout");
  const random::draw d = detail::take_local_draw<T>(
      g, random::draw{random::distribution::dropout, 0, 0, p, 0, t}, detail::largest_shard(x));
  local_tensor<T, Mesh> out(x);
  for (index_t i = 0; i < Mesh::size; ++i) {
    const index_t r = Mesh::rank_at(i);
    strided_view<T> o = out.local(r);
    const T* in = x.local(r).data();
    for (index_t k = 0; k < o.size(); ++k)
      o.data()[k] = random::dropout_at<T>(d, static_cast<std::uint64_t>(k), in[k]);
  }
  return out;
}

/// One tensor of `shape` drawn from g (a plain tensor: what local_mode replicates).
template <element T>
host_tensor<T> random_tensor(std::vector<index_t> shape, const random::draw& proto, generator& g) {
  index_t n = 1;
  for (const index_t e : shape) {
    if (e < 0)
      throw std::invalid_argument("spmd::sim: random tensor shape has a negative size " +
                                  std::to_string(e));
    n *= e;
  }
  const random::draw d = detail::take_local_draw<T>(g, proto, static_cast<std::uint64_t>(n));
  host_tensor<T> t{std::move(shape), std::vector<T>(static_cast<std::size_t>(n))};
  host::fill_run<T>(d, 0, n, t.data.data());
  return t;
}

}  // namespace spmd::sim
