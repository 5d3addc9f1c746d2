// spmd/core/box_runs.hpp — a box of a row-major tensor as runs along its last dim: the unit in
// which a rank's block is generated (random draws) or read from a file (checkpoints). Each
// run is contiguous in the global tensor and in the box's own row-major local.
#pragma once

#include "spmd/core/layout_spec.hpp"

namespace spmd {

/// Calls f(g, at, n) for each run of `box` within a tensor of shape `global`: g the run's
/// global row-major index, at its start in the box's row-major local, n its length (in
/// elements). A 0-d tensor is one run of 1; an empty box has none.
template <class F>
void for_each_box_run(const local_box& box, const shape_vec& global, F&& f) {
  const int rank = global.size();
  if (rank == 0) {
    f(index_t{0}, index_t{0}, index_t{1});
    return;
  }
  index_t gstride[max_tensor_dims]{};
  index_t s = 1;
  for (int d = rank - 1; d >= 0; --d) {
    gstride[d] = s;
    s *= global[d];
  }
  const index_t run = box.shape[rank - 1];
  index_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= box.shape[d];
  if (run == 0 || rows == 0) return;
  index_t idx[max_tensor_dims]{};
  for (index_t row = 0; row < rows; ++row) {
    index_t g = box.offset[rank - 1];
    for (int d = 0; d < rank - 1; ++d) g += (box.offset[d] + idx[d]) * gstride[d];
    f(g, row * run, run);
    for (int d = rank - 2; d >= 0; --d) {
      if (++idx[d] < box.shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace spmd
