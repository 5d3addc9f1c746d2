// spmd/plan/dynamic_plan.hpp — the plan between two layout types over a mesh with a dynamic
// size (spmd::dyn): the search plan_of runs in the compiler (make_plan, the same cost model,
// the same budget), run at run time once per (layouts, element type, bound sizes) and kept.
//
//   using M = spmd::mesh<spmd::dyn>;
//   spmd::bind_mesh<M>(6);
//   const spmd::plan& p = spmd::dynamic_plan_of<From, To, float>::value();
//
// The same inputs give the same plan: over sizes a static mesh also has, the plan equals that
// mesh's plan_of (steps, collectives, bytes; tests/plan/dynamic_plan.cpp).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "spmd/plan/typed_plan.hpp"

namespace spmd {

namespace detail {

/// The plans made at run time, for every pair of layout types (`pair`: an address that is
/// one pair's own) and every set of sizes its mesh was bound to. One table for them all,
/// not one per pair: a pair's code is then only its lookup, which keeps the units that
/// redistribute between hundreds of layout pairs small (the table's code once, not once
/// per pair).
/// @throws std::runtime_error when the search gives no plan.
inline const plan& dynamic_plan_lookup(const void* pair, const mesh_shape_vec& m, const layout_spec& src,
                                       const layout_spec& dst, double global_bytes, std::string (*mesh_text)()) {
  struct entry {
    const void* pair;
    mesh_shape_vec mesh;
    plan p;
  };
  static std::mutex mu;
  static std::deque<entry> kept;  // a deque: the entries stay where they are
  const std::lock_guard<std::mutex> lock(mu);
  for (const entry& e : kept)
    if (e.pair == pair && e.mesh == m) return e.p;
  const plan_result r = make_plan(src, dst, global_bytes, cost_model{}, constexpr_plan_work);
  if (!r.ok()) {
    std::string sizes;
    for (const index_t s : m) sizes += (sizes.empty() ? "" : "x") + std::to_string(s);
    const char* why = "the layouts do not meet (a bug: please report it)";
    switch (r.error) {
      case plan_error::over_budget:
        why = "the search examines more moves than SPMD_PLAN_CONSTEXPR_WORK allows; redistribute in two "
              "steps through an intermediate layout";
        break;
      case plan_error::search_too_large:
        why = "the search visits too many states; plan in steps through an intermediate layout";
        break;
      case plan_error::too_many_steps:
        why = "the best plan has more steps than spmd::max_plan_steps";
        break;
      default:
        break;
    }
    throw std::runtime_error(std::string("spmd::redistribute: no plan on mesh<") + mesh_text() + "> bound to " +
                             sizes + ": " + why);
  }
  kept.push_back(entry{pair, m, r.value});
  return kept.back().p;
}

}  // namespace detail

template <class Src, class Dst, class T = float>
struct dynamic_plan_of {
  // plan_of's checks, over the nominal sizes (the same sentences for static and dynamic meshes).
  static_assert(sizeof(plan_of<Src, Dst, T>) > 0);
  using mesh_type = typename Src::mesh_type;

  /// The plan over the mesh's bound sizes (computed on the first call for those sizes).
  /// @throws std::logic_error before the mesh is bound; std::runtime_error when the search
  /// gives no plan (the sentence plan_of's static_asserts would say).
  static const plan& value() {
    // The last plan this thread used, while the mesh keeps those sizes: one comparison.
    thread_local const plan* last = nullptr;
    thread_local std::uint64_t last_generation = 0;
    const std::uint64_t gen = mesh_type::generation();
    if (last != nullptr && last_generation == gen) [[likely]]
      return *last;
    last = &detail::dynamic_plan_lookup(&pair_id, mesh_type::shape_vec(), Src::spec(), Dst::spec(),
                                        tensor_bytes<T, typename Src::extents_type>(), &mesh_type::text);
    last_generation = gen;
    return *last;
  }
  static int size() { return value().steps.size(); }
  static int count(step_kind k) { return value().count(k); }
  static int collectives() { return value().collectives(); }
  static double cost_us() { return value().cost_us; }
  static plan_text trace() { return spmd::trace(value(), Src::spec(), Dst::spec()); }

 private:
  static constexpr char pair_id = 0;  // its address names this pair in the table
};

}  // namespace spmd
