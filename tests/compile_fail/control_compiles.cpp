// expect-success
// Control: a valid layout compiles with the same flags as the other cases, so the others
// fail for their own reason (not a bad include path or missing -std=c++20).
#include <spmd/spmd.hpp>

using M = spmd::mesh<2, 2>::with_ranks<3, 2, 1, 0>::named<"dp", "tp">;
using L =
    spmd::layout<M, spmd::placements<spmd::shard<0, 1>, spmd::shard<0, 0>>, spmd::extents<5, 3>>;
static_assert(L{}.local_shape(3) == spmd::dims<2>{2, 3});
static_assert(M::dim<"tp">() == 1 && M::mask<"dp", "tp">() == 3);
int main() { return 0; }
