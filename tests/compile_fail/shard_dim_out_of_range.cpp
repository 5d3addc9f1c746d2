// expect: a shard dim is outside the tensor's dims
#include <spmd/spmd.hpp>

// A 2-d tensor has dims 0 and 1 (or -2 and -1): shard<2> names no dim.
using L = spmd::layout<spmd::mesh<2>, spmd::placements<spmd::shard<2>>, spmd::extents<4, 4>>;
auto shape = L{}.local_shape(0);
int main() { return 0; }
