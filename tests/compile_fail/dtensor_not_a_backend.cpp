// expect: the third argument is not a backend type
// A dtensor over something that is not a backend (here a layout) is refused with a sentence.
#include <spmd/backends/sim/sim.hpp>

using L = spmd::layout<spmd::mesh<4>, spmd::placements<spmd::shard<0>>, spmd::extents<8>>;
int main() {
  spmd::runtime::dtensor<float, L, L>* p = nullptr;
  (void)sizeof(*p);
}
