// spmd/runtime/random.hpp — random operators on dtensors, over any backend: the same global
// tensor for every mesh, placement list, backend and rank count.
//
//   spmd::manual_seed(42);
//   auto w = spmd::sim::randn<float, L>();                  // the default generator
//   spmd::generator g(7);
//   auto u = spmd::sim::rand<float, L>(g);                  // U[0, 1), g advanced
//   spmd::sim::uniform_(u, -0.1, 0.1, g);                   // in place
//   spmd::sim::normal_(u, 0.0, 0.02);  spmd::sim::bernoulli_(u, 0.3);
//   auto y = spmd::sim::dropout(u, 0.1, g);                 // same layout as u
//
// DTensor's guarantees hold with no communication: shards get distinct values, replicas equal
// values, and every rank's generator advances by the same amount (random::words_for: the
// operator, the element type and the global shape; never the layout or the rank). spmd adds
// one: element i of the global tensor is a function of (seed, offset, i) alone
// (random/draw.hpp), so redistributing, or generating under another layout or on one device,
// gives the same bits.
//
// Partial placements (DTensor refuses random operators on them; spmd chooses):
//   - rand, randn, uniform_, normal_, bernoulli_ give the drawn tensor as the *global* value
//     with the factories' rule (sum, product: the first member of each partial group holds
//     the value, the others the identity; avg, max, min: every member);
//   - dropout keeps P(sum) and P(avg) (every member applies the same mask and scale, so the
//     reduction of the results is the dropout of the reduction); P(max), P(min) and
//     P(product) do not commute with it and fail to compile.
// Elements are f32, f64, bf16 or f16 (an integer type fails to compile). Bad arguments (from >
// to, a negative std, p outside [0, 1], NaN) throw std::invalid_argument naming the value and
// leave the tensor and the generator as they were.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "spmd/host/random.hpp"
#include "spmd/random/draw.hpp"
#include "spmd/random/generator.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd::runtime {

using spmd::default_generator;
using spmd::generator;
using spmd::generator_state;
using spmd::manual_seed;

namespace detail {

template <class T>
constexpr void check_random_element() {
  static_assert(random::random_element<T>,
                "spmd: random operators fill floating-point tensors (f32, f64, bf16, f16); for "
                "integers draw floats and convert.");
}

inline double finite_arg(double v, const char* who, const char* what) {
  if (!std::isfinite(v))
    throw std::invalid_argument(std::string(who) + ": " + what + " is " + std::to_string(v) +
                                ", it must be finite");
  return v;
}
inline std::uint64_t probability_threshold(double p, const char* who) {
  if (!(p >= 0.0 && p <= 1.0))
    throw std::invalid_argument(std::string(who) + ": p is " + std::to_string(p) +
                                ", it must be in [0, 1]");
  return static_cast<std::uint64_t>(std::ldexp(p, 32));  // floor(p 2^32): exact, <= 2^32
}

/// The operator's draw over a tensor of `global` shape, taking its words from g (after every
/// check, so a refused call leaves g as it was).
template <class T>
random::draw take_draw(generator& g, random::distribution dist, const shape_vec& global, double a,
                       double b, std::uint64_t threshold) {
  std::uint64_t n = 1;
  for (const index_t e : global) n *= static_cast<std::uint64_t>(e);
  const generator_state s = g.take(random::words_for(dist, sizeof(T), n));
  return {dist, s.seed, s.offset, a, b, threshold};
}

/// Fills x's locals (each rank its own block) with the draw d.
template <element T, class L, class B>
void fill_random(dtensor<T, L, B>& x, const random::draw& d) {
  const shape_vec global = x.layout().extents().to_vec();
  if constexpr (host_memory<B>) host::fill_locals<T>(x.locals(internal_t{}), L::spec(), global, d);
  else B::template fill_random<T>(x.locals(internal_t{}), L::spec(), global, d);
}

inline random::draw uniform_draw(double from, double to, const char* who) {
  finite_arg(from, who, "from");
  finite_arg(to, who, "to");
  if (!(from <= to))
    throw std::invalid_argument(std::string(who) + ": from " + std::to_string(from) +
                                " is greater than to " + std::to_string(to));
  return {random::distribution::uniform, 0, 0, from, to, 0};
}
inline random::draw normal_draw(double mean, double std, const char* who) {
  finite_arg(mean, who, "mean");
  finite_arg(std, who, "std");
  if (std < 0)
    throw std::invalid_argument(std::string(who) + ": std is " + std::to_string(std) +
                                ", it must be >= 0");
  return {random::distribution::normal, 0, 0, mean, std, 0};
}

/// Draws `proto` (parameters checked) over x: takes the words, then fills.
template <element T, class L, class B>
dtensor<T, L, B>& draw_into(dtensor<T, L, B>& x, random::draw proto, generator& g) {
  check_random_element<T>();
  const random::draw d =
      take_draw<T>(g, proto.dist, x.layout().extents().to_vec(), proto.a, proto.b, proto.threshold);
  fill_random(x, d);
  return x;
}

}  // namespace detail

