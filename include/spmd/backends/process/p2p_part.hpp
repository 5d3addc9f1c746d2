// spmd/backends/process/p2p_part.hpp — a process's part in one slot of a point-to-point
// schedule (plan/p2p_schedule.hpp), for the backends with one process per rank (MPI, NCCL):
// the mesh indices it sends to and receives from, and the slot counted as the simulation
// counts it. How the block travels is the backend's (MPI_Sendrecv; grouped ncclSend and
// ncclRecv).
#pragma once

#include <cstdint>

#include "spmd/core/config.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/plan/p2p_schedule.hpp"
#include "spmd/runtime/comm_counter.hpp"

namespace spmd::process {

/// The mesh indices a rank sends its block to and receives a block from in a slot (−1: none).
struct p2p_part {
  index_t send_to = -1;
  index_t recv_from = -1;
  bool idle() const { return send_to < 0 && recv_from < 0; }
};

/// Mesh index `me`'s part in a slot over mesh dim `dim` of M, whose blocks are `block_bytes`
/// each: action(n, j) is what group position j of n does. Records the bytes every rank of the
/// mesh receives in the slot (runtime::comm_counter), as the simulation does.
template <class M, class Action>
p2p_part p2p_part_of(index_t me, std::int64_t block_bytes, int dim, Action&& action) {
  const mesh_shape_vec shape = M::shape_vec();
  const int n = static_cast<int>(shape[dim]);
  if (n <= 1) return {};
  index_t receivers = 0;
  for (int j = 0; j < n; ++j) receivers += action(n, j).recv_from >= 0;
  const dim_mask mask = dim_mask{1} << dim;
  runtime::detail::record_p2p(mask, block_bytes * receivers * group_count(shape, mask));
  coord_vec c = unravel(shape, me);
  const p2p::action a = action(n, static_cast<int>(c[dim]));
  auto at = [&](int j) {
    if (j < 0) return index_t{-1};
    c[dim] = j;
    return ravel(shape, c);
  };
  p2p_part part;
  part.send_to = at(a.send_to);
  part.recv_from = at(a.recv_from);
  return part;
}

}  // namespace spmd::process
