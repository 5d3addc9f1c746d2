// expect: one data-parallel dim, FSDP or DDP
#include <boost/hana/adapt_struct.hpp>
#include <spmd/nn/modules.hpp>
#include <spmd/nn/parallelize.hpp>
#include <spmd/sim/sim.hpp>

struct one_layer {
  spmd::nn::linear<4, 8> fc;
};
BOOST_HANA_ADAPT_STRUCT(one_layer, fc);

using M = spmd::mesh<2, 2>::named<"a", "b">;
void f(const one_layer& h) {
  (void)spmd::nn::parallelize<M, spmd::sim::backend, spmd::nn::fsdp<"a">, spmd::nn::ddp<"b">>(h);
}
int main() { return 0; }
