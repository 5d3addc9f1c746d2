// expect: the rank list repeats a rank
#include <spmd/spmd.hpp>

using M = spmd::mesh<4>::with_ranks<0, 2, 4, 2>;
constexpr auto n = M::size;
int main() { return 0; }
