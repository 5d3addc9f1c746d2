// expect: the layout's mesh is not the mesh the graph was searched on
#include <spmd/autoshard/auto_parallel.hpp>
#include <spmd/ops/matmul.hpp>
#include <spmd/ops/reduction.hpp>

namespace as = spmd::autoshard;
struct step {  // one product on a mesh of 2
  static constexpr as::graph make() {
    as::graph g{spmd::mesh_shape_vec{{2}, 1}};
    const int x = g.data({8, 4}), w = g.param({4, 4});
    g.loss = g.apply<spmd::ops::reduction<spmd::ops::reduce_kind::sum, false, -1>>({g.apply<spmd::ops::matmul_t>({x, w})});
    return g;
  }
};
using W = as::auto_parallel<step>::layout<1, spmd::mesh<4>>;  // searched on 2 ranks, asked on 4
W w;
int main() { return 0; }
