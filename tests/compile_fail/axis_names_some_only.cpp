// expect: name every mesh dim or none of them
#include <spmd/spmd.hpp>

using M = spmd::mesh<2, 2, 2>::named<"dp", "tp">;
constexpr auto n = M::size;
int main() { return 0; }
