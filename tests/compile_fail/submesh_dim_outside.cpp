// expect: a sub-mesh dim is outside the mesh
#include <spmd/spmd.hpp>

// Mesh dims 0 and 1 exist; 2 does not.
using S = spmd::mesh<2, 4>::sub_dims<0, 2>;
constexpr auto n = S::group_size;
int main() { return 0; }
