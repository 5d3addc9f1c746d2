// spmd/core/element_count.hpp — a shape's element count, bounded factor by factor so that no
// product overflows index_t on the way.
//
//   spmd::elements_within(shape, spmd::max_elements)   // the count, or -1 when over
//
// Run-time extents reach the library through layouts (core/layout.hpp), host tensors and
// files; each bounds its element count with this before anything multiplies them out.
#pragma once

#include "spmd/core/config.hpp"

namespace spmd {

/// The most elements a tensor may hold: 2^62, so that block arithmetic and element counts
/// (and their sums over a few tensors) never overflow index_t.
inline constexpr index_t max_elements = index_t{1} << 62;

/// The product of `shape`'s extents (each >= 0), or -1 when it is more than `limit`. An empty
/// tensor holds 0 elements however long its other dims are.
template <class Shape>
SPMD_HD constexpr index_t elements_within(const Shape& shape, index_t limit) {
  for (const index_t e : shape)
    if (e == 0) return 0;
  index_t n = 1;
  for (const index_t e : shape) {
    if (n > limit / e) return -1;
    n *= e;
  }
  return n;
}

}  // namespace spmd
