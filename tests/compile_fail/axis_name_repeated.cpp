// expect: two mesh dims have the same name
#include <spmd/spmd.hpp>

using M = spmd::mesh<2, 2>::named<"dp", "dp">;
constexpr auto n = M::size;
int main() { return 0; }
