// tests/ops/common/op_test.hpp — what the operator tests share: seeded inputs, sharding a
// one-device tensor by a layout type, sweeping placements, and comparing a dtensor with the
// one-device result.
//
//   const auto a = op_test::random<float>({5, 3}, seed);          // host_tensor (one device)
//   op_test::for_each_placements<spmd::mesh<2, 2>, 2>([&]<class P>() {   // R, S(d), P(sum)
//     using L = spmd::layout<M, P, spmd::extents<5, 3>>;
//     auto x = spmd::sim::distribute_tensor<L>(a.data);             // Partial: exact split
//     op_test::check_close(spmd::sim::relu(x), expected, 1e-6);      // full_tensor vs expected
//   });
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>
#include <catch2/catch.hpp>

#include "spmd/backends/sim/sim.hpp"

namespace op_test {

using spmd::index_t;
using spmd::sim::host_tensor;

/// Values in [lo, hi), reproducible from the seed (integers: whole numbers in that range).
template <class T>
host_tensor<T> random(std::vector<index_t> shape, unsigned seed, double lo = -2, double hi = 2) {
  auto t = host_tensor<T>::zeros(std::move(shape));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  for (T& v : t.data) {
    const double x = u(rng);
    v = static_cast<T>(std::is_integral_v<T> ? std::floor(x) : x);
  }
  return t;
}

namespace detail {
// The placement types a sweep uses on one mesh dim for a tensor of rank R.
template <class I>
using shard_of = spmd::shard<I::value>;
template <int R>
using shards = boost::mp11::mp_transform<shard_of, boost::mp11::mp_iota_c<R>>;
template <int R, bool WithMax>
using choices = boost::mp11::mp_append<
    boost::mp11::mp_list<spmd::replicate>, shards<R>,
    boost::mp11::mp_list<spmd::partial<spmd::reduce_op::sum>>,
    std::conditional_t<WithMax, boost::mp11::mp_list<spmd::partial<spmd::reduce_op::max>>,
                       boost::mp11::mp_list<>>>;
template <class... P>
using as_placements = spmd::placements<P...>;
template <class... Lists>
using product_of = boost::mp11::mp_product<as_placements, Lists...>;
}  // namespace detail

/// Calls f.template operator()<spmd::placements<...>>() for every placement list over the
/// mesh's dims drawn from {R, S(0..R-1), P(sum)} (and P(max) when WithMax). Lists mixing two
/// partial ops are skipped (not layouts).
template <class Mesh, int R, bool WithMax = false, class F>
void for_each_placements(F&& f) {
  using C = detail::choices<R, WithMax>;
  using all = boost::mp11::mp_apply<detail::product_of,
                                    boost::mp11::mp_repeat_c<boost::mp11::mp_list<C>, Mesh::ndim>>;
  boost::mp11::mp_for_each<boost::mp11::mp_transform<std::type_identity, all>>([&](auto id) {
    using P = typename decltype(id)::type;
    constexpr spmd::placement_vec v = P::value();
    constexpr bool mixed = [&] {
      for (int a = 0; a < v.size(); ++a)
        for (int b = 0; b < v.size(); ++b)
          if (v[a].is_partial() && v[b].is_partial() && v[a].op != v[b].op) return true;
      return false;
    }();
    if constexpr (!mixed) f.template operator()<P>();
  });
}

/// "[S(0), R]" for messages.
template <class P>
std::string placements_text() {
  std::ostringstream s;
  s << '[';
  const spmd::placement_vec v = P::value();
  for (int m = 0; m < v.size(); ++m) {
    if (m) s << ", ";
    if (v[m].is_shard()) s << "S(" << v[m].dim << ')';
    else if (v[m].is_partial()) s << "P(" << spmd::reduce_op_name(v[m].op) << ')';
    else s << 'R';
  }
  s << ']';
  return s.str();
}

/// Largest |a - b| over two equal-size ranges (infinity when the sizes differ).
template <class A, class B>
double max_abs_diff(const A& a, const B& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (!std::isnan(x)) d = std::max(d, std::fabs(x - y));
  }
  return d;
}

/// The dtensor's global value equals `expected` (shape and values within `tol`, relative to
/// max(1, |expected|)).
template <class T, class L, class E>
void check_close(const spmd::sim::dtensor<T, L>& y, const host_tensor<E>& expected, double tol) {
  std::vector<index_t> shape;
  for (index_t e : y.shape()) shape.push_back(e);
  REQUIRE(shape == expected.shape);
  const std::vector<T> got = y.full_tensor();
  double worst = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double x = static_cast<double>(got[i]), w = static_cast<double>(expected.data[i]);
    const double err = (std::isnan(x) && std::isnan(w)) ? 0 : std::fabs(x - w) / std::max(1.0, std::fabs(w));
    worst = std::max(worst, std::isnan(err) ? INFINITY : err);
  }
  INFO("worst relative error " << worst);
  CHECK(worst <= tol);
}

}  // namespace op_test
