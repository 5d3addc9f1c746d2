// spmd/backends/sim/execute.hpp — run a redistribute plan on every rank's local tensor.
//
// Two entry points over one lowering (schedule.hpp) and one set of kernels (kernels.hpp):
//
//   execute(plan, global_shape, locals)          a plan value (the CLI, dynamic extents):
//                                                 schedules built and checked at run time;
//   execute_static<Holder, Extents>(locals)       a compile-time plan on static extents
//                                                 (meshes of up to static_ranks_limit ranks):
//                                                 schedules built (and checked) by the
//                                                 compiler; every rank's disposition and
//                                                 every op of every step unrolled, copies of
//                                                 one run or one row of runs inlined as
//                                                 memcpy with constant sizes and offsets.
//
// Buffers: a step writes into the rank's own buffer when it may (chunk, partition, in-place
// all_reduce), keeps it when the rank's local does not change, and takes a fresh one from
// the pool otherwise; buffers the step no longer needs go back to the pool. A `const`
// input is borrowed, never written: ranks still borrowing at the end are copied once.
#pragma once

#include <array>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/backends/host/buffer.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/backends/host/element.hpp"
#include "spmd/backends/host/kernels.hpp"
#include "spmd/backends/host/local_set.hpp"
#include "spmd/backends/host/slot.hpp"
#include "spmd/plan/lower.hpp"
#include "spmd/backends/sim/names.hpp"

