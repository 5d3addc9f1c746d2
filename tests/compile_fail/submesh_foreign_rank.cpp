// expect: spmd::mesh: this rank is not in the mesh
#include <spmd/spmd.hpp>

// Rank 3 is not one of the ranks 0, 2, 4, 6.
using M = spmd::mesh<2, 2>::with_ranks<0, 2, 4, 6>::named<"dp", "tp">;
using S = M::sub<"tp">::containing<3>;
constexpr auto n = S::size;
int main() { return 0; }
