// expect: f(rank) must return a spmd::sim::host_tensor<T>
#include <spmd/backends/sim/sim.hpp>

int main() {
  auto x = spmd::sim::rank_map<spmd::mesh<2>>([](spmd::index_t r) { return float(r); });
}
