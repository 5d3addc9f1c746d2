// expect: the elements of an array of modules must be placed alike
#include <array>
#include <boost/hana/adapt_struct.hpp>
#include <spmd/nn/modules.hpp>
#include <spmd/nn/parallelize.hpp>
#include <spmd/sim/sim.hpp>

struct stack {
  std::array<spmd::nn::linear<4, 4>, 2> layers;
};
BOOST_HANA_ADAPT_STRUCT(stack, layers);

using M = spmd::mesh<2>::named<"tp">;
using plan = spmd::nn::tp_plan<spmd::nn::rule<"layers.0.weight", spmd::nn::colwise>>;  // layer 1 stays replicated
void f(const stack& h) { (void)spmd::nn::parallelize<M, spmd::sim::backend, spmd::nn::tensor_parallel<"tp", plan>>(h); }
int main() { return 0; }
