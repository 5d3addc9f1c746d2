// tools/element_limit.hpp — whether a tensor fits a command's limit on the elements it holds
// in memory, decided without multiplying past it.
//
// The text forms accept extents and mesh sizes up to 2^62 each (io/placement_text.hpp), so
// the product of a shape, or of a shape and the rank count, can overflow index_t (undefined
// behaviour; a wrapped product passed the check and the command died allocating). The
// product is therefore bounded factor by factor (core/element_count.hpp).
#pragma once

#include <string>

#include "spmd/core/config.hpp"
#include "spmd/core/element_count.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd_tools {

/// The elements of `shape`, when the tensor held once on each of `ranks` ranks is at most
/// `limit` elements in all; -1 when it is more.
inline spmd::index_t elements_within(const spmd::shape_vec& shape, spmd::index_t ranks, spmd::index_t limit) {
  return spmd::elements_within(shape, limit / (ranks > 0 ? ranks : 1));
}

/// The message when a tensor is over the limit: "shape '...' on mesh '...' is too large for
/// <command> (more than <limit> elements on <ranks> ranks in all)".
inline std::string too_large(const std::string& command, const std::string& shape, const std::string& mesh,
                             spmd::index_t ranks, spmd::index_t limit) {
  return "shape '" + shape + "' on mesh '" + mesh + "' is too large for " + command + " (more than " +
         std::to_string(limit) + " elements on its " + std::to_string(ranks) + " ranks in all)";
}

}  // namespace spmd_tools
