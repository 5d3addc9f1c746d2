// expect: name sub-mesh dims in mesh order, each once
#include <spmd/spmd.hpp>

using Repeated = spmd::mesh<2, 4>::sub_dims<0, 0>;
int main() { return static_cast<int>(Repeated::group_size); }
