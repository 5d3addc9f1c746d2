// spmd/backends/sim/names.hpp — the simulation's namespace sees the runtime's names.
//
// DTensor's API and the operators live in spmd::runtime, over any backend; spmd::sim adds
// the simulation's backend type, its factories and LocalTensor's API. With this, code that
// writes spmd::sim::relu(x) or spmd::sim::local_set<float> keeps compiling.
#pragma once

#include "spmd/runtime/backend.hpp"

namespace spmd::sim {
using namespace spmd::runtime;
namespace detail {
using namespace spmd::runtime::detail;
}
}  // namespace spmd::sim
