// tools/element_limit.hpp — whether a tensor fits a command's limits: on the elements it holds
// in memory, decided without multiplying past it, and on the ranks it lists.
//
// The text forms accept extents and mesh sizes up to 2^62 each (io/placement_text.hpp), so
// the product of a shape, or of a shape and the rank count, can overflow index_t (undefined
// behaviour; a wrapped product passed the check and the command died allocating). The
// product is therefore bounded factor by factor (core/element_count.hpp).
#pragma once

#include <stdexcept>
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

/// The most ranks a command lists or holds. Meshes of up to 2^62 ranks parse, so that plans
/// for them can be shown; an empty tensor passes every element limit, so the rank count needs
/// limits of its own, chosen so that a command stays well under 1 GB (also under ASan, whose
/// fuzzer stops at 2 GB):
/// - `layout` lists each rank's box: 2^20 ranks take 0.6 GB as JSON;
/// - `rand`, `load` and `run` also hold each rank's local tensor and data (and `run` each
///   step's schedule: a few ops per rank, and an all_to_all's pieces, at most one per
///   element): 2^16 ranks.
inline constexpr spmd::index_t max_listed_ranks = spmd::index_t{1} << 20;
inline constexpr spmd::index_t max_data_ranks = spmd::index_t{1} << 16;

/// Throws std::invalid_argument naming the mesh when it has more than `limit` ranks.
inline void check_ranks(const std::string& command, const std::string& mesh, spmd::index_t ranks,
                        spmd::index_t limit) {
  if (ranks > limit)
    throw std::invalid_argument("mesh '" + mesh + "' has " + std::to_string(ranks) + " ranks; spmd-plan " +
                                command + " takes at most " + std::to_string(limit));
}

/// The message when a tensor is over the limit: "shape '...' on mesh '...' is too large for
/// <command> (more than <limit> elements on <ranks> ranks in all)".
inline std::string too_large(const std::string& command, const std::string& shape, const std::string& mesh,
                             spmd::index_t ranks, spmd::index_t limit) {
  return "shape '" + shape + "' on mesh '" + mesh + "' is too large for " + command + " (more than " +
         std::to_string(limit) + " elements on its " + std::to_string(ranks) + " ranks in all)";
}

}  // namespace spmd_tools