namespace spmd::sim {

namespace detail {

/// One op. `srcs`/`dsts` are scratch arrays of at least group_size pointers.
template <class T>
inline void run_op(const sched_op& o, reduce_op op, index_t group_size, const index_t* members,
                   const T* const* in, T* const* out, const T** srcs, T** dsts) {
  switch (o.code) {
    case op_code::copy: copy_region(out[o.dst], in[o.src], o.geo); break;
    case op_code::move:  // in place when the rank owns its buffer, else a plain copy
      if (out[o.dst] == in[o.src])
        move_region(out[o.dst], in[o.src], o.geo);
      else
        copy_region(out[o.dst], in[o.src], o.geo);
      break;
    case op_code::fill: fill_region(out[o.dst], o.geo, identity<T>(op)); break;
    case op_code::scale: scale_region(out[o.dst], in[o.src], o.geo, group_size); break;
    case op_code::replicate:
      copy_region(out[o.dst], static_cast<const T*>(out[o.src]), o.geo);
      break;
    case op_code::reduce:
      for (index_t j = 0; j < group_size; ++j) srcs[j] = in[members[o.src * group_size + j]];
      reduce_region(op, out[o.dst], srcs, group_size, o.geo);
      break;
    case op_code::reduce_bcast:
      for (index_t j = 0; j < group_size; ++j) {
        const index_t m = members[o.src * group_size + j];
        srcs[j] = in[m];
        dsts[j] = out[m];
      }
      all_reduce(op, dsts, srcs, group_size, o.geo.run);
      break;
  }
}

/// The ops of a step in order; a bundle of copies that pays runs row by row as one.
template <class T>
void run_ops(const sched_op* ops, std::size_t n_ops, reduce_op op, index_t group_size,
             const index_t* members, const T* const* in, T* const* out, const T** srcs,
             T** dsts) {
  for (std::size_t k = 0; k < n_ops;) {
    const sched_op& o = ops[k];
    if (o.bundle_head && bundle_pays<T>(o)) {
      copy_bundle(&o, o.bundle, in, out);
      k += static_cast<std::size_t>(o.bundle);
    } else {
      run_op<T>(o, op, group_size, members, in, out, srcs, dsts);
      ++k;
    }
  }
}

template <class T>
local_set<T> finish(slot<T>* slots, index_t n) {
  local_set<T> out(n);
  for (index_t r = 0; r < n; ++r) {
    slot<T>& s = slots[r];
    const index_t elems = shape_elems(s.shape);
    if (!s.own && elems > 0) {  // still borrowed from a const input: copy once
      buffer<T> b(elems);
      copy_bytes(b.data(), s.data, static_cast<std::size_t>(elems) * sizeof(T));
      s.own = std::move(b);
    }
    out.adopt(r, std::move(s.own), s.shape);
  }
  return out;
}

template <class T, class In>
void start(slot<T>* slots, In&& in) {
  for (index_t r = 0; r < in.ranks(); ++r) {
    slots[r].shape = in.shape(r);
    if constexpr (std::is_const_v<std::remove_reference_t<In>>) {
      slots[r].data = const_cast<T*>(in.data(r));  // borrowed: never written
    } else {
      slots[r].own = std::move(in[r].buf);
      slots[r].data = slots[r].own.data();
    }
  }
}

/// Run checked schedules (those of build_schedules(p, global)) on slots holding the
/// plan's first state (start()).
template <class T>
local_set<T> run_slots(const plan& p, const std::vector<step_schedule>& scheds,
                       const shape_vec& global, std::vector<slot<T>> a) {
  const index_t n = static_cast<index_t>(a.size());
  std::vector<slot<T>> b(a.size());
  std::vector<const T*> ins(a.size()), srcs(a.size());
  std::vector<T*> outs(a.size()), dsts(a.size());
  for (std::size_t i = 0; i < scheds.size(); ++i) {
    const step_schedule& s = scheds[i];
    for (index_t r = 0; r < n; ++r) ins[r] = a[r].data;
    for (index_t r = 0; r < n; ++r) dispose(s.ranks[r], a[r], b[r]);
    for (index_t r = 0; r < n; ++r) outs[r] = b[r].data;
    run_ops<T>(s.ops.data(), s.ops.size(), s.op, s.group_size, s.members.data(), ins.data(),
               outs.data(), srcs.data(), dsts.data());
    for (index_t r = 0; r < n; ++r) a[r].own.reset();
    if (is_collective(s.kind) && comm_counter_top() != nullptr)  // bytes only when counted
      record_collective(
          s.kind, s.mask,
          traffic(p.steps[static_cast<int>(i)], global, static_cast<index_t>(sizeof(T)))
              .total_bytes);
    std::swap(a, b);
  }
  return finish<T>(a.data(), n);
}

template <class T, class In>
local_set<T> run_schedules(const plan& p, const std::vector<step_schedule>& scheds,
                           const shape_vec& global, In&& in) {
  std::vector<slot<T>> a(static_cast<std::size_t>(in.ranks()));
  start<T>(a.data(), std::forward<In>(in));
  return run_slots<T>(p, scheds, global, std::move(a));
}

template <class T, class In>
local_set<T> execute_runtime(const plan& p, const shape_vec& global, In&& in) {
  const std::vector<step_schedule> scheds = checked_schedules<T>(p, global, in, "spmd::sim::execute");
  return run_schedules<T>(p, scheds, global, std::forward<In>(in));
}

// ---------------------------------------------------------------------------
// The compile-time path
// ---------------------------------------------------------------------------

/// Steps with more ops than this run as a loop over their constant ops, not unrolled
/// (an all_to_all over 32 ranks has up to 1024 copies).
inline constexpr std::size_t unroll_limit = 512;

template <std::size_t NR, std::size_t NO>
struct fixed_schedule {
  step_kind kind{};
  reduce_op op{};
  dim_mask mask = 0;
  index_t group_size = 1;
  index_t comm_bytes = 0;  // received from other ranks (plan/traffic.hpp), all ranks
  std::array<index_t, NR> members{};
  std::array<rank_plan, NR> ranks{};
  std::array<sched_op, NO> ops{};
};

struct schedule_info {
  std::size_t ops = 0;
  step_error error = step_error::none;
};

/// Step I of Holder::value lowered on the static extents Ext, as constants.
template <class Holder, int I, class Ext, std::size_t ElemBytes>
struct static_step {
  static constexpr plan_step step = Holder::value.steps[I];
  static constexpr shape_vec global = Ext{}.to_vec();
  static constexpr std::size_t n_ranks = static_cast<std::size_t>(step.from.mesh_size());
  static_assert(I == 0 || same_blocks(Holder::value.steps[I > 0 ? I - 1 : 0].to, step.from),
                "spmd::sim: a plan step does not start where the previous one ends.");
  static constexpr schedule_info info = [] {
    const step_schedule s = build_schedule(step, global);
    return schedule_info{s.ops.size(), s.error};
  }();
  static_assert(info.error != step_error::mesh_mismatch,
                "spmd::sim: a plan step's from and to states differ in mesh or tensor rank.");
  static_assert(info.error != step_error::bad_mask,
                "spmd::sim: a plan step's mesh dims (G) are empty or outside the mesh.");
  static_assert(info.error != step_error::changes_outside,
                "spmd::sim: a plan step changes a placement outside its mesh dims (G).");
  static_assert(info.error != step_error::wrong_placements,
                "spmd::sim: a plan step's placements on its mesh dims do not fit its kind or "
                "reduce op.");
  static_assert(info.error != step_error::not_covered,
                "spmd::sim: a gather/all_to_all step's pieces do not cover a rank's new block "
                "exactly.");
  static_assert(info.error != step_error::not_contained,
                "spmd::sim: a plan step's new block does not lie inside the old one (or equal "
                "it) as its kind needs.");
  static_assert(info.error == step_error::none, "spmd::sim: a plan step cannot run.");

