// expect: a mesh with a dynamic size cannot list its ranks
#include <spmd/core/mesh.hpp>

// A rank list's length is a compile-time number; a dynamic mesh's size is not.
int main() {
  using M = spmd::mesh<spmd::dyn>::with_ranks<0, 2, 4>;
  return static_cast<int>(M::ndim);
}
