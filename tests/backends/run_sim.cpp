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
};
}  // namespace

int main() {
  suite::report rep;
  suite::value_level<sim_runner>(rep);
  suite::typed_cases<spmd::sim::backend, spmd::mesh<2, 2>>(rep);
  suite::typed_cases<spmd::sim::backend, spmd::mesh<2, 4>>(rep);
  std::printf("backend sim: %ld checks, %ld failed\n", rep.checks, rep.failures);
  return rep.failures == 0 && rep.checks > 0 ? 0 : 1;
}
