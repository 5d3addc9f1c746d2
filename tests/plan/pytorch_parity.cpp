// tests/plan/pytorch_parity.cpp — spmd's plans never use more collectives than PyTorch
// DTensor's tests assert for the same redistribute. Compile-time (static_asserts); the test
// is that this file compiles.
//
// Facts, not code, come from PyTorch's tests: every case below is a (mesh, tensor shape,
// source placements, target placements) for which PyTorch asserts a collective count with
// CommDebugMode (or a redistribute trace, whose collectives are counted here).
//
// Sources (test/distributed/tensor/test_redistribute.py):
//   [A] pytorch/pytorch @ 0133e92a44ea1fa464fb27975dcfe6c2d4445814
//   [B] paolodedios/pytorch (a mirror of pytorch/pytorch) @ 06b8740add48486de0170fdde52e636ecfa5dbd6,
//       a later revision with tests [A] does not have yet.
//
// | #  | test (class.method)                                            | mesh  | shape(s)              | from -> to                         | PyTorch asserts                 | spmd                |
// |----|----------------------------------------------------------------|-------|-----------------------|------------------------------------|---------------------------------|---------------------|
// | 1  | RedistributeTest.test_shard_to_replicate_forward_backward [A]  | 4     | 12x3, 13x3, 14x3      | S(0) -> R                          | all_gather 1                    | all_gather 1        |
// |    |                                                                | 4     | 3x12, 3x13, 3x14      | S(1) -> R                          | all_gather 1                    | all_gather 1        |
// | 2  | RedistributeTest.test_replicate_to_replicate_forward_backward  | 4     | 12x3                  | R -> R                             | total 0                         | no steps            |
// | 3  | RedistributeTest.test_partial_to_partial_forward_backward [A]  | 4     | 12x3                  | P(sum) -> P(sum)                   | total 0                         | no steps            |
// | 4  | RedistributeTest.test_replicate_to_shard_forward_backward [A]  | 4     | as in 1               | R -> S(0), R -> S(1)               | total 0                         | chunk               |
// | 5  | RedistributeTest.test_partial_to_replicate_forward_backward    | 4     | 12x3                  | P(sum) -> R                        | all_reduce 1                    | all_reduce 1        |
// | 6  | RedistributeTest.test_replicate_to_partial [A]                 | 4     | 12x3                  | R -> P(sum)                        | total 0                         | partition           |
// |    |                                                                | 2x2   | 12x3                  | R,R -> P(sum),P(sum)               | total 0                         | 2 partitions        |
// | 7  | RedistributeTest.test_partial_to_shard [A]                     | 4     | as in 1               | P(sum) -> S(0), P(sum) -> S(1)     | reduce_scatter 1                | reduce_scatter 1    |
// | 8  | RedistributeTest.test_redistribute_shard_dim_change [A]        | 4     | 8x8, 8x8x8, 8x5, 5x8, 5x5 | S(0) -> S(1), S(1) -> S(0)     | shard_dim_alltoall 1            | all_to_all 1        |
// | 9  |   (same test, 2-d part)                                        | 2x2   | same five             | S(0),S(1) -> S(0),S(0)             | total 1                         | all_to_all 1        |
// |    |                                                                | 2x2   | same five             | S(0),S(1) -> S(1),S(0)             | total 2                         | all_to_all 1 (*)    |
// |    |                                                                | 2x2   | same five             | S(0),S(0) -> S(1),S(1)             | total 2                         | all_to_all 1 (*)    |
// |    |                                                                | 2x2   | 8x8x8                 | S(0),S(2) -> S(1),S(0)             | total 2                         | all_to_all 1 (*)    |
// |    |                                                                | 2x2   | 8x8x8                 | S(1),S(1) -> S(1),S(2)             | total 1                         | all_to_all 1        |
// | 10 | RedistributeTest.test_one_chunk_mesh [A]                       | 4x1   | 64x8                  | S(0),{S(1),R,P} -> S(0),{S(0),S(1),R} | total 0 (9 pairs)            | no steps            |
// | 11 | RedistributeTest.test_replicate_to_partial_different_reduce_ops [B] | 4 | 12x3                  | R -> P(sum|avg|min|max)            | total 0                         | partition           |
// | 12 | MultiDimRedistributeTest.test_redistribute_shard_dim_multi_dim_mesh [A] | 2x2x2 | 8x8x8     | S0,S0,S0 -> S1,S1,S1               | total 3                         | all_to_all 1 (*)    |
// |    |                                                                | 2x2x2 | 8x8x8                 | S0,S1,S0 -> S1,S0,S0               | total 3                         | all_gather 1 (*)    |
// |    |                                                                | 2x2x2 | 8x8x8                 | S0,S1,S2 -> S2,S1,S0               | total 2                         | all_to_all 1 (*)    |
// |    |                                                                | 2x2x2 | 8x8x8                 | S1,S0,S0 -> R,S0,S0                | total 1                         | all_gather 1        |
// |    |                                                                | 2x2x2 | 8x8x8                 | S1,R,S0 -> R,S0,S0                 | total 2                         | all_gather 1 (*)    |
// |    |                                                                | 2x2x2 | 8x8x8                 | S0,S0,S1 -> S0,S1,S2               | total 2                         | all_to_all 1 (*)    |
// | 13 | DistributeWithDeviceOrderTest.test_ordered_redistribute [A] (trace) | 2x2x2 | 8x8x8           | S(0)[0]S(0)[1]S(0)[2] -> R,S(0)[0],S(0)[1] | trace: 3 all_gathers     | all_gather 1 (*)    |
// |    |                                                                | 2x2x2 | 8x8x8                 | S(0)[1]S(0)[0]S(0)[2] -> R,S(0)[0],S(0)[1] | trace: 2 all_gathers     | all_gather 1 (*)    |
// |    |                                                                | 2x2x2 | 8x8x8                 | S(0)[1]S(0)[0]S(0)[2] -> S(0)[0],S(0)[1],R | trace: 3 all_gathers     | all_gather 1 (*)    |
// |    |                                                                | 2x2x2 | 8x8x8                 | S(0)[0]S(0)[1]R -> R,S(1),S(0)     | trace: 2 all_gathers            | all_gather 1 (*)    |
// | 14 | DistributeWithDeviceOrderTest.test_force_min_cost_redistribution_plan [A] (trace) | 2x2x2 | 8x8x8 | S0,S0,S0 -> S1,S1,S1 | graph: 3 all_gathers; greedy: 2 + 1 all_to_all | all_to_all 1 (*) |
// | 15 | DistributeWithDeviceOrderTest.test_ordered_all_gather_with_flattening [B] | 2x2x2 | 8x8x8  | S(0)[0]S(0)[1]S(0)[2] -> R,R,R     | all_gather 1                    | all_gather 1        |
// |    |                                                                | 2x2x2 | 8x8x8                 | S(0)[1]S(0)[0]S(0)[2] -> R,R,R     | all_gather 3                    | all_gather 1 (*)    |
// | 16 | DistributeWithDeviceOrderTest.test_debug_mode_shows_optimized_trace [B] | 4x2 | 8x8      | S(0),S(0) -> R,R                   | trace S(0)[0]S(0)[1]-->RR (1)   | all_gather 1        |
// | 17 | MultiDimRedistributeOptimizationTest.test_multi_dim_redistribute [A][B] | 4x2 | 16x16x16 | P,P -> R,R                         | all_reduce 1                    | all_reduce 1        |
// |    |   (flattened meshes declared; counts are per asserted kind)    | 4x2   | 16x16x16              | P,P -> S0,S0                       | reduce_scatter 1                | reduce_scatter 1    |
// |    |                                                                | 4x2   | 16x16x16              | P,P -> S0,S1                       | reduce_scatter 2                | reduce_scatter 1 (*)|
// |    |                                                                | 4x2   | 16x16x16              | S0,S0 -> R,R                       | all_gather 1                    | all_gather 1        |
// |    |                                                                | 4x2   | 16x16x16              | S0,S1 -> R,R                       | all_gather 2                    | all_gather 1 (*)    |
// |    |                                                                | 2x2x2 | 16x16x16              | P,P,S0 -> S0,S0,S0                 | reduce_scatter 1, all_reduce 1, all_gather 1 | fill + reduce_scatter 1 (*) |
// |    |                                                                | 2x2x2 | 16x16x16              | P,P,P -> R,R,R                     | all_reduce 1                    | all_reduce 1        |
// |    |                                                                | 2x2x2 | 16x16x16              | P,S0,P -> R,R,R                    | all_reduce 2, all_gather 1      | fill + all_reduce 1 (*) |
// |    |                                                                | 2x2x2 | 16x16x16              | P,R,P -> R,R,R                     | all_reduce 1                    | all_reduce 1        |
// |    |                                                                | 2x2x2 | 16x16x16              | P,P,R -> S0,S1,R                   | reduce_scatter 2                | reduce_scatter 1 (*)|
// |    |                                                                | 2x2x2 | 16x16x16              | P,P,P -> S0,S0,S1 [B]              | reduce_scatter 2                | reduce_scatter 1 (*)|
// | 18 | FlattenedReductionIntegrationTest.test_merging_reductions [A]  | 2x2x2 | 8x8                   | P,P,P -> R,R,R                     | total 1                         | all_reduce 1        |
// |    |                                                                | 2x2x2 | 8x8                   | P,P,R -> R,R,R                     | total 1                         | all_reduce 1        |
// |    |                                                                | 2x2x2 | 8x8                   | P,R,P -> R,R,R                     | total 1                         | all_reduce 1        |
// |    |                                                                | 2x2x2 | 16x8                  | P,S0,P -> R,R,R                    | total 3                         | fill + all_reduce 1 (*) |
//
// (*) spmd uses fewer collectives than PyTorch, and sometimes other kinds. Why each is
// cheaper is said at the case below; where PyTorch's path is known (its comments or its
// asserted trace), the path is costed under spmd's cost model and spmd's plan is no dearer.
//
// Left out: test_mixed_sum_avg_partial_numerics [B] (P(avg),P(avg),P(sum): spmd refuses
// two reduce ops in one layout), the OptimizeFlattenedReductionsTest unit tests (they count
// transforms of a given list, not a redistribute), backward-pass counts (spmd plans forward
// redistributes only), and tests that assert no count.
#include <cstddef>

