// expect: inconsistent shard order
#include <spmd/spmd.hpp>

// Two shards of tensor dim 0 both claim position 0.
using L = spmd::layout<spmd::mesh<2, 2>, spmd::placements<spmd::shard<0, 0>, spmd::shard<0, 0>>,
                       spmd::extents<8>>;
auto shape = L{}.local_shape(0);
int main() { return 0; }
