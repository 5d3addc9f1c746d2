// expect: a sub-mesh needs at least one mesh dim
#include <spmd/spmd.hpp>

using None = spmd::mesh<2, 4>::named<"dp", "tp">::sub<>;
int main() { return static_cast<int>(None::group_size); }
