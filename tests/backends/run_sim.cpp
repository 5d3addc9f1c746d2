// tests/backends/run_sim.cpp — the typed suite on the simulation (every rank in this
// process): the harness's own check, and the simulation's typed path against its
// value-level path.
#include <cstdio>

#include "suite.hpp"

namespace {
struct sim_runner {
  using backend = spmd::sim::backend;
  static spmd::host::held_range held(spmd::index_t n) { return {0, n}; }
  template <class T>
  static spmd::host::local_set<T> execute(const spmd::plan& p, const spmd::shape_vec& global,
                                          const spmd::host::local_set<T>& in) {
    return spmd::sim::execute(p, global, in);
  }
  static spmd::index_t world() { return 8; }

  // Collectives on local tensors: the simulation's, for mesh index i.
  template <class M, class T>
  static spmd::host::host_tensor<T> all_reduce(const spmd::sim::local_tensor<T, M>& x,
                                               spmd::index_t i, spmd::reduce_op op, spmd::dim_mask g) {
    return spmd::sim::all_reduce(x, op, g).to_local(M::rank_at(i));
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> reduce_scatter(const spmd::sim::local_tensor<T, M>& x,
                                                   spmd::index_t i, spmd::reduce_op op, int dim,
                                                   spmd::dim_mask g) {
    return spmd::sim::reduce_scatter(x, op, dim, g).to_local(M::rank_at(i));
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> broadcast(const spmd::sim::local_tensor<T, M>& x,
                                              spmd::index_t i, spmd::index_t src, spmd::dim_mask g) {
    return spmd::sim::broadcast(x, src, g).to_local(M::rank_at(i));
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> all_gather(const spmd::sim::local_tensor<T, M>& x,
                                               spmd::index_t i, int dim, spmd::dim_mask g) {
    return spmd::sim::all_gather(x, dim, g).to_local(M::rank_at(i));
  }
  template <class M, class T>
  static spmd::host::host_tensor<T> all_to_all(const spmd::sim::local_tensor<T, M>& x,
                                               spmd::index_t i, int sd, int cd, spmd::dim_mask g) {
    return spmd::sim::all_to_all(x, sd, cd, g).to_local(M::rank_at(i));
  }
};
}  // namespace

int main() {
  suite::report rep;
  suite::value_level<sim_runner>(rep);
  suite::typed_cases<spmd::sim::backend, spmd::mesh<2, 2>>(rep);
  suite::typed_op_cases<spmd::sim::backend, spmd::mesh<2, 2>>(rep);
  suite::grad_cases<spmd::sim::backend, spmd::mesh<2, 2>>(rep);
  suite::training_cases<spmd::sim::backend, spmd::mesh<2, 2>>(rep);
  suite::typed_cases<spmd::sim::backend, spmd::mesh<2, 4>>(rep);
  suite::typed_op_cases<spmd::sim::backend, spmd::mesh<2, 4>>(rep);
  suite::grad_cases<spmd::sim::backend, spmd::mesh<2, 4>>(rep);
  suite::training_cases<spmd::sim::backend, spmd::mesh<2, 4>>(rep);
  {  // a mesh whose sizes are given at run time: one instantiation, bound to 2x2 then 2x4
    using D = spmd::mesh<spmd::dyn, spmd::dyn>;
    for (const spmd::index_t tp : {2, 4}) {
      spmd::bind_mesh<D>(spmd::dims<2>{2, tp});
      suite::typed_cases<spmd::sim::backend, D>(rep);
      suite::typed_op_cases<spmd::sim::backend, D>(rep);
      suite::grad_cases<spmd::sim::backend, D>(rep);
      suite::training_cases<spmd::sim::backend, D>(rep);
    }
  }
  suite::collective_cases<sim_runner, spmd::mesh<2, 2>>(rep);
  suite::collective_cases<sim_runner, spmd::mesh<2, 4>>(rep);
  std::printf("backend sim: %ld checks, %ld failed\n", rep.checks, rep.failures);
  return rep.failures == 0 && rep.checks > 0 ? 0 : 1;
}