#include <spmd/plan.hpp>
#include <spmd/spmd.hpp>

namespace {

using spmd::extents;
using spmd::mesh;
using spmd::placements;
using spmd::reduce_op;
using spmd::step_kind;

using R = spmd::replicate;
template <int D, int Order = spmd::default_order>
using S = spmd::shard<D, Order>;
using P = spmd::partial<reduce_op::sum>;

template <class Mesh, class E, class... Ps>
using L = spmd::layout<Mesh, placements<Ps...>, E>;
template <class From, class To>
using Plan = spmd::plan_of<From, To, float>;

constexpr auto AG = step_kind::all_gather;
constexpr auto AR = step_kind::all_reduce;
constexpr auto RS = step_kind::reduce_scatter;
constexpr auto A2A = step_kind::all_to_all;
constexpr auto FILL = step_kind::fill;

/// For every tensor shape E: the plan From -> To (placement lists) uses at most `total`
/// collectives, and exactly `n` of kind `k` (k, n: spmd's own plan, for the record).
template <class Mesh, class From, class To, class... Es>
struct pair_over;
template <class Mesh, class... F, class... T, class... Es>
struct pair_over<Mesh, placements<F...>, placements<T...>, Es...> {
  static constexpr bool at_most(int total) {
    return ((Plan<L<Mesh, Es, F...>, L<Mesh, Es, T...>>::collectives() <= total) && ...);
  }
  static constexpr bool uses(step_kind k, int n) {
    return ((Plan<L<Mesh, Es, F...>, L<Mesh, Es, T...>>::count(k) == n) && ...);
  }
  static constexpr bool collectives(int n) {
    return ((Plan<L<Mesh, Es, F...>, L<Mesh, Es, T...>>::collectives() == n) && ...);
  }
};

/// A path of layouts: its cost and collectives under spmd's cost model, hop by hop.
template <class A, class B, class... Rest>
constexpr double path_cost() {
  if constexpr (sizeof...(Rest) == 0) {
    return Plan<A, B>::cost_us();
  } else {
    return Plan<A, B>::cost_us() + path_cost<B, Rest...>();
  }
}
template <class A, class B, class... Rest>
constexpr int path_collectives() {
  if constexpr (sizeof...(Rest) == 0) {
    return Plan<A, B>::collectives();
  } else {
    return Plan<A, B>::collectives() + path_collectives<B, Rest...>();
  }
}
template <class A, class B, class... Rest>
constexpr bool single_steps() {  // each hop is one step: the path is PyTorch's, step by step
  if constexpr (sizeof...(Rest) == 0) {
    return Plan<A, B>::size() == 1;
  } else {
    return Plan<A, B>::size() == 1 && single_steps<B, Rest...>();
  }
}

template <class... P>
using pl = placements<P...>;

// ===========================================================================
// Rows 1-8, 11: 1-d mesh of 4
// ===========================================================================
using M4 = mesh<4>;
using E12x3 = extents<12, 3>;
// Row 1 (and 4, 7): shard dim 0 on 12, 13, 14 rows; shard dim 1 on 12, 13, 14 columns.
using row1_0 = pair_over<M4, pl<S<0>>, pl<R>, extents<12, 3>, extents<13, 3>, extents<14, 3>>;
using row1_1 = pair_over<M4, pl<S<1>>, pl<R>, extents<3, 12>, extents<3, 13>, extents<3, 14>>;
static_assert(row1_0::at_most(1) && row1_0::uses(AG, 1) && row1_1::at_most(1) && row1_1::uses(AG, 1));
// Row 2, 3.
static_assert(pair_over<M4, pl<R>, pl<R>, E12x3>::at_most(0));
static_assert(pair_over<M4, pl<P>, pl<P>, E12x3>::at_most(0));
// Row 4.
static_assert(pair_over<M4, pl<R>, pl<S<0>>, extents<12, 3>, extents<13, 3>, extents<14, 3>>::at_most(0));
static_assert(pair_over<M4, pl<R>, pl<S<1>>, extents<3, 12>, extents<3, 13>, extents<3, 14>>::at_most(0));
// Row 5.
static_assert(pair_over<M4, pl<P>, pl<R>, E12x3>::at_most(1) && pair_over<M4, pl<P>, pl<R>, E12x3>::uses(AR, 1));
// Row 6.
static_assert(pair_over<M4, pl<R>, pl<P>, E12x3>::at_most(0));
static_assert(pair_over<mesh<2, 2>, pl<R, R>, pl<P, P>, E12x3>::at_most(0));
// Row 7.
using row7_0 = pair_over<M4, pl<P>, pl<S<0>>, extents<12, 3>, extents<13, 3>, extents<14, 3>>;
using row7_1 = pair_over<M4, pl<P>, pl<S<1>>, extents<3, 12>, extents<3, 13>, extents<3, 14>>;
static_assert(row7_0::at_most(1) && row7_0::uses(RS, 1) && row7_1::at_most(1) && row7_1::uses(RS, 1));
// Row 8: PyTorch's shard_dim_alltoall is one all_to_all.
using row8_01 = pair_over<M4, pl<S<0>>, pl<S<1>>, extents<8, 8>, extents<8, 8, 8>, extents<8, 5>, extents<5, 8>, extents<5, 5>>;
using row8_10 = pair_over<M4, pl<S<1>>, pl<S<0>>, extents<8, 8>, extents<8, 8, 8>, extents<8, 5>, extents<5, 8>, extents<5, 5>>;
static_assert(row8_01::at_most(1) && row8_01::uses(A2A, 1) && row8_10::at_most(1) && row8_10::uses(A2A, 1));
// Row 11 [B]: R -> P(op) is local for every op.
static_assert(pair_over<M4, pl<R>, pl<spmd::partial<reduce_op::sum>>, E12x3>::at_most(0));
static_assert(pair_over<M4, pl<R>, pl<spmd::partial<reduce_op::avg>>, E12x3>::at_most(0));
static_assert(pair_over<M4, pl<R>, pl<spmd::partial<reduce_op::min>>, E12x3>::at_most(0));
static_assert(pair_over<M4, pl<R>, pl<spmd::partial<reduce_op::max>>, E12x3>::at_most(0));

// ===========================================================================
// Row 9: 2x2 mesh, shard dim changes
// ===========================================================================
using M22 = mesh<2, 2>;
#define SPMD_ROW9_SHAPES extents<8, 8>, extents<8, 8, 8>, extents<8, 5>, extents<5, 8>, extents<5, 5>
using row9a = pair_over<M22, pl<S<0>, S<1>>, pl<S<0>, S<0>>, SPMD_ROW9_SHAPES>;
static_assert(row9a::at_most(1) && row9a::uses(A2A, 1));
// PyTorch: 2 (mesh dim 1: S1 -> R, mesh dim 0: S0 -> S1, mesh dim 1: R -> S0).
// spmd: one all_to_all over both mesh dims (4 ranks): one launch instead of two, and
// each rank sends 3/4 of its quarter block once instead of a gather that doubles it.
using row9b = pair_over<M22, pl<S<0>, S<1>>, pl<S<1>, S<0>>, SPMD_ROW9_SHAPES>;
static_assert(row9b::at_most(2) && row9b::collectives(1) && row9b::uses(A2A, 1));
using E88 = extents<8, 8>;
static_assert(Plan<L<M22, E88, S<0>, S<1>>, L<M22, E88, S<1>, S<0>>>::cost_us() <=
              path_cost<L<M22, E88, S<0>, S<1>>, L<M22, E88, S<0>, R>, L<M22, E88, S<1>, R>, L<M22, E88, S<1>, S<0>>>());
static_assert(path_collectives<L<M22, E88, S<0>, S<1>>, L<M22, E88, S<0>, R>, L<M22, E88, S<1>, R>,
                               L<M22, E88, S<1>, S<0>>>() == 2);
// PyTorch: 2 (S0 -> R on mesh dim 1, S0 -> S1 on mesh dim 0, R -> S1 on mesh dim 1).
// spmd: one all_to_all over both mesh dims, same reasons.
using row9c = pair_over<M22, pl<S<0>, S<0>>, pl<S<1>, S<1>>, SPMD_ROW9_SHAPES>;
static_assert(row9c::at_most(2) && row9c::collectives(1) && row9c::uses(A2A, 1));
static_assert(Plan<L<M22, E88, S<0>, S<0>>, L<M22, E88, S<1>, S<1>>>::cost_us() <=
              path_cost<L<M22, E88, S<0>, S<0>>, L<M22, E88, S<0>, R>, L<M22, E88, S<1>, R>, L<M22, E88, S<1>, S<1>>>());
// 3-d tensors. PyTorch: 2 (S2 -> R on mesh dim 1, S0 -> S1 on 0, R -> S0 on 1); spmd: one
// all_to_all over both mesh dims.
using E888 = extents<8, 8, 8>;
using row9d = pair_over<M22, pl<S<0>, S<2>>, pl<S<1>, S<0>>, E888>;
static_assert(row9d::at_most(2) && row9d::collectives(1) && row9d::uses(A2A, 1));
static_assert(Plan<L<M22, E888, S<0>, S<2>>, L<M22, E888, S<1>, S<0>>>::cost_us() <=
              path_cost<L<M22, E888, S<0>, S<2>>, L<M22, E888, S<0>, R>, L<M22, E888, S<1>, R>, L<M22, E888, S<1>, S<0>>>());
using row9e = pair_over<M22, pl<S<1>, S<1>>, pl<S<1>, S<2>>, E888>;
static_assert(row9e::at_most(1) && row9e::uses(A2A, 1));
#undef SPMD_ROW9_SHAPES

// ===========================================================================
// Row 10: a mesh dim of size 1 never communicates
// ===========================================================================
using M41 = mesh<4, 1>;
using E64x8 = extents<64, 8>;
template <class Src>
constexpr bool row10() {
  return pair_over<M41, pl<S<0>, Src>, pl<S<0>, S<0>>, E64x8>::at_most(0) &&
         pair_over<M41, pl<S<0>, Src>, pl<S<0>, S<1>>, E64x8>::at_most(0) &&
         pair_over<M41, pl<S<0>, Src>, pl<S<0>, R>, E64x8>::at_most(0);
}
static_assert(row10<S<1>>() && row10<R>() && row10<P>());

// ===========================================================================
// Row 12: 2x2x2 mesh, 8x8x8 tensor
// ===========================================================================
using M222 = mesh<2, 2, 2>;
// PyTorch 3; spmd: one all_to_all over all 8 ranks (tensor dim 0 to tensor dim 1 on every
// mesh dim at once).
using row12a = pair_over<M222, pl<S<0>, S<0>, S<0>>, pl<S<1>, S<1>, S<1>>, E888>;
static_assert(row12a::at_most(3) && row12a::collectives(1) && row12a::uses(A2A, 1));
// PyTorch 3 (gathers on mesh dims 2 and 1, all_to_all on 0, chunks). spmd: one all_gather
// over all 8 ranks, then local chunks: one launch; at 2 KiB, latency decides.
using row12b = pair_over<M222, pl<S<0>, S<1>, S<0>>, pl<S<1>, S<0>, S<0>>, E888>;
static_assert(row12b::at_most(3) && row12b::collectives(1));
// PyTorch 2 (its comment: a gather on mesh dim 2, an all_to_all on mesh dim 0); spmd: one
// all_to_all over mesh dims {0, 2}; mesh dim 1 keeps S(1).
using row12c = pair_over<M222, pl<S<0>, S<1>, S<2>>, pl<S<2>, S<1>, S<0>>, E888>;
static_assert(row12c::at_most(2) && row12c::collectives(1) && row12c::uses(A2A, 1));
static_assert(Plan<L<M222, E888, S<0>, S<1>, S<2>>, L<M222, E888, S<2>, S<1>, S<0>>>::step(0).mesh_dims == 0b101);
using row12d = pair_over<M222, pl<S<1>, S<0>, S<0>>, pl<R, S<0>, S<0>>, E888>;
static_assert(row12d::at_most(1) && row12d::uses(AG, 1));
// PyTorch 2; spmd: one all_gather over {0, 2} then chunks (one launch).
using row12e = pair_over<M222, pl<S<1>, R, S<0>>, pl<R, S<0>, S<0>>, E888>;
static_assert(row12e::at_most(2) && row12e::collectives(1));
// PyTorch 2 (S1 -> S2 on mesh dim 2, S0 -> S1 on 1); spmd: one all_to_all over {1, 2}.
using row12f = pair_over<M222, pl<S<0>, S<0>, S<1>>, pl<S<0>, S<1>, S<2>>, E888>;
static_assert(row12f::at_most(2) && row12f::collectives(1) && row12f::uses(A2A, 1));

// ===========================================================================
// Rows 13-15: explicit shard orders on 2x2x2 (PyTorch asserts the trace)
// ===========================================================================
using S000 = L<M222, E888, S<0, 0>, S<0, 1>, S<0, 2>>;  // order (0, 1, 2)
using S102 = L<M222, E888, S<0, 1>, S<0, 0>, S<0, 2>>;  // order (1, 0, 2)
using RSS = L<M222, E888, R, S<0>, S<0>>;
using SSR = L<M222, E888, S<0>, S<0>, R>;
using RRR = L<M222, E888, R, R, R>;
// 13, idx 0. PyTorch: S(0)[0]S(0)[1]S(0)[2]->S(0)[0]S(0)[1]R->S(0)RR->RRR->RS(0)R->RS(0)[0]S(0)[1]
// (3 all_gathers). spmd: one all_gather over 8 ranks and two chunks: one launch, and the
// gathered bytes are the same (the whole tensor reaches every rank either way).
using p13a = Plan<S000, RSS>;
static_assert(p13a::collectives() <= 3 && p13a::collectives() == 1 && p13a::count(AG) == 1);
static_assert(p13a::trace() == "S(0)[0]S(0)[1]S(0)[2]->RRR->RS(0)R->RS(0)[0]S(0)[1]");
static_assert(single_steps<S000, SSR, L<M222, E888, S<0>, R, R>, RRR, L<M222, E888, R, S<0>, R>, RSS>());
static_assert(path_collectives<S000, SSR, L<M222, E888, S<0>, R, R>, RRR, L<M222, E888, R, S<0>, R>, RSS>() == 3);
static_assert(p13a::cost_us() <= path_cost<S000, SSR, L<M222, E888, S<0>, R, R>, RRR, L<M222, E888, R, S<0>, R>, RSS>());
// 13, idx 1. PyTorch: S(0)[1]S(0)[0]S(0)[2]->S(0)[1]S(0)[0]R->RS(0)R->RS(0)[0]S(0)[1]
// (2 all_gathers). spmd: the last two splits (mesh dims 2 and 0) in one all_gather.
using S102_to_R_S_R = L<M222, E888, R, S<0>, R>;
using p13b = Plan<S102, RSS>;
static_assert(p13b::collectives() <= 2 && p13b::collectives() == 1 && p13b::step(0).mesh_dims == 0b101);
static_assert(p13b::trace() == "S(0)[1]S(0)[0]S(0)[2]->RS(0)R->RS(0)[0]S(0)[1]");
static_assert(p13b::cost_us() <= path_cost<S102, L<M222, E888, S<0, 1>, S<0, 0>, R>, S102_to_R_S_R, RSS>());
// 13, idx 2. PyTorch: ...->S(0)[1]S(0)[0]R->RS(0)R->RRR->S(0)RR->S(0)[0]S(0)[1]R (3).
using p13c = Plan<S102, SSR>;
static_assert(p13c::collectives() <= 3 && p13c::collectives() == 1);
static_assert(p13c::trace() == "S(0)[1]S(0)[0]S(0)[2]->RRR->S(0)RR->S(0)[0]S(0)[1]R");
static_assert(p13c::cost_us() <= path_cost<S102, L<M222, E888, S<0, 1>, S<0, 0>, R>, S102_to_R_S_R, RRR,
                                           L<M222, E888, S<0>, R, R>, SSR>());
// 13, idx 3. PyTorch: S(0)[0]S(0)[1]R->S(0)RR->S(0)S(1)R->RS(1)R->RS(1)S(0) (2 all_gathers).
using RS1S0 = L<M222, E888, R, S<1>, S<0>>;
using p13d = Plan<SSR, RS1S0>;
static_assert(p13d::collectives() <= 2 && p13d::collectives() == 1);
static_assert(p13d::cost_us() <= path_cost<SSR, L<M222, E888, S<0>, R, R>, L<M222, E888, S<0>, S<1>, R>,
                                           L<M222, E888, R, S<1>, R>, RS1S0>());
// 14. PyTorch graph planner: S000 -> ... -> RRR -> ... -> S(1)[0]S(1)[1]S(1)[2] (3 gathers);
// greedy: 2 gathers and an all_to_all. spmd: one all_to_all over 8 ranks.
using S111 = L<M222, E888, S<1, 0>, S<1, 1>, S<1, 2>>;
using p14 = Plan<S000, S111>;
static_assert(p14::collectives() <= 3 && p14::collectives() == 1 && p14::count(A2A) == 1);
static_assert(p14::cost_us() <= path_cost<S000, SSR, L<M222, E888, S<0>, R, R>, RRR, L<M222, E888, S<1>, R, R>,
                                          L<M222, E888, S<1>, S<1>, R>, S111>());
static_assert(p14::cost_us() <= path_cost<S000, SSR, L<M222, E888, S<0>, R, R>, L<M222, E888, S<1>, R, R>,
                                          L<M222, E888, S<1>, S<1>, R>, S111>());
// 15 [B]. Ascending order: 1 all_gather, as PyTorch. Order (1, 0, 2): PyTorch 3 (it does
// not flatten a non-ascending order); spmd's all_gather is defined on boxes (step.hpp), so
// any shard order gathers in one collective.
static_assert(Plan<S000, RRR>::collectives() <= 1 && Plan<S000, RRR>::count(AG) == 1);
static_assert(Plan<S102, RRR>::collectives() <= 3 && Plan<S102, RRR>::collectives() == 1);
static_assert(Plan<S102, RRR>::cost_us() <= path_cost<S102, L<M222, E888, S<0, 1>, S<0, 0>, R>, S102_to_R_S_R, RRR>());
// 16 [B]: one flattened all_gather, trace S(0)[0]S(0)[1]-->RR.
using M42 = mesh<4, 2>;
static_assert(Plan<L<M42, E88, S<0>, S<0>>, L<M42, E88, R, R>>::collectives() <= 1);
static_assert(Plan<L<M42, E88, S<0>, S<0>>, L<M42, E88, R, R>>::trace() == "S(0)[0]S(0)[1]->RR");

// ===========================================================================
// Row 17: merged collectives (PyTorch with declared flattened meshes), 16x16x16
// ===========================================================================
using E16 = extents<16, 16, 16>;
static_assert(pair_over<M42, pl<P, P>, pl<R, R>, E16>::at_most(1) && pair_over<M42, pl<P, P>, pl<R, R>, E16>::uses(AR, 1));
static_assert(pair_over<M42, pl<P, P>, pl<S<0>, S<0>>, E16>::at_most(1) &&
              pair_over<M42, pl<P, P>, pl<S<0>, S<0>>, E16>::uses(RS, 1));
// PyTorch 2 reduce_scatters (different tensor dims are not merged); spmd: one reduce_scatter
// over 8 ranks into S(0),S(1) — step.hpp defines it on boxes, so mixed target dims are fine.
static_assert(pair_over<M42, pl<P, P>, pl<S<0>, S<1>>, E16>::at_most(2) &&
              pair_over<M42, pl<P, P>, pl<S<0>, S<1>>, E16>::uses(RS, 1));
static_assert(pair_over<M42, pl<S<0>, S<0>>, pl<R, R>, E16>::at_most(1) &&
              pair_over<M42, pl<S<0>, S<0>>, pl<R, R>, E16>::uses(AG, 1));
// PyTorch 2 all_gathers; spmd: one over 8 ranks (same reason).
static_assert(pair_over<M42, pl<S<0>, S<1>>, pl<R, R>, E16>::at_most(2) &&
              pair_over<M42, pl<S<0>, S<1>>, pl<R, R>, E16>::uses(AG, 1));
// PyTorch: reduce_scatter + all_reduce + all_gather (3). spmd: fill mesh dim 2's shard
// with zeros (local, S -> P(sum)), then one reduce_scatter over all 8 ranks. On a 16 KiB
// tensor one launch beats three; the fill makes the reduce_scatter move the whole tensor.
using row17f = pair_over<M222, pl<P, P, S<0>>, pl<S<0>, S<0>, S<0>>, E16>;
static_assert(row17f::at_most(3) && row17f::collectives(1) && row17f::uses(FILL, 1) && row17f::uses(RS, 1));
static_assert(Plan<L<M222, E16, P, P, S<0>>, L<M222, E16, S<0>, S<0>, S<0>>>::cost_us() <=
              path_cost<L<M222, E16, P, P, S<0>>, L<M222, E16, P, P, R>, L<M222, E16, S<0>, P, R>,
                        L<M222, E16, S<0>, R, R>, L<M222, E16, S<0>, S<0>, R>, L<M222, E16, S<0>, S<0>, S<0>>>());
static_assert(pair_over<M222, pl<P, P, P>, pl<R, R, R>, E16>::at_most(1) &&
              pair_over<M222, pl<P, P, P>, pl<R, R, R>, E16>::uses(AR, 1));
// PyTorch: all_reduce, all_gather, all_reduce (3, the shard in between stops the merge).
// spmd: fill mesh dim 1 (S(0) -> P(sum), local), then one all_reduce over 8 ranks.
using row17h = pair_over<M222, pl<P, S<0>, P>, pl<R, R, R>, E16>;
static_assert(row17h::at_most(3) && row17h::collectives(1) && row17h::uses(FILL, 1) && row17h::uses(AR, 1));
static_assert(pair_over<M222, pl<P, R, P>, pl<R, R, R>, E16>::at_most(1) &&
              pair_over<M222, pl<P, R, P>, pl<R, R, R>, E16>::uses(AR, 1));
static_assert(Plan<L<M222, E16, P, R, P>, L<M222, E16, R, R, R>>::step(0).mesh_dims == 0b101);
// PyTorch 2 reduce_scatters; spmd: one over mesh dims {0, 1}.
static_assert(pair_over<M222, pl<P, P, R>, pl<S<0>, S<1>, R>, E16>::at_most(2) &&
              pair_over<M222, pl<P, P, R>, pl<S<0>, S<1>, R>, E16>::uses(RS, 1));
// [B] PyTorch 2 reduce_scatters (two merged, one separate); spmd: one over all 8 ranks.
static_assert(pair_over<M222, pl<P, P, P>, pl<S<0>, S<0>, S<1>>, E16>::at_most(2) &&
              pair_over<M222, pl<P, P, P>, pl<S<0>, S<0>, S<1>>, E16>::uses(RS, 1));

// ===========================================================================
// Row 18: merging reductions, 8x8 local tensors
// ===========================================================================
using E8x8 = extents<8, 8>;
static_assert(pair_over<M222, pl<P, P, P>, pl<R, R, R>, E8x8>::at_most(1));
static_assert(pair_over<M222, pl<P, P, R>, pl<R, R, R>, E8x8>::at_most(1));
static_assert(pair_over<M222, pl<P, R, P>, pl<R, R, R>, E8x8>::at_most(1));
// PyTorch 3 (all_reduce, all_gather, all_reduce); spmd: fill + one all_reduce.
using row18d = pair_over<M222, pl<P, S<0>, P>, pl<R, R, R>, extents<16, 8>>;
static_assert(row18d::at_most(3) && row18d::collectives(1) && row18d::uses(FILL, 1));
using E16x8 = extents<16, 8>;
static_assert(Plan<L<M222, E16x8, P, S<0>, P>, L<M222, E16x8, R, R, R>>::cost_us() <=
              path_cost<L<M222, E16x8, P, S<0>, P>, L<M222, E16x8, R, S<0>, P>, L<M222, E16x8, R, R, P>,
                        L<M222, E16x8, R, R, R>>());

}  // namespace

int main() { return 0; }