  static constexpr fixed_schedule<n_ranks, info.ops> sched = [] {
    const step_schedule s = build_schedule(step, global);
    fixed_schedule<n_ranks, info.ops> f{};
    f.kind = s.kind;
    f.op = s.op;
    f.mask = s.mask;
    f.group_size = s.group_size;
    f.comm_bytes = traffic(step, global, static_cast<index_t>(ElemBytes)).total_bytes;
    for (std::size_t r = 0; r < n_ranks; ++r) {
      f.members[r] = s.members[r];
      f.ranks[r] = s.ranks[r];
    }
    for (std::size_t k = 0; k < info.ops; ++k) f.ops[k] = s.ops[k];
    return f;
  }();
};

/// Op K of a compile-time step. Copies of one run, or of a row of runs, become memcpy calls
/// with constant sizes and offsets in the caller; everything else calls the out-of-line
/// kernels with the constant op (compiling every op inline would cost far more than it
/// saves).
template <class T, class Step, std::size_t K>
SPMD_SIM_INLINE void static_op(const T* const* in, T* const* out, const T** srcs, T** dsts) {
  constexpr auto& S = Step::sched;
  constexpr const sched_op& o = S.ops[K];
  constexpr bool copies = o.code == op_code::copy || o.code == op_code::replicate;
  constexpr bool moves = o.code == op_code::move;
  constexpr std::size_t bytes = static_cast<std::size_t>(o.geo.run) * sizeof(T);
  constexpr bool large = static_cast<std::size_t>(o.geo.count()) * sizeof(T) >= stream_bytes_min;
  if constexpr (bundle_pays<T>(o)) {  // the head runs the whole bundle, the others nothing
    if constexpr (o.bundle_head) copy_bundle(&o, o.bundle, in, out);
  } else if constexpr ((copies || moves) && !large && o.geo.contiguous() && o.geo.nd <= 1) {
    const T* src = o.code == op_code::replicate ? out[o.src] : in[o.src];
    T* dst = out[o.dst];
    for (index_t i = 0; i < (o.geo.nd == 0 ? 1 : o.geo.ext[0]); ++i) {
      T* d = dst + o.geo.doff + i * o.geo.dstr[0];
      const T* s = src + o.geo.soff + i * o.geo.sstr[0];
      if constexpr (moves)  // in place: the region moves towards the front, row by row
        std::memmove(d, s, bytes);
      else
        std::memcpy(d, s, bytes);
    }
  } else if constexpr (o.code == op_code::fill && o.geo.nd == 0 && o.geo.contiguous()) {
    T* d = out[o.dst] + o.geo.doff;
    const T v = identity<T>(S.op);
    for (index_t k = 0; k < o.geo.run; ++k) d[k] = v;
  } else {
    run_op<T>(o, S.op, S.group_size, S.members.data(), in, out, srcs, dsts);
  }
}

/// Meshes of more ranks than this take the runtime path even with static extents (with
/// schedules cached per shape): lowering an all_to_all over n ranks is n^2 box
/// intersections, which the compilers' constant evaluators should not be asked to do for
/// large n, and unrolling gains little there.
inline constexpr index_t static_ranks_limit = 32;

/// The state of a compile-time plan on N ranks: two sets of slots (before and after a
/// step) and the pointer arrays the ops index by mesh index.
template <class T, std::size_t N>
struct static_state {
  std::array<slot<T>, N> a{}, b{};
  std::array<const T*, N> in{}, srcs{};
  std::array<T*, N> out{}, dsts{};
};

template <class T, class Step, std::size_t N>
void exec_static_step(slot<T>* cur, slot<T>* next, static_state<T, N>& st) {
  constexpr auto& S = Step::sched;
  constexpr std::size_t n_ops = S.ops.size();
  [&]<std::size_t... R>(std::index_sequence<R...>) {
    ((st.in[R] = cur[R].data), ...);
    (dispose(S.ranks[R], cur[R], next[R]), ...);
    ((st.out[R] = next[R].data), ...);
  }(std::make_index_sequence<N>{});
  const T* const* in = st.in.data();
  T* const* out = st.out.data();
  if constexpr (n_ops <= unroll_limit) {
    [&]<std::size_t... K>(std::index_sequence<K...>) {
      (static_op<T, Step, K>(in, out, st.srcs.data(), st.dsts.data()), ...);
    }(std::make_index_sequence<n_ops>{});
  } else {
    run_ops<T>(S.ops.data(), n_ops, S.op, S.group_size, S.members.data(), in, out,
               st.srcs.data(), st.dsts.data());
  }
  for (std::size_t r = 0; r < N; ++r) cur[r].own.reset();
  if constexpr (is_collective(S.kind)) record_collective(S.kind, S.mask, S.comm_bytes);
}

/// @pre the plan's mesh has at most static_ranks_limit ranks.
template <class T, class Holder, class Ext, class In>
local_set<T> execute_static(In&& in) {
  constexpr const plan& p = Holder::value;
  constexpr std::size_t n_steps = static_cast<std::size_t>(p.steps.size());
  if constexpr (n_steps == 0) {
    if constexpr (std::is_const_v<std::remove_reference_t<In>>)
      return local_set<T>(in);
    else
      return local_set<T>(std::move(in));
  } else {
    constexpr std::size_t N = static_cast<std::size_t>(p.steps[0].from.mesh_size());
    static_assert(N <= static_ranks_limit);
    static_state<T, N> st;
    start<T>(st.a.data(), std::forward<In>(in));
    [&]<std::size_t... I>(std::index_sequence<I...>) {
      ((I % 2 == 0 ? exec_static_step<T, static_step<Holder, static_cast<int>(I), Ext,
                                                      sizeof(T)>>(st.a.data(), st.b.data(), st)
                   : exec_static_step<T, static_step<Holder, static_cast<int>(I), Ext,
                                                      sizeof(T)>>(st.b.data(), st.a.data(), st)),
       ...);
    }(std::make_index_sequence<n_steps>{});
    return finish<T>((n_steps % 2 == 0 ? st.a : st.b).data(), static_cast<index_t>(N));
  }
}

}  // namespace detail

/// Run plan `p` on a tensor of global shape `global`. The input's locals must have the
/// shapes of the plan's first state. Checks every step first (std::invalid_argument naming
/// the step on a plan that cannot run). The input is not changed.
template <class T>
local_set<T> execute(const plan& p, const shape_vec& global, const local_set<T>& in) {
  return detail::execute_runtime<T>(p, global, in);
}
/// The same, reusing the input's buffers.
template <class T>
local_set<T> execute(const plan& p, const shape_vec& global, local_set<T>&& in) {
  return detail::execute_runtime<T>(p, global, std::move(in));
}
/// One step.
template <class T>
local_set<T> execute(const plan_step& s, const shape_vec& global, const local_set<T>& in) {
  plan p{};
  p.steps.push_back(s);
  return execute(p, global, in);
}

}  // namespace spmd::sim
