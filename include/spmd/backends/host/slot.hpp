// spmd/backends/host/slot.hpp — a rank's local while a plan runs, and what a step does to it.
//
// Both host executors (the simulation's and MPI's) walk a plan step by step over slots: a slot
// points at the data a rank holds and owns it, or borrows it from a const input (never
// written then). `dispose` applies a step's disposition (plan/lower.hpp): keep the buffer,
// modify it in place when it is owned and large enough, or take a fresh one from the pool.
#pragma once

#include <utility>

#include "spmd/backends/host/buffer.hpp"
#include "spmd/backends/host/kernels.hpp"
#include "spmd/core/config.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::host::detail {

/// A rank's local while a plan runs: `data` is read (and written when `own` holds it);
/// an empty `own` means the data is borrowed from the caller's input.
template <class T>
struct slot {
  T* data = nullptr;
  buffer<T> own;
  shape_vec shape{};
};

template <class T>
SPMD_SIM_INLINE void dispose(const rank_plan& p, slot<T>& in, slot<T>& out) {
  switch (p.how) {
    case disposition::keep:
      out.data = in.data;
      out.own = std::move(in.own);
      break;
    case disposition::modify:
      if (in.own && in.own.capacity() >= p.elems) {
        out.data = in.data;
        out.own = std::move(in.own);
        break;
      }
      [[fallthrough]];
    case disposition::fresh:
      out.own = buffer<T>(p.elems);
      out.data = out.own.data();
      break;
  }
  out.shape = p.shape;
}

}  // namespace spmd::host::detail
