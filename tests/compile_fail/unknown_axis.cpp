// expect: no mesh dim has this name
#include <spmd/spmd.hpp>

using M = spmd::mesh<2, 4>::named<"dp", "tp">;
constexpr int d = M::dim<"pp">();
int main() { return 0; }
