// spmd/backends/cuda/grid_emulation.hpp — run a kernel body for every block and thread index
// of a grid on the host, so that the CPU test suite checks the device index arithmetic on
// machines without a GPU. Blocks and threads run last to first: a body that relies on an
// order of execution, which a GPU does not give, shows up as a wrong result.
#pragma once

#include "spmd/core/config.hpp"

namespace spmd::cuda {

/// f(block, thread, blocks, threads) for every block < blocks and thread < threads.
template <class F>
void emulate_grid(index_t blocks, index_t threads, F&& f) {
  for (index_t b = blocks - 1; b >= 0; --b)
    for (index_t t = threads - 1; t >= 0; --t) f(b, t, blocks, threads);
}

}  // namespace spmd::cuda
