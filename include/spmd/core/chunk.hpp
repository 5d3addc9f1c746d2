// spmd/core/chunk.hpp — torch.chunk's split of one extent over n ranks.
#pragma once

#include "spmd/core/config.hpp"

namespace spmd {

/// The piece of an extent that one rank holds.
struct chunk_piece {
  index_t size;
  index_t start;  // relative to the extent being split
};

/// Split `size` over `n` ranks the way torch.chunk does and return rank r's piece.
///
/// Every rank but the tail gets `full = ceil(size / n)`; a rank whose start lies at or
/// past the end gets nothing and reports `start = size`.
///   chunk(5, 4, r).size  -> 2, 2, 1, 0
///   chunk(6, 4, r).size  -> 2, 2, 2, 0   (not 2, 2, 1, 1)
///   chunk(10, 3, r).size -> 4, 4, 2
/// @pre n >= 1, 0 <= r < n, size >= 0
SPMD_HD constexpr chunk_piece chunk(index_t size, index_t n, index_t r) {
  const index_t full = (size + n - 1) / n;
  const index_t start = full * r;
  if (start >= size) return {0, size};
  const index_t stop = start + full < size ? start + full : size;
  return {stop - start, start};
}

}  // namespace spmd
