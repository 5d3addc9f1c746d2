// expect: a shard dim is outside the tensor's dims
#include <spmd/spmd.hpp>

// Negative dims count from the end: a 2-d tensor has -1 and -2, not -3.
using L = spmd::layout<spmd::mesh<2, 2>, spmd::placements<spmd::replicate, spmd::shard<-3>>,
                       spmd::extents<4, 4>>;
auto shape = L{}.local_shape(0);
int main() { return 0; }
