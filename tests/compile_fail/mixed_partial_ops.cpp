// expect: two different partial ops in one layout
#include <spmd/spmd.hpp>

using L = spmd::layout<
    spmd::mesh<2, 2>,
    spmd::placements<spmd::partial<spmd::reduce_op::sum>, spmd::partial<spmd::reduce_op::max>>,
    spmd::extents<8>>;
auto shape = L{}.local_shape(0);
int main() { return 0; }