/// rand and randn as factories of backend B (spmd::<backend>::rand<T, Layout>(gen)).
template <class B>
struct random_factories {
  /// U[0, 1) (torch.rand).
  template <element T, class Layout>
  static dtensor<T, Layout, B> rand(generator& g, const Layout& layout) {
    return drawn<T>(layout, detail::uniform_draw(0.0, 1.0, "spmd::rand"), g);
  }
  /// N(0, 1) (torch.randn).
  template <element T, class Layout>
  static dtensor<T, Layout, B> randn(generator& g, const Layout& layout) {
    return drawn<T>(layout, detail::normal_draw(0.0, 1.0, "spmd::randn"), g);
  }

 private:
  template <element T, class Layout>
  static dtensor<T, Layout, B> drawn(const Layout& layout, const random::draw& proto, generator& g) {
    detail::check_random_element<T>();
    dtensor<T, Layout, B> x = factories<B>::template empty<T>(layout);
    detail::draw_into(x, proto, g);
    return x;
  }
};

/// Fills x with U[from, to) in place (Tensor.uniform_).
template <element T, class L, class B>
dtensor<T, L, B>& uniform_(dtensor<T, L, B>& x, double from = 0.0, double to = 1.0,
                           generator& g = default_generator()) {
  return detail::draw_into(x, detail::uniform_draw(from, to, "spmd::uniform_"), g);
}
/// Fills x with N(mean, std^2) in place (Tensor.normal_).
template <element T, class L, class B>
dtensor<T, L, B>& normal_(dtensor<T, L, B>& x, double mean = 0.0, double std = 1.0,
                          generator& g = default_generator()) {
  return detail::draw_into(x, detail::normal_draw(mean, std, "spmd::normal_"), g);
}
/// Fills x with 1 (probability p) or 0 in place (Tensor.bernoulli_(p)).
template <element T, class L, class B>
dtensor<T, L, B>& bernoulli_(dtensor<T, L, B>& x, double p = 0.5, generator& g = default_generator()) {
  const std::uint64_t t = detail::probability_threshold(p, "spmd::bernoulli_");
  return detail::draw_into(x, random::draw{random::distribution::bernoulli, 0, 0, p, 0, t}, g);
}

/// Dropout in training (torch.nn.functional.dropout): each element zeroed with probability p,
/// the others scaled by 1 / (1 - p); x is unchanged and the result has x's layout.
template <element T, class L, class B>
dtensor<T, L, B> dropout(const dtensor<T, L, B>& x, double p = 0.5, generator& g = default_generator()) {
  detail::check_random_element<T>();
  static_assert(!holds_partial(L::nominal_spec().placements, reduce_op::max) &&
                    !holds_partial(L::nominal_spec().placements, reduce_op::min) &&
                    !holds_partial(L::nominal_spec().placements, reduce_op::product),
                "spmd::dropout: a P(max), P(min) or P(product) input does not commute with "
                "dropout (only sum and avg are linear); redistribute to Replicate first.");
  const std::uint64_t t = detail::probability_threshold(p, "spmd::dropout");
  const shape_vec global = x.layout().extents().to_vec();
  const random::draw d = detail::take_draw<T>(g, random::distribution::dropout, global, p, 0, t);
  dtensor<T, L, B> out = factories<B>::template empty<T>(x.layout());
  if constexpr (host_memory<B>) {
    local_set<T>& o = out.locals(detail::internal_t{});
    for (const index_t r : o.held())
      host::dropout_block<T>(d, box_at(L::spec(), global, unravel(L::spec().mesh, r)), global,
                             x.locals().data(r), o.data(r));
  } else {
    B::template dropout<T>(out.locals(detail::internal_t{}), x.locals(), L::spec(), global, d);
  }
  return out;
}

}  // namespace spmd::runtime
