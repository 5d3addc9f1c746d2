// spmd/sim/sim.hpp — the local simulation backend: every rank's local tensor in one process.
//
//   dtensor.hpp       DTensor's API: distribute_tensor, from_local, factories, redistribute,
//                     local / to_local / full_tensor
//   execute.hpp       run a plan (a value, or a compile-time constant) on every rank's local
//   local_tensor.hpp  a tensor per rank (LocalTensor): per-rank ops, reconcile, rank_map,
//                     tensor_map, to_local_tensor / from_local
//   collectives.hpp   all_reduce, broadcast, all_gather, reduce_scatter, all_to_all on
//                     local tensors, over the whole mesh or some mesh dims' groups
//   local_int.hpp     an integer per rank (LocalIntNode): a dim's size when shards differ
//   local_mode.hpp    factories over a rank set (LocalTensorMode), rank_map, ranks()
//   per_rank.hpp      run single-rank code once per rank (maybe_run_for_local_tensor)
//   host_tensor.hpp   one plain tensor (shape + row-major data) and its factories
//   comm_counter.hpp  count the collectives run in a scope (CommDebugMode)
//   distribute.hpp    the value-level distribute / full_tensor the typed API and the CLI share
//   schedule.hpp      a plan step lowered to box operations (constexpr)
//   kernels.hpp       the copy and reduction loops
//   local_set.hpp, buffer.hpp, view.hpp, element.hpp   storage, pool, views, element types
#pragma once

#include "spmd/core/bfloat16.hpp"
#include "spmd/sim/buffer.hpp"
#include "spmd/sim/collectives.hpp"
#include "spmd/sim/comm_counter.hpp"
#include "spmd/sim/distribute.hpp"
#include "spmd/sim/dtensor.hpp"
#include "spmd/sim/element.hpp"
#include "spmd/sim/execute.hpp"
#include "spmd/sim/host_tensor.hpp"
#include "spmd/sim/kernels.hpp"
#include "spmd/sim/local_int.hpp"
#include "spmd/sim/local_mode.hpp"
#include "spmd/sim/local_set.hpp"
#include "spmd/sim/local_tensor.hpp"
#include "spmd/sim/per_rank.hpp"
#include "spmd/sim/schedule.hpp"
#include "spmd/sim/view.hpp"
