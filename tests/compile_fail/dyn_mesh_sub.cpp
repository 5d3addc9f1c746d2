// expect: the sub-mesh types of a mesh with a dynamic size are not known at compile time
#include <spmd/core/mesh.hpp>

// A sub-mesh's group list is a type; over a dynamic mesh its length is a run-time number.
int main() {
  using M = spmd::mesh<spmd::dyn, 4>::named<"dp", "tp">;
  return static_cast<int>(M::sub<"tp">::group_size);
}
