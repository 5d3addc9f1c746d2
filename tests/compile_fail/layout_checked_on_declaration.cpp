// expect: a shard dim is outside the tensor's dims
#include <spmd/spmd.hpp>

// An invalid layout must fail as soon as it is declared, constructed or copied, not only
// when something asks it a question (the checks once lived in spec() alone).
using L = spmd::layout<spmd::mesh<2>, spmd::placements<spmd::shard<2>>, spmd::extents<4, 4>>;
L make() { return L{}; }
int main() {
  L l = make();
  (void)l;
  return static_cast<int>(sizeof(L));
}
