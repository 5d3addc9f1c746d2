// expect: from a world size alone only a mesh with one dynamic size can be bound
#include <spmd/core/mesh.hpp>

// Two dynamic sizes: the world size does not say how to split it.
int main() {
  spmd::bind_mesh<spmd::mesh<spmd::dyn, spmd::dyn>>(8);
}
