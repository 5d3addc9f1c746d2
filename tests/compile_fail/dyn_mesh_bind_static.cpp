// expect: this mesh has no dynamic size (spmd::dyn) to bind
#include <spmd/core/mesh.hpp>

// Binding is for dynamic sizes; a static mesh's are its type's.
int main() {
  spmd::bind_mesh<spmd::mesh<2, 4>>(spmd::dims<2>{2, 4});
}
