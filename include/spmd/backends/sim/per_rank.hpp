// spmd/backends/sim/per_rank.hpp — run ordinary single-rank code once per rank (PyTorch's
// maybe_run_for_local_tensor): the per-rank arguments are unpacked, the results packed.
//
//   auto slice = [](const std::vector<float>& data, index_t rank) {   // non-SPMD code
//     return host_tensor<float>{{4}, {data.begin() + 4 * rank, data.begin() + 4 * rank + 4}};
//   };
//   auto parts = spmd::sim::per_rank(slice, all, mode.ranks());  // local_tensor<float, M>
//
// Arguments: a local_tensor<T, M> becomes each rank's shard (a strided_view<const T>), a
// local_int<M> each rank's integer; anything else is passed to every call unchanged. All
// per-rank arguments must share one rank set M. f runs once per rank of M, in mesh order.
// Results: a host_tensor<U> per rank makes a local_tensor<U, M>, an integer a local_int<M>,
// void nothing. With no per-rank argument f simply runs once (the "maybe": code written for
// one rank keeps working outside a simulation).
#pragma once

#include <concepts>
#include <type_traits>
#include <utility>

#include "spmd/host/host_tensor.hpp"
#include "spmd/backends/sim/local_int.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/backends/sim/local_tensor.hpp"

#include "spmd/backends/sim/names.hpp"

namespace spmd::sim {

namespace detail {

template <class A>
struct per_rank_arg {  // passed through
  using mesh = void;
  static const A& get(const A& a, index_t) { return a; }
};
template <class T, class M>
struct per_rank_arg<local_tensor<T, M>> {
  using mesh = M;
  static strided_view<const T> get(const local_tensor<T, M>& a, index_t i) {
    return a.shards().view(i);
  }
};
template <class M>
struct per_rank_arg<local_int<M>> {
  using mesh = M;
  static index_t get(const local_int<M>& a, index_t i) { return a.at_index(i); }
};

/// The rank set of the per-rank arguments (void when there is none).
template <class... A>
struct per_rank_mesh {
  using type = void;
};
template <class A, class... R>
struct per_rank_mesh<A, R...> {
  using first = typename per_rank_arg<std::remove_cvref_t<A>>::mesh;
  using rest = typename per_rank_mesh<R...>::type;
  static_assert(std::is_void_v<first> || std::is_void_v<rest> || std::is_same_v<first, rest>,
                "spmd::sim::per_rank: the per-rank arguments are over different rank sets; "
                "every local_tensor and local_int passed must have the same mesh.");
  using type = std::conditional_t<std::is_void_v<first>, rest, first>;
};

}  // namespace detail

template <class F, class... A>
decltype(auto) per_rank(F&& f, const A&... args) {
  using Mesh = typename detail::per_rank_mesh<A...>::type;
  if constexpr (std::is_void_v<Mesh>) {
    return f(args...);
  } else {
    auto call = [&](index_t i) -> decltype(auto) {
      return f(detail::per_rank_arg<A>::get(args, i)...);
    };
    using R = std::remove_cvref_t<decltype(call(0))>;
    if constexpr (std::is_void_v<R>) {
      for (index_t i = 0; i < Mesh::size; ++i) call(i);
    } else if constexpr (std::integral<R> && !std::is_same_v<R, bool>) {
      local_int<Mesh> out;
      for (index_t i = 0; i < Mesh::size; ++i) out.at_index(i) = static_cast<index_t>(call(i));
      return out;
    } else {
      static_assert(detail::host_tensor_traits<R>::value,
                    "spmd::sim::per_rank: f must return a spmd::sim::host_tensor<T>, an "
                    "integer, or void.");
      using T = typename detail::host_tensor_traits<R>::element_type;
      local_set<T> s(Mesh::size);
      for (index_t i = 0; i < Mesh::size; ++i)
        detail::install_shard(s, i, Mesh::rank_at(i), call(i), "per_rank");
      return local_tensor<T, Mesh>(std::move(s));
    }
  }
}

}  // namespace spmd::sim
