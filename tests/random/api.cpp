// tests/random/api.cpp — random operators through DTensor's API and LocalTensor's on the
// simulation: the same global tensor for every typed layout and on one device, the
// generator's advance, the default and user generators, state round trips, in-place
// operators, dropout, Partial placements, and bad arguments that change nothing.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "spmd/backends/sim/sim.hpp"

namespace {

using spmd::index_t;
using spmd::mesh;
using spmd::placements;
using spmd::replicate;
using spmd::shard;
namespace sim = spmd::sim;
using P_sum = spmd::partial<spmd::reduce_op::sum>;

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class M, class P, class E>
using L = spmd::layout<M, P, E>;
using E = spmd::extents<10, 5>;
using One = L<mesh<1>, placements<replicate>, E>;

/// rand / randn under layout Lay from a fresh generator of `seed`: the global tensor and the
/// generator's offset after the call.
template <class T, class Lay, bool Normal>
std::pair<std::vector<T>, std::uint64_t> draw_under(std::uint64_t seed) {
  spmd::generator g(seed);
  const auto x = Normal ? sim::randn<T, Lay>(g) : sim::rand<T, Lay>(g);
  return {x.full_tensor(), g.offset()};
}

template <class T, bool Normal>
void same_for_every_layout() {
  const auto one = draw_under<T, One, Normal>(5);
  CHECK(one.second == spmd::random::words_for(Normal ? spmd::random::distribution::normal
                                                     : spmd::random::distribution::uniform,
                                              sizeof(T), 50));
  const auto check = [&](auto r) {
    CHECK(same_bits(r.first, one.first));
    CHECK(r.second == one.second);
  };
  check(draw_under<T, L<mesh<2, 4>, placements<shard<0>, replicate>, E>, Normal>(5));
  check(draw_under<T, L<mesh<2, 4>, placements<shard<1>, shard<0>>, E>, Normal>(5));
  check(draw_under<T, L<mesh<2, 4>, placements<shard<0>, shard<0>>, E>, Normal>(5));
  check(draw_under<T, L<mesh<2, 4>, placements<shard<0, 1>, shard<0, 0>>, E>, Normal>(5));
  check(draw_under<T, L<mesh<3>, placements<shard<1>>, E>, Normal>(5));
  check(draw_under<T, L<mesh<2, 2, 2>, placements<replicate, shard<1>, P_sum>, E>, Normal>(5));
  check(draw_under<T, L<mesh<4>, placements<spmd::partial<spmd::reduce_op::max>>, E>, Normal>(5));
  check(draw_under<T, L<mesh<8>, placements<replicate>, E>, Normal>(5));
}

TEST_CASE("rand and randn give one global tensor under every layout", "[random][api]") {
  same_for_every_layout<float, false>();
  same_for_every_layout<float, true>();
  same_for_every_layout<double, false>();
  same_for_every_layout<double, true>();
  same_for_every_layout<spmd::bfloat16, true>();
  same_for_every_layout<spmd::float16, false>();
}

TEST_CASE("replicas hold equal values, shards distinct ones, with no communication",
          "[random][api]") {
  using Lay = L<mesh<2, 4>, placements<shard<0>, replicate>, E>;
  sim::comm_counter counter;
  spmd::generator g(11);
  const auto x = sim::rand<float, Lay>(g);
  CHECK(counter.total() == 0);
  for (index_t r = 0; r < 8; ++r) {
    const auto a = x.to_local(r), b = x.to_local(r % 4 == 0 ? r + 1 : r - 1);  // same row
    CHECK(same_bits(a.data, b.data));
    const auto other = x.to_local((r + 4) % 8);  // the other shard
    CHECK_FALSE(same_bits(a.data, other.data));
  }
}

TEST_CASE("the generator advances by the operator's words, the same whatever the layout",
          "[random][api]") {
  using Sharded = L<mesh<2, 4>, placements<shard<0>, shard<1>>, E>;
  spmd::generator g(3);
  (void)sim::rand<float, Sharded>(g);
  CHECK(g.offset() == 52);  // 50 words, whole blocks
  (void)sim::randn<double, Sharded>(g);
  CHECK(g.offset() == 52 + 100);
  auto x = sim::zeros<float, Sharded>();
  sim::bernoulli_(x, 0.25, g);
  CHECK(g.offset() == 152 + 52);
  (void)sim::dropout(x, 0.1, g);
  CHECK(g.offset() == 204 + 52);
  // Successive operators read disjoint words: a second rand differs from the first.
  spmd::generator h(3);
  const auto a = sim::rand<float, One>(h).full_tensor();
  const auto b = sim::rand<float, One>(h).full_tensor();
  CHECK_FALSE(same_bits(a, b));
}

TEST_CASE("the default generator, user generators, manual_seed and state", "[random][api]") {
  spmd::manual_seed(42);
  CHECK(spmd::default_generator().initial_seed() == 42);
  CHECK(spmd::default_generator().offset() == 0);
  const auto a = sim::rand<float, One>().full_tensor();
  CHECK(spmd::default_generator().offset() == 52);
  // A user generator leaves the default one alone.
  spmd::generator g(42);
  const auto b = sim::rand<float, One>(g).full_tensor();
  CHECK(same_bits(a, b));
  CHECK(spmd::default_generator().offset() == 52);
  // manual_seed again replays; a state round trip replays.
  spmd::manual_seed(42);
  CHECK(same_bits(sim::rand<float, One>().full_tensor(), a));
  const spmd::generator_state s = g.get_state();
  const auto c = sim::randn<float, One>(g).full_tensor();
  g.set_state(s);
  CHECK(same_bits(sim::randn<float, One>(g).full_tensor(), c));
  spmd::generator other(43);
  CHECK_FALSE(same_bits(sim::rand<float, One>(other).full_tensor(), a));
  CHECK(spmd::generator().initial_seed() == spmd::generator::default_seed);
  // Offsets count whole blocks.
  CHECK_THROWS_WITH(g.set_offset(6), Catch::Contains("offset 6 is not a multiple of 4"));
  CHECK_THROWS_WITH(g.set_state({1, 2}), Catch::Contains("offset 2"));
}

TEST_CASE("in-place operators fill every rank's block from the same stream", "[random][api]") {
  using Lay = L<mesh<2, 2>, placements<shard<1>, shard<0>>, spmd::extents<7, 9>>;
  using Whole = L<mesh<1>, placements<replicate>, spmd::extents<7, 9>>;
  spmd::generator g(8), h(8);
  auto x = sim::ones<double, Lay>();
  auto y = sim::zeros<double, Whole>();
  sim::uniform_(x, -3.0, 5.0, g);
  sim::uniform_(y, -3.0, 5.0, h);
  const auto fx = x.full_tensor();
  CHECK(same_bits(fx, y.full_tensor()));
  for (double v : fx) CHECK((v >= -3.0 && v < 5.0));
  sim::normal_(x, 10.0, 0.5, g);
  sim::normal_(y, 10.0, 0.5, h);
  CHECK(same_bits(x.full_tensor(), y.full_tensor()));
  sim::bernoulli_(x, 0.5, g);
  sim::bernoulli_(y, 0.5, h);
  const auto fb = x.full_tensor();
  CHECK(same_bits(fb, y.full_tensor()));
  for (double v : fb) CHECK((v == 0.0 || v == 1.0));
  CHECK(g.get_state() == h.get_state());
}

TEST_CASE("bad arguments throw, naming the value, and change nothing", "[random][api]") {
  using Lay = L<mesh<2>, placements<shard<0>>, E>;
  spmd::generator g(1);
  auto x = sim::full<float, Lay>(7.0f);
  const auto before = x.full_tensor();
  CHECK_THROWS_WITH(sim::uniform_(x, 2.0, 1.0, g), Catch::Contains("from 2.000000 is greater than to 1.000000"));
  CHECK_THROWS_WITH(sim::uniform_(x, 0.0, INFINITY, g), Catch::Contains("to is inf"));
  CHECK_THROWS_WITH(sim::normal_(x, 0.0, -1.0, g), Catch::Contains("std is -1.000000"));
  CHECK_THROWS_WITH(sim::normal_(x, NAN, 1.0, g), Catch::Contains("mean is nan"));
  CHECK_THROWS_WITH(sim::bernoulli_(x, 1.5, g), Catch::Contains("p is 1.500000"));
  CHECK_THROWS_WITH(sim::dropout(x, -0.1, g), Catch::Contains("p is -0.100000"));
  CHECK_THROWS_WITH(sim::dropout(x, NAN, g), Catch::Contains("p is nan"));
  CHECK(g.offset() == 0);
  CHECK(same_bits(x.full_tensor(), before));
}

TEST_CASE("dropout: one mask for the global tensor, kept values scaled", "[random][api]") {
  using Sharded = L<mesh<2, 4>, placements<shard<1>, shard<0>>, E>;
  spmd::generator g0(21);
  const auto x = sim::randn<float, Sharded>(g0);
  const auto fx = x.full_tensor();
  spmd::generator g(5), h(5);
  const auto y = sim::dropout(x, 0.3, g);
  const auto whole = sim::dropout(sim::redistribute<placements<replicate, replicate>>(x), 0.3, h);
  const auto fy = y.full_tensor();
  CHECK(same_bits(fy, whole.full_tensor()));
  const float scale = 1.0f / (1.0f - 0.3f);
  int kept = 0;
  for (std::size_t i = 0; i < fx.size(); ++i) {
    if (fy[i] == 0.0f) continue;
    ++kept;
    CHECK(fy[i] == fx[i] * scale);
  }
  CHECK(kept > 20);
  CHECK(kept < 50);
  // p = 0 keeps x; p = 1 gives +0 everywhere (PyTorch's zeros).
  CHECK(same_bits(sim::dropout(x, 0.0, g).full_tensor(), fx));
  for (float v : sim::dropout(x, 1.0, g).full_tensor()) CHECK((v == 0.0f && !std::signbit(v)));
  // A NaN that is dropped stays NaN (x * 0), as in PyTorch.
  using Tiny = L<mesh<1>, placements<replicate>, spmd::extents<64>>;
  const auto nan = sim::full<float, Tiny>(NAN);
  for (float v : sim::dropout(nan, 0.5, g).full_tensor()) CHECK(std::isnan(v));
}

TEST_CASE("dropout of a P(sum) tensor is the dropout of its value", "[random][api]") {
  using Part = L<mesh<2, 2>, placements<P_sum, shard<0>>, E>;
  spmd::generator g0(2);
  const auto x = sim::rand<float, Part>(g0);  // the first member holds the value, the other -0
  spmd::generator g(9), h(9);
  const auto y = sim::dropout(x, 0.5, g);    // scale 2: exact, so the sums are too
  const auto r = sim::dropout(sim::redistribute<placements<replicate, replicate>>(x), 0.5, h);
  CHECK(same_bits(y.full_tensor(), r.full_tensor()));
}

TEST_CASE("Partial layouts hold the drawn tensor as their global value", "[random][api]") {
  using Sum = L<mesh<2, 2>, placements<P_sum, shard<1>>, E>;
  using Avg = L<mesh<2>, placements<spmd::partial<spmd::reduce_op::avg>>, E>;
  spmd::generator g(4), h(4), k(4);
  const auto one = sim::randn<float, One>(g).full_tensor();
  const auto s = sim::randn<float, Sum>(h);
  CHECK(same_bits(s.full_tensor(), one));
  for (float v : s.to_local(2).data) CHECK((v == 0.0f && std::signbit(v)));  // identity -0
  CHECK(same_bits(sim::randn<float, Avg>(k).full_tensor(), one));           // (2 members: exact)
}

TEST_CASE("local tensors: every rank draws from the same state, like processes seeded alike",
          "[random][local]") {
  using M = mesh<4>;
  constexpr sim::local_mode<M> mode;
  spmd::generator g(6), h(6);
  const auto x = mode.rand<float>({3, 5}, g);
  CHECK(x.is_uniform());
  CHECK(same_bits(x.reconcile().data, sim::rand<float, L<mesh<1>, placements<replicate>,
                                                         spmd::extents<3, 5>>>(h).full_tensor()));
  CHECK(g.offset() == 16);
  // Uneven shards: element k of every shard is element k of the draw; the generator moves
  // by what the largest shard reads.
  sim::local_tensor<double, M> u({{0, {{4}, {0, 0, 0, 0}}},
                                  {1, {{4}, {0, 0, 0, 0}}},
                                  {2, {{3}, {0, 0, 0}}},
                                  {3, {{0}, {}}}});
  spmd::generator a(7);
  sim::normal_(u, 0.0, 1.0, a);
  CHECK(a.offset() == 8);
  CHECK(same_bits(u.to_local(0).data, u.to_local(1).data));
  const auto r2 = u.to_local(2).data;
  const auto r0 = u.to_local(0).data;
  CHECK(same_bits(r2, std::vector<double>(r0.begin(), r0.begin() + 3)));
  const auto y = sim::dropout(u, 0.5, a);
  CHECK(a.offset() == 12);
  const auto fy = y.to_local(0).data;
  for (std::size_t i = 0; i < fy.size(); ++i) CHECK((fy[i] == 0.0 || fy[i] == r0[i] * 2.0));
  CHECK_THROWS_WITH(mode.randn<float>({2, -1}), Catch::Contains("negative size -1"));
}

}  // namespace
