// spmd/runtime/copy_into.hpp — copy_into(dst, src): src's values written into the memory dst
// already has, rank by rank.
//
// What a captured step (backends/cuda/graph.hpp) reads and writes must stay where the capture
// saw it: a step's inputs are refilled in place before each replay, and its results (the loss,
// the norm) copied into tensors made before the capture, to be read after it. An assignment
// `dst = src` would hand dst src's buffers instead.
#pragma once

#include <cstring>
#include <stdexcept>
#include <string>

#include "spmd/runtime/backend.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd::runtime {

/// Writes each held rank's block of src into dst's block of that rank (same layout: the blocks
/// have the same shapes, checked for layouts whose sizes are run-time values). On the host a
/// block that dst shares with another tensor is made its own first (copy-on-write).
template <class T, class L, class B>
void copy_into(dtensor<T, L, B>& dst, const dtensor<T, L, B>& src) {
  auto& d = dst.locals(detail::internal_t{});
  const auto& s = src.locals();
  for (const index_t i : d.held()) {
    const index_t n = s.size(i);
    if (d.size(i) != n)
      throw std::invalid_argument("spmd::copy_into: mesh index " + std::to_string(i) + "'s block has " +
                                  std::to_string(d.size(i)) + " elements in the destination and " + std::to_string(n) +
                                  " in the source");
    if (n == 0) continue;
    if constexpr (host_memory<B>)
      std::memcpy(d.data(i), s.cdata(i), static_cast<std::size_t>(n) * sizeof(T));
    else
      B::copy_elements(d, i, 0, s, i, 0, n);
  }
}

}  // namespace spmd::runtime
