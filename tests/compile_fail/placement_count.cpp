// expect: the number of placements differs from the number of mesh dims
#include <spmd/spmd.hpp>

// A 2-d mesh needs two placements.
using L = spmd::layout<spmd::mesh<2, 4>, spmd::placements<spmd::shard<0>>, spmd::extents<8>>;
auto shape = L{}.local_shape(0);
int main() { return 0; }
