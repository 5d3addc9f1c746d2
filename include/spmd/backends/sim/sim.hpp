// spmd/backends/sim/sim.hpp — the simulation backend: every rank's local tensor in one
// process, with DTensor's API (spmd::runtime, seen from spmd::sim) and LocalTensor's.
//
//   api.hpp           spmd::sim::dtensor<T, L>, distribute_tensor, from_local, factories;
//                     redistribute, local / to_local / full_tensor come from runtime/dtensor.hpp
//   backend.hpp       spmd::sim::backend: what the runtime needs from the simulation
//   execute.hpp       run a plan (a value, or a compile-time constant) on every rank's local
//   local_tensor.hpp  a tensor per rank (LocalTensor): per-rank ops, reconcile, rank_map,
//                     tensor_map, to_local_tensor / from_local
//   collectives.hpp   all_reduce, broadcast, all_gather, reduce_scatter, all_to_all on
//                     local tensors, over the whole mesh or some mesh dims' groups
//   local_int.hpp     an integer per rank (LocalIntNode): a dim's size when shards differ
//   local_mode.hpp    factories over a rank set (LocalTensorMode), rank_map, ranks()
//   per_rank.hpp      run single-rank code once per rank (maybe_run_for_local_tensor)
//   local_random.hpp  uniform_, normal_, bernoulli_, dropout on local tensors (the
//                     dtensor versions and rand, randn: runtime/random.hpp)
// The host storage and loops it shares with MPI are in host/; the operators in
// runtime/ops/ (include those a program uses: runtime/ops/matmul.hpp, elementwise.hpp, ...).
#pragma once

#include "spmd/core/bfloat16.hpp"
#include "spmd/host/buffer.hpp"
#include "spmd/host/distribute.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/host_tensor.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/view.hpp"
#include "spmd/backends/sim/api.hpp"
#include "spmd/backends/sim/backend.hpp"
#include "spmd/backends/sim/collectives.hpp"
#include "spmd/backends/sim/execute.hpp"
#include "spmd/backends/sim/local_int.hpp"
#include "spmd/backends/sim/local_mode.hpp"
#include "spmd/backends/sim/local_random.hpp"
#include "spmd/backends/sim/local_tensor.hpp"
#include "spmd/backends/sim/per_rank.hpp"
#include "spmd/plan/lower.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/dtensor.hpp"
