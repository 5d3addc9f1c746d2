// expect: the rank list's length differs from the mesh size
#include <spmd/spmd.hpp>

using M = spmd::mesh<2, 2>::with_ranks<0, 1, 2>;
constexpr auto n = M::size;
int main() { return 0; }
