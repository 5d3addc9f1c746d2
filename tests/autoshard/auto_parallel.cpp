// tests/autoshard/auto_parallel.cpp — the search's choice as types (autoshard/auto_parallel.hpp):
// the compiler searches the two-layer MLP on a mesh of 4, and its layouts are spmd::layout
// types a program static_asserts on; a hand-written plan's predicted step is a constant beside
// it. Everything here is checked when this file compiles; main only reports.
#include <cstdio>
#include <type_traits>

#include "graphs.hpp"
#include "spmd/autoshard/auto_parallel.hpp"

using namespace autoshard_tests;
using spmd::placements;
using spmd::shard;

namespace {

constexpr spmd::mesh_shape_vec four{{4}, 1};
struct mlp_step {
  static constexpr as::graph make() { return two_layer(four, 64, 128, 256); }
};
/// Collectives at a millisecond each: dear next to this step's compute.
struct dear_links {
  static constexpr as::cost_model value() {
    as::cost_model c{};
    c.fallback.alpha_s = 1e-3;
    return c;
  }
};
/// Everything replicated: every rank computes the whole step.
struct replicated {
  static constexpr as::pins value() {
    const as::graph g = mlp_step::make();
    as::pins p;
    for (std::size_t t = 0; t < g.tensors.size(); ++t) {
      spmd::placement_vec v{};
      v.push_back(spmd::make_replicate());
      p.pin(static_cast<int>(t), spmd::make_spec(g.mesh, v, g.tensors[t].shape.size()).spec, g.tensors.size());
    }
    return p;
  }
};

// [docs:auto-types]
using A = as::auto_parallel<mlp_step, as::no_pins, dear_links>;
using R = as::auto_parallel<mlp_step, replicated, dear_links>;
using Mesh = spmd::mesh<4>;

// Tensors of two_layer: 0 x, 1 W1, 2 W2, 3 x·W1ᵀ, 4 relu, 5 ·W2ᵀ, 6 the loss.
static_assert(A::ok && R::ok);
// Megatron's MLP, found by the compiler: W1 by output features, W2 by input features, no
// collective (the loss left Partial)
static_assert(std::is_same_v<A::placements_of<1>, placements<shard<0>>>);
static_assert(std::is_same_v<A::placements_of<2>, placements<shard<1>>>);
static_assert(std::is_same_v<A::placements_of<4>, placements<shard<1>>>);
static_assert(std::is_same_v<A::placements_of<6>, placements<spmd::partial<>>>);
static_assert(A::collectives == 0 && A::comm_s == 0);
// the choice is a layout: W1's block on rank 3
using W1 = A::layout<1, Mesh>;
static_assert(std::is_same_v<W1, spmd::layout<Mesh, placements<shard<0>>, spmd::extents<256, 128>>>);
static_assert(W1{}.local_shape(3) == spmd::dims<2>{64, 128});
// the hand-written plan, costed by the same model, is slower
static_assert(A::step_s < R::step_s);
// [/docs:auto-types]
static_assert(R::compute_s == 4 * (A::compute_s - 3 * 2.0 * 64 * 128 / 50e9) + 3 * 2.0 * 64 * 128 / 50e9);

}  // namespace

int main() {
  std::printf("auto_parallel: the MLP on 4 ranks, %.3g s a step (replicated: %.3g s), %d collectives\n", A::step_s,
              R::step_s, A::collectives);
  return 0;
}
