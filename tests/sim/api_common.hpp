// tests/sim/api_common.hpp — helpers of the typed API tests (api.cpp, redistribute.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "../common/failures.hpp"

#include "reference.hpp"

namespace {

using simref::index_t;
using simref::ivec;
using spmd::dyn;
using spmd::extents;
using spmd::layout;
using spmd::mesh;
using spmd::partial;
using spmd::placements;
using spmd::reduce_op;
using spmd::replicate;
using spmd::shard;
using spmd::step_kind;
namespace sim = spmd::sim;

using P_sum = partial<reduce_op::sum>;
using P_avg = partial<reduce_op::avg>;
using P_max = partial<reduce_op::max>;
using P_min = partial<reduce_op::min>;
using P_prod = partial<reduce_op::product>;

template <class L>
ivec global_of(const L& l) {
  return simref::to_ivec(l.extents().to_vec());
}

template <class T>
std::vector<T> integer_data(std::size_t n, std::mt19937_64& rng, int lo = -20, int hi = 20) {
  std::vector<T> v(n);
  std::uniform_int_distribution<int> d(lo, hi);
  for (auto& x : v) x = T(d(rng));
  return v;
}

template <class T>
std::vector<simref::local<T>> locals_of(const sim::local_set<T>& s, const spmd::layout_spec& spec,
                                        const ivec& global) {
  return simref::from_set(s, spec, global);
}

template <class... L>
struct type_list {};

using spmd_test::failures;

using M4 = mesh<4>;
using M23 = mesh<2, 3>;
using M222 = mesh<2, 2, 2>;

}  // namespace

namespace {

/// Checks of a redistribute that depend on the element type only: the compile-time path's
/// result `y` (and `z`, from an rvalue) against the runtime path on the same plan, the
/// reference model along the plan, and the meaning (global value, blocks).
template <class T>
void check_redistributed(const spmd::plan& plan, const spmd::layout_spec& src,
                         const spmd::layout_spec& dst, const ivec& g, const std::vector<T>& data,
                         const sim::local_set<T>& x, const sim::local_set<T>& y,
                         const sim::local_set<T>& z, const std::vector<T>& full, failures& f) {
  const std::string where = simref::text(src) + " -> " + simref::text(dst) + " on " +
                            simref::text(g) + " " + sim::element_name<T>() + ": ";
  const auto got = locals_of(y, dst, g);
  const auto rt = spmd::sim::execute(plan, simref::to_shape(g), x);
  if (!simref::compare(locals_of(rt, dst, g), got).empty()) f.add(where + "runtime path differs");
  auto ref = locals_of(x, src, g);
  for (const auto& s : plan.steps) ref = simref::step(s, g, ref);
  if (const auto d = simref::compare(ref, got); !d.empty()) f.add(where + "reference: " + d);
  if (!std::equal(full.begin(), full.end(), data.begin(), simref::same_bits<T>))
    f.add(where + "the global value changed");
  bool partial = false;
  for (const auto& p : dst.placements) partial |= p.is_partial();
  if (!partial && !simref::compare(simref::slice(dst, g, data), got).empty())
    f.add(where + "a local is not its block");
  if (!simref::compare(got, locals_of(z, dst, g)).empty()) f.add(where + "rvalue path differs");
}

template <class L, class NewP, class T>
void check_redistribute(std::mt19937_64& rng, failures& f, const L& l = L{}) {
  using Dst = layout<typename L::mesh_type, NewP, typename L::extents_type>;
  const ivec g = global_of(l);
  const std::vector<T> data = integer_data<T>(static_cast<std::size_t>(simref::volume(g)), rng);
  const auto x = sim::distribute_tensor<L>(data, l);
  const auto y = sim::redistribute<NewP>(x);
  static_assert(std::is_same_v<typename decltype(y)::layout_type, Dst>);
  const auto z = sim::redistribute<NewP>(sim::distribute_tensor<L>(data, l));
  check_redistributed<T>(spmd::plan_of<L, Dst, T>::value(), L::spec(), Dst::spec(), g, data,
                         x.locals(), y.locals(), z.locals(), y.full_tensor(), f);
}

}  // namespace

