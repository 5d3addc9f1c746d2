// expect: spmd::layout: this rank is not in the mesh
#include <spmd/spmd.hpp>

using L = spmd::layout<spmd::mesh<4>::with_ranks<0, 2, 4, 6>, spmd::placements<spmd::shard<0>>,
                       spmd::extents<8>>;
auto e = L{}.local_extents<3>();
int main() { return 0; }
