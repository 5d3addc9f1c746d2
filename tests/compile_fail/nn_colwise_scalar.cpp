// expect: colwise on a parameter with no dims
#include <boost/hana/define_struct.hpp>
#include <spmd/nn/modules.hpp>
#include <spmd/nn/parallelize.hpp>
#include <spmd/sim/sim.hpp>

struct scaled {
  BOOST_HANA_DEFINE_STRUCT(scaled, (spmd::tensor<float, spmd::extents<>>, scale));
};

using M = spmd::mesh<2>::named<"tp">;
using plan = spmd::nn::tp_plan<spmd::nn::rule<"scale", spmd::nn::colwise>>;
void f(const scaled& h) { (void)spmd::nn::parallelize<M, spmd::sim::backend, spmd::nn::tensor_parallel<"tp", plan>>(h); }
int main() { return 0; }
