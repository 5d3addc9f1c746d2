// spmd/core/head_tail.hpp — head-tail order: how a causal sequence is balanced over n ranks.
//
//   static_assert(spmd::head_tail::chunks(4, 1).head == 1 && spmd::head_tail::chunks(4, 1).tail == 6);
//   spmd::head_tail::position(16, 4, 2) == 14      // rank 0 holds chunks 0 and 7 (of 2): rows 2, 3 are 14, 15
//
// Under a causal mask the rank holding the last positions of a sequence computes the most
// scores (rank n − 1 of n sees every key, rank 0 a 1/n² share). Cutting the sequence into 2n
// equal chunks and giving rank i chunks i and 2n − 1 − i evens that out (PyTorch's
// context_parallel load balancer, torchtitan's CP). The tensor then holds the positions in that
// order along the sequence dim — rank 0's two chunks, then rank 1's, ... — so an ordinary
// Shard on that dim gives every rank its pair as one contiguous block; the attention kernels
// read the global position of each stored row from these functions (the ring's
// head_tail option, runtime/ops/ring_attention.hpp). A sequence of `length` positions is
// balanced over n ranks when 2n divides it.
#pragma once

#include "spmd/core/config.hpp"

namespace spmd::head_tail {

/// The two chunks rank `rank` of n holds: head = rank, tail = 2n − 1 − rank.
struct chunk_pair {
  index_t head = 0;
  index_t tail = 0;
};
SPMD_HD constexpr chunk_pair chunks(index_t n, index_t rank) { return {rank, 2 * n - 1 - rank}; }

/// Whether a sequence of `length` positions is balanced over n ranks (2n equal chunks).
SPMD_HD constexpr bool splits(index_t length, index_t n) { return n >= 1 && length % (2 * n) == 0; }

/// The global position held at stored row s of a sequence of `length` positions in head-tail
/// order over n ranks. @pre splits(length, n)
SPMD_HD constexpr index_t position(index_t length, index_t n, index_t s) {
  const index_t m = length / (2 * n);  // a chunk's positions
  const index_t rank = s / (2 * m), x = s % (2 * m);
  const chunk_pair c = chunks(n, rank);
  return x < m ? c.head * m + x : c.tail * m + (x - m);
}

/// The stored row of global position p (the inverse of position()).
SPMD_HD constexpr index_t stored_row(index_t length, index_t n, index_t p) {
  const index_t m = length / (2 * n);
  const index_t chunk = p / m, x = p % m;
  return chunk < n ? chunk * 2 * m + x : (2 * n - 1 - chunk) * 2 * m + m + x;
}

}  // namespace spmd::head_tail
