// tests/autograd/gradcheck.hpp — every gradient against central finite differences, in f64,
// on the simulation.
//
//   gradcheck::check<LX, LW>([](auto x, auto w) { return sum<>(matmul(x, w) * c); }, {x0, w0});
//
// The function takes one variable per input and returns a scalar variable. The analytic side
// runs backward once; the numeric side perturbs one global element of one input at a time by
// ±h, distributes the perturbed tensor by the same layout, and evaluates the function on
// constants (nothing recorded). Each gradient must also be laid out as its type says: every
// rank's local equals its block of the global gradient.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"

namespace gradcheck {

using spmd::index_t;

/// Every rank's local of g (a non-Partial layout) is its block of the global `full`.
template <class D>
void check_blocks(const D& g, const std::vector<double>& full) {
  using L = typename D::layout_type;
  using M = typename L::mesh_type;
  const auto global = g.shape();
  for (index_t i = 0; i < M::size; ++i) {
    const index_t r = M::rank_at(i);
    const auto t = g.to_local(r);
    const auto off = g.layout().global_offset(r);
    // Walk the local block row-major; map each element to its global index.
    const std::size_t rank = t.shape.size();
    std::vector<index_t> idx(rank, 0);
    for (std::size_t k = 0; k < t.data.size(); ++k) {
      index_t flat = 0;
      for (std::size_t d = 0; d < rank; ++d) flat = flat * global[d] + off[d] + idx[d];
      INFO("rank " << r << " local element " << k);
      REQUIRE(t.data[k] == full[static_cast<std::size_t>(flat)]);
      for (std::size_t d = rank; d-- > 0;) {
        if (++idx[d] < t.shape[d]) break;
        idx[d] = 0;
      }
    }
  }
}

template <class... L, class F, std::size_t... I>
void check_impl(F&& f, const std::array<std::vector<double>, sizeof...(L)>& in, double tol,
                std::index_sequence<I...>) {
  namespace sim = spmd::sim;
  // Analytic.
  auto vars = std::make_tuple(
      sim::requires_grad(sim::distribute_tensor<L>(in[I]), "input " + std::to_string(I))...);
  auto loss = std::apply(f, vars);
  static_assert(decltype(loss)::rank == 0, "gradcheck: the function must return a scalar");
  loss.backward();
  // Numeric: one input perturbed at a time.
  auto value_at = [&](std::size_t which, std::size_t j, double delta) {
    auto x = in;
    x[which][j] += delta;
    auto consts = std::make_tuple(spmd::runtime::as_variable(sim::distribute_tensor<L>(x[I]))...);
    return std::apply(f, consts).full_tensor()[0];
  };
  (
      [&] {
        const auto& v = std::get<I>(vars);
        static_assert(std::is_same_v<typename std::remove_cvref_t<decltype(v)>::grad_type,
                                     sim::dtensor<double, spmd::runtime::grad_layout_t<L>>>);
        const std::vector<double> got = v.grad().full_tensor();
        REQUIRE(got.size() == in[I].size());
        check_blocks(v.grad(), got);
        const double h = 1e-6;
        for (std::size_t j = 0; j < in[I].size(); ++j) {
          const double num = (value_at(I, j, h) - value_at(I, j, -h)) / (2 * h);
          INFO("input " << I << " element " << j << ": analytic " << got[j] << ", numeric " << num);
          CHECK(std::fabs(got[j] - num) <= tol * std::max(1.0, std::fabs(num)));
        }
      }(),
      ...);
}

/// The gradients of f at the inputs `in` (global, row-major), each input distributed by its
/// layout, agree with central differences to `tol` (relative to max(1, |numeric|)).
template <class... L, class F>
void check(F&& f, const std::array<std::vector<double>, sizeof...(L)>& in, double tol = 1e-6) {
  check_impl<L...>(std::forward<F>(f), in, tol, std::index_sequence_for<L...>{});
}

/// n values in [lo, hi), reproducible, none closer than 0.05 to 0 (kinks of relu and abs).
inline std::vector<double> values(std::size_t n, unsigned seed, double lo = -2, double hi = 2) {
  std::vector<double> v(n);
  std::uint64_t s = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = lo + (hi - lo) * static_cast<double>(s >> 11) / 9007199254740992.0;
    if (std::fabs(x) < 0.05) x = x < 0 ? -0.05 - x : 0.05 + x;
  }
  return v;
}

/// A fixed weighting of a function's output so that every gradient element matters.
template <class L>
auto weights(unsigned seed) {
  std::size_t n = 1;
  for (index_t e : L{}.extents().values()) n *= static_cast<std::size_t>(e);
  return spmd::sim::distribute_tensor<L>(values(n, seed, 0.5, 1.5));
}

}  // namespace gradcheck
