// expect: a rank in the rank list is negative
#include <spmd/spmd.hpp>

using M = spmd::mesh<2>::with_ranks<0, -1>;
constexpr auto n = M::size;
int main() { return 0; }
