// tests/ops/propagation/static_propagation.cpp — the compiler's choices for the canonical
// cases, as static_asserts: this file compiling is the test.
#include <type_traits>

#include "spmd/ops/matmul.hpp"
#include "spmd/ops/typed_op.hpp"

namespace {

using namespace spmd;
template <class... P>
using pl = placements<P...>;
template <class Op, class Forced, class... L>
using out_of = typename ops::resolved<Op, float, Forced, L...>::out_placements;

// 1-d mesh of 4: the three canonical matmul propagations.
using M = mesh<4>;
using X_S0 = layout<M, pl<shard<0>>, extents<16, 8>>;
using X_R = layout<M, pl<replicate>, extents<16, 8>>;
using X_S1 = layout<M, pl<shard<1>>, extents<16, 8>>;
using W_R = layout<M, pl<replicate>, extents<8, 12>>;
using W_S1 = layout<M, pl<shard<1>>, extents<8, 12>>;
using W_S0 = layout<M, pl<shard<0>>, extents<8, 12>>;
static_assert(std::is_same_v<out_of<ops::matmul, void, X_S0, W_R>, pl<shard<0>>>);   // x S(0) @ w R
static_assert(std::is_same_v<out_of<ops::matmul, void, X_R, W_S1>, pl<shard<1>>>);   // x R @ w S(1)
static_assert(std::is_same_v<out_of<ops::matmul, void, X_S1, W_S0>, pl<partial<>>>);  // x S(1) @ w S(0)
static_assert(std::is_same_v<out_of<ops::matmul, void, X_R, W_R>, pl<replicate>>);
// Nothing moves in those: the inputs keep their own layouts.
static_assert(!ops::resolved<ops::matmul, float, void, X_S1, W_S0>::input_moves<0> &&
              !ops::resolved<ops::matmul, float, void, X_S1, W_S0>::input_moves<1>);
static_assert(!ops::resolved<ops::matmul, float, void, X_S1, W_S0>::result.costed);

// A partial input passes through when the other is replicated (linearity) ...
using X_P = layout<M, pl<partial<>>, extents<16, 8>>;
static_assert(std::is_same_v<out_of<ops::matmul, void, X_P, W_R>, pl<partial<>>>);
// ... but P(max) is not linear: it is reduced first, and the product is costed.
using X_Pmax = layout<M, pl<partial<reduce_op::max>>, extents<16, 8>>;
static_assert(ops::resolved<ops::matmul, float, void, X_Pmax, W_R>::result.costed);
static_assert(!std::is_same_v<out_of<ops::matmul, void, X_Pmax, W_R>, pl<partial<reduce_op::max>>>);

// Inputs that fit no strategy are redistributed the cheapest way. x S(0) @ w S(0) with a
// large x keeps x and gathers the small w ...
using XBig_S0 = layout<M, pl<shard<0>>, extents<4096, 8>>;
using R_00 = ops::resolved<ops::matmul, float, void, XBig_S0, W_S0>;
static_assert(R_00::result.costed);
static_assert(!R_00::input_moves<0> && R_00::input_moves<1>);
static_assert(std::is_same_v<R_00::input_placements<1>, pl<replicate>>);
static_assert(std::is_same_v<R_00::out_placements, pl<shard<0>>>);
// ... while with a small x, turning x's shards to S(1) (one all_to_all of 16 x 8) and keeping
// w S(0) is a hair cheaper than gathering w, and the product is P(sum).
using R_small = ops::resolved<ops::matmul, float, void, X_S0, W_S0>;
static_assert(R_small::input_moves<0> && !R_small::input_moves<1>);
static_assert(std::is_same_v<R_small::out_placements, pl<partial<>>>);

// A forced output (out_sharding): the cheapest way to produce it.
using F_R = ops::resolved<ops::matmul, float, pl<replicate>, X_S1, W_S0>;
static_assert(std::is_same_v<F_R::out_placements, pl<replicate>>);
static_assert(F_R::result.forced);
using F_S0 = ops::resolved<ops::matmul, float, pl<shard<0>>, X_S0, W_R>;  // already so
static_assert(!F_S0::result.costed && !F_S0::output_moves);

// 2-d mesh (dp, tp): the tensor-parallel pair.
using M2 = mesh<2, 4>::named<"dp", "tp">;
using H = layout<M2, pl<shard<0>, replicate>, extents<16, 32>>;        // batch on dp
using W1 = layout<M2, pl<replicate, shard<0>>, extents<64, 32>>;       // (out, in): colwise
using W2 = layout<M2, pl<replicate, shard<1>>, extents<32, 64>>;       // (out, in): rowwise
using Y1 = ops::resolved<ops::matmul_t, float, void, H, W1>;
static_assert(std::is_same_v<Y1::out_placements, pl<shard<0>, shard<1>>>);
static_assert(!Y1::result.costed);
using Y1L = layout<M2, Y1::out_placements, Y1::out_extents_type>;
using Y2 = ops::resolved<ops::matmul_t, float, void, Y1L, W2>;
static_assert(std::is_same_v<Y2::out_placements, pl<shard<0>, partial<>>>);  // one all_reduce left
static_assert(!Y2::result.costed);

// Mesh dims of size 1 hold the same blocks whatever they say.
using M11 = mesh<1, 4>;
using XU = layout<M11, pl<shard<1>, shard<0>>, extents<16, 8>>;
using WU = layout<M11, pl<replicate, replicate>, extents<8, 12>>;
static_assert(!ops::resolved<ops::matmul, float, void, XU, WU>::result.costed);
static_assert(!ops::resolved<ops::matmul, float, void, XU, WU>::input_moves<0>);

// Output extents follow the inputs, static or dynamic.
using XD = layout<M, pl<shard<0>>, extents<dyn, 8>>;
static_assert(std::is_same_v<ops::resolved<ops::matmul, float, void, XD, W_R>::out_extents_type,
                             extents<dyn, 12>>);

}  // namespace

int main() { return 0; }
