// bench/compile/auto_search.cpp — the automatic sharding search of spmd-train's gpt (2 blocks)
// run by the compiler: what `auto_parallel` and a `static_assert` on a traced model cost.
//
//   g++ -std=c++20 -O0 -fconstexpr-ops-limit=4294967296 -I include -c bench/compile/auto_search.cpp \
//       -DMESH_A=2 -DMESH_B=4 -DSEARCH -o /dev/null       # the search
//   (the same without -DSEARCH: the includes and the trace alone, the baseline)
//
// bench/RESULTS.md (issue 57, third stop) has the figures; docs/auto.md says where the time goes.
#include "spmd/autoshard/search.hpp"
#include "spmd/nn/gpt.hpp"
#include "spmd/nn/step_graph.hpp"

#ifndef MESH_A
#define MESH_A 2
#endif
#ifndef MESH_B
#define MESH_B 4
#endif
#ifndef BLOCKS
#define BLOCKS 2
#endif

namespace {

constexpr spmd::autoshard::graph gpt_step() {
  spmd::autoshard::graph g{spmd::mesh_shape_vec{{MESH_A, MESH_B}, 2}};
  const int tokens = g.data({8, 16}, 8);
  const spmd::nn::traced m = spmd::nn::trace<spmd::nn::gpt<64, 16, 32, 4, BLOCKS>>(g, tokens);
  g.loss = spmd::nn::trace_cross_entropy<64>(g, m.out, g.data({8, 16}, 8));
  return g;
}

}  // namespace

#ifdef SEARCH
static_assert(spmd::autoshard::search(gpt_step()).ok());
#else
static_assert(!gpt_step().ops.empty());
#endif
