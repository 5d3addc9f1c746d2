// expect: inconsistent shard order
#include <spmd/spmd.hpp>

// Positions on some of tensor dim 1's shards only: all of them or none.
using L = spmd::layout<spmd::mesh<2, 2, 2>,
                       spmd::placements<spmd::shard<1, 1>, spmd::replicate, spmd::shard<1>>,
                       spmd::extents<3, 8>>;
auto shape = L{}.local_shape(0);
int main() { return 0; }
