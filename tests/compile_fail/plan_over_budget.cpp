// expect: the compile-time plan search examines more moves than SPMD_PLAN_CONSTEXPR_WORK allows
// A 5-d mesh with three tensor dims: the exact search creates 9,464 states.
// Before the budget, clang stopped here with "constexpr evaluation hit maximum step limit;
// possible infinite loop?" (g++ stopped likewise, "operation count exceeds limit", on a
// larger 5-d case, bench/RESULTS.md).
#include <spmd/plan.hpp>

using M = spmd::mesh<2, 2, 2, 2, 2>;
using E = spmd::extents<8, 8, 8>;
using A = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::shard<1>, spmd::shard<2>, spmd::shard<0>, spmd::shard<1>>, E>;
using B = spmd::layout<M, spmd::placements<spmd::shard<2>, spmd::shard<0>, spmd::shard<1>, spmd::replicate, spmd::shard<2>>, E>;
static_assert(spmd::plan_of<A, B, float>::size() > 0);
int main() {}
