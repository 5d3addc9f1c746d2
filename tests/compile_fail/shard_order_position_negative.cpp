// expect: a shard order position must be >= 0
#include <spmd/spmd.hpp>

using L = spmd::layout<spmd::mesh<2>, spmd::placements<spmd::shard<0, -2>>, spmd::extents<8>>;
auto shape = L{}.local_shape(0);
int main() { return 0; }
