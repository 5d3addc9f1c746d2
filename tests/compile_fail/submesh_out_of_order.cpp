// expect: name sub-mesh dims in mesh order, each once
#include <spmd/spmd.hpp>

// "tp" is mesh dim 1 and "dp" mesh dim 0: a sub-mesh names them in mesh order.
using M = spmd::mesh<2, 4>::named<"dp", "tp">;
using S = M::sub<"tp", "dp">::containing<0>;
constexpr auto n = S::size;
int main() { return 0; }
