// spmd/host/slot.hpp — a rank's local while a plan runs, and what a step does to it.
//
// Both host executors (the simulation's and MPI's) walk a plan step by step over slots: a slot
// points at the data a rank holds and owns it (alone, or shared with replicas and a const
// input: never written then), or borrows it. `dispose` applies a step's disposition (plan/lower.hpp): keep the buffer,
// modify it in place when it is owned and large enough, or take a fresh one from the pool.
// `checked_schedules` is the value-level entry both share: the plan and its input checked,
// the schedules built.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/host/buffer.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/core/config.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::host::detail {

/// A rank's local while a plan runs: `data` is read, and written only when `own` is this
/// slot's alone (`writable`). `own` may share its block with other ranks (replicas) or with
/// the caller's const input; an empty `own` with data means the data is borrowed. `Buf`:
/// host::buffer<T>, or a device backend's buffer (MPI and NCCL run the same steps).
template <class T, class Buf = buffer<T>>
struct slot {
  T* data = nullptr;
  Buf own;
  shape_vec shape{};
};

/// True when the slot may write its block in place: it owns it, and no one else does.
template <class Buf>
SPMD_SIM_INLINE bool writable(const Buf& b) {
  if constexpr (requires { b.unique(); }) return b.unique();
  else return static_cast<bool>(b);
}

/// A step's disposition (plan/lower.hpp) for one rank: keep the buffer, modify it in place
/// when the slot alone owns it and it is large enough, or take a fresh one.
template <class T, class Buf>
SPMD_SIM_INLINE void dispose(const rank_plan& p, slot<T, Buf>& in, slot<T, Buf>& out) {
  switch (p.how) {
    case disposition::keep:
      out.data = in.data;
      out.own = std::move(in.own);
      break;
    case disposition::modify:
      if (writable(in.own) && in.own.capacity() >= p.elems) {
        out.data = in.data;
        out.own = std::move(in.own);
        break;
      }
      [[fallthrough]];
    case disposition::fresh:
      out.own = Buf(p.elems);
      out.data = out.own.data();
      break;
  }
  out.shape = p.shape;
}

/// The schedules of plan `p` for `global`, after checking what a value-level execute is given:
/// no integer P(avg), an input over the plan's mesh whose held locals have the shapes of the
/// plan's first state. Throws std::invalid_argument naming `who` and what is wrong.
/// (`Set`: a local_set<T>, or a device backend's set with the same shape interface.)
template <class T, class Set>
std::vector<step_schedule> checked_schedules(const plan& p, const shape_vec& global,
                                             const Set& in, const char* who) {
  for (int i = 0; i < p.steps.size(); ++i)  // every reduction's op is held by a state
    for (const layout_spec* s : {&p.steps[i].from, &p.steps[i].to})
      if (holds_partial(s->placements, reduce_op::avg)) check_reduce_op<T>(reduce_op::avg, who);
  std::vector<step_schedule> scheds = build_schedules(p, global, who);
  if (p.steps.size() > 0) {
    const layout_spec& from = p.steps[0].from;
    if (in.ranks() != from.mesh_size())
      throw std::invalid_argument(std::string(who) + ": the input has " +
                                  std::to_string(in.ranks()) + " ranks, the plan's mesh " +
                                  std::to_string(from.mesh_size()));
    for (const index_t r : in.held())
      if (!(box_at(from, global, unravel(from.mesh, r)).shape == in.shape(r)))
        throw std::invalid_argument(std::string(who) + ": the local of mesh index " +
                                    std::to_string(r) +
                                    " does not have the shape of the plan's first state");
  }
  return scheds;
}

}  // namespace spmd::host::detail
