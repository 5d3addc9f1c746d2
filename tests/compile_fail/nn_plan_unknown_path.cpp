// expect: a rule of the tensor-parallel plan matches no parameter of the model
// expect-also: fc9.weight
#include <boost/hana/adapt_struct.hpp>
#include <spmd/nn/modules.hpp>
#include <spmd/nn/parallelize.hpp>
#include <spmd/sim/sim.hpp>

struct two {
  spmd::nn::linear<4, 8> fc1;
  spmd::nn::linear<8, 2> fc2;
};
BOOST_HANA_ADAPT_STRUCT(two, fc1, fc2);

using M = spmd::mesh<2>::named<"tp">;
using plan = spmd::nn::tp_plan<spmd::nn::rule<"fc1.weight", spmd::nn::colwise>,
                               spmd::nn::rule<"fc9.weight", spmd::nn::rowwise>>;  // no fc9
void f(const two& h) { (void)spmd::nn::parallelize<M, spmd::sim::backend, spmd::nn::tensor_parallel<"tp", plan>>(h); }
int main() { return 0; }
