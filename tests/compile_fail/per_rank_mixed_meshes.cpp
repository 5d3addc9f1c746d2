// expect: the per-rank arguments are over different rank sets
#include <spmd/backends/sim/sim.hpp>

int main() {
  auto a = spmd::sim::local_mode<spmd::mesh<2>>::ranks();
  auto b = spmd::sim::local_mode<spmd::mesh<3>>::ranks();
  spmd::sim::per_rank([](spmd::index_t x, spmd::index_t y) { return x + y; }, a, b);
}
