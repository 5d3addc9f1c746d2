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
// input's buffers are shared, never written (nor copied when a rank keeps its block).
// Ranks whose new blocks are equal (replicas.hpp: all_gather to R, all_reduce, or the same
// ops on shared inputs) share one buffer: each distinct block is written once.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>
#include <new>
#include <vector>

#include "spmd/core/layout_spec.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/host/buffer.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/observe/hooks.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/slot.hpp"
#include "spmd/host/thread_pool.hpp"
#include "spmd/plan/lower.hpp"
#include "spmd/backends/sim/names.hpp"
#include "spmd/backends/sim/replicas.hpp"

namespace spmd::sim {

namespace detail {

/// The kernels a step may run: its op codes and its reductions. A compile-time step passes
/// its own (kernels_of), so that a unit instantiates those only: each region kernel is a
/// few vectorised loop nests, and a unit compiles them once per element type (host/kernels.hpp's
/// reduce_set says what that cost). Steps made at run time take every kernel.
struct kernel_set {
  unsigned codes = ~0u;  // bit 1 << op_code
  reduce_set reductions = every_reduce_op;
  constexpr bool has(op_code c) const { return ((codes >> static_cast<unsigned>(c)) & 1u) != 0; }
};
inline constexpr kernel_set every_kernel{};

/// An op code outside the caller's kernel_set reached run_op: a bug in spmd (the set is
/// computed from the schedule the op comes from).
[[noreturn, gnu::cold, gnu::noinline]] inline void op_not_compiled(op_code c) {
  std::fprintf(stderr, "spmd: internal error: op code %d reached a kernel set compiled without it\n",
               static_cast<int>(c));
  std::abort();
}

/// One op. `srcs`/`dsts` are scratch arrays of at least group_size pointers.
template <class T, kernel_set K = every_kernel>
inline void run_op(const sched_op& o, reduce_op op, index_t group_size, const index_t* members,
                   const T* const* in, T* const* out, const T** srcs, T** dsts) {
  switch (o.code) {
    case op_code::copy:
      if constexpr (K.has(op_code::copy)) {
        // A few rows of one short run (the blocks of a small tensor): inline copies, as the
        // compile-time path's; the kernel's general loop costs more than they do.
        if (o.geo.nd <= 1 && o.geo.contiguous() &&
            static_cast<std::size_t>(o.geo.count()) * sizeof(T) < stream_bytes_min) {
          const index_t rows = o.geo.nd == 0 ? 1 : o.geo.ext[0];
          const T* src = in[o.src] + o.geo.soff;
          T* dst = out[o.dst] + o.geo.doff;
          for (index_t i = 0; i < rows; ++i)
            copy_run(dst + i * o.geo.dstr[0], src + i * o.geo.sstr[0], o.geo.run);
        } else {
          copy_region(out[o.dst], in[o.src], o.geo);
        }
      } else {
        op_not_compiled(o.code);
      }
      break;
    case op_code::move:  // in place when the rank owns its buffer, else a plain copy
      if constexpr (K.has(op_code::move)) {
        if (out[o.dst] == in[o.src])
          move_region(out[o.dst], in[o.src], o.geo);
        else
          copy_region(out[o.dst], in[o.src], o.geo);
      } else {
        op_not_compiled(o.code);
      }
      break;
    case op_code::fill:
      if constexpr (K.has(op_code::fill)) fill_region(out[o.dst], o.geo, identity<T>(op));
      else op_not_compiled(o.code);
      break;
    case op_code::scale:
      if constexpr (K.has(op_code::scale)) scale_region(out[o.dst], in[o.src], o.geo, group_size);
      else op_not_compiled(o.code);
      break;
    case op_code::replicate:
      if constexpr (K.has(op_code::replicate)) copy_region(out[o.dst], static_cast<const T*>(out[o.src]), o.geo);
      else op_not_compiled(o.code);
      break;
    case op_code::reduce:
      if constexpr (K.reductions == 0) reduce_op_not_compiled(op);
      else {
        for (index_t j = 0; j < group_size; ++j) srcs[j] = in[members[o.src * group_size + j]];
        reduce_region<T, K.reductions>(op, out[o.dst], srcs, group_size, o.geo);
      }
      break;
    case op_code::reduce_bcast:
      if constexpr (K.reductions == 0) reduce_op_not_compiled(op);
      else {
        for (index_t j = 0; j < group_size; ++j) {
          const index_t m = members[o.src * group_size + j];
          srcs[j] = in[m];
          dsts[j] = out[m];
        }
        all_reduce<T, K.reductions>(op, dsts, srcs, group_size, o.geo.run);
      }
      break;
  }
}

/// The ops of a step in order; a bundle of copies that pays runs row by row as one.
template <class T, kernel_set K = every_kernel>
void run_ops(const sched_op* ops, std::size_t n_ops, reduce_op op, index_t group_size,
             const index_t* members, const T* const* in, T* const* out, const T** srcs,
             T** dsts) {
  for (std::size_t k = 0; k < n_ops;) {
    const sched_op& o = ops[k];
    if (o.bundle_head && bundle_pays<T>(o)) {
      copy_bundle(&o, o.bundle, in, out);
      k += static_cast<std::size_t>(o.bundle);
    } else {
      run_op<T, K>(o, op, group_size, members, in, out, srcs, dsts);
      ++k;
    }
  }
}

/// The ops of a step where some ranks share another's new block (rep[r] >= 0, from
/// resolve_replicas): their ops do not run, `replicate` ops never run, and an all_reduce
/// (reduce_bcast) reduces into its group's first member only. Bundles run whole when none
/// of their ranks shares.
template <class T, kernel_set K = every_kernel>
void run_ops_shared(const sched_op* ops, std::size_t n_ops, reduce_op op, index_t group_size,
                    const index_t* members, const T* const* in, T* const* out,
                    const T** srcs, T** dsts, const index_t* rep) {
  for (std::size_t k = 0; k < n_ops;) {
    const sched_op& o = ops[k];
    if (o.code == op_code::replicate || rep[o.dst] >= 0) {
      ++k;
      continue;
    }
    if (o.bundle_head && bundle_pays<T>(o)) {
      bool whole = true;
      for (index_t q = 1; q < o.bundle; ++q) whole = whole && rep[ops[k + q].dst] < 0;
      if (whole) {
        copy_bundle(&o, o.bundle, in, out);
        k += static_cast<std::size_t>(o.bundle);
        continue;
      }
    }
    if (o.code == op_code::reduce_bcast) {
      if constexpr (K.reductions == 0) reduce_op_not_compiled(op);
      else {
        for (index_t j = 0; j < group_size; ++j) srcs[j] = in[members[o.src * group_size + j]];
        reduce_region<T, K.reductions>(op, out[o.dst], srcs, group_size, o.geo);
      }
    } else {
      run_op<T, K>(o, op, group_size, members, in, out, srcs, dsts);
    }
    ++k;
  }
}

/// A step's ops in a compact form, for a step whose ops are all copies of a few rows of one
/// short contiguous run, the same length for every op (an all_to_all's or a gather's pieces
/// of a small tensor split evenly): 56 bytes an op instead of a sched_op's 270, and the run's
/// length a constant of the copy loop where it is a small power of two. A run-time plan
/// (a dynamic mesh, dynamic extents) walks its ops as data; through run_ops each op cost about
/// 13 ns at 4 KiB, where the compile-time path's unrolled copies cost 2 (bench/redistribute_sim).
struct small_copy {
  index_t src, dst, soff, doff, rows, sstr, dstr;
};
struct compact_step {
  index_t run = 0;    // elements per run of every op; 0: the step has no compact form
  index_t rows = 0;   // rows of every op, or 0 when they differ
  index_t elems = 0;  // elements the step copies in all
  std::vector<small_copy> ops;
};

/// The compact form of s, or one with run 0 (empty ops are dropped: they copy nothing; so are
/// `replicate` ops, whose ranks always share their source's block on this path).
inline compact_step compact_of(const step_schedule& s) {
  compact_step c;
  for (const sched_op& o : s.ops) {
    if (o.code == op_code::replicate) continue;  // run_ops_shared never runs one: its rank shares
    if (o.code != op_code::copy || o.geo.nd > 1 || !o.geo.contiguous()) return compact_step{};
    const index_t rows = o.geo.nd == 0 ? 1 : o.geo.ext[0];
    if (o.geo.run == 0 || rows == 0) continue;
    if (c.run != 0 && o.geo.run != c.run) return compact_step{};
    c.rows = c.ops.empty() || c.rows == rows ? rows : 0;
    c.run = o.geo.run;
    c.ops.push_back({o.src, o.dst, o.geo.soff, o.geo.doff, rows, o.geo.nd == 0 ? 0 : o.geo.sstr[0],
                     o.geo.nd == 0 ? 0 : o.geo.dstr[0]});
    c.elems += rows * o.geo.run;
  }
  return c;
}

/// f of each step's schedule, in order (what run_slots keeps beside the schedules).
template <class F>
auto per_step(const std::vector<step_schedule>& scheds, F&& f) {
  std::vector<decltype(f(scheds.front()))> out;
  out.reserve(scheds.size());
  for (const step_schedule& s : scheds) out.push_back(f(s));
  return out;
}

inline std::vector<compact_step> compact_steps(const std::vector<step_schedule>& scheds) {
  return per_step(scheds, compact_of);
}

/// True when run_step may run `c` instead of the step's ops: it has a compact form and is
/// small (below the streaming and threading sizes, so run_ops would take the inline copies,
/// one by one, on this thread: the same bytes in the same order).
template <class T>
bool runs_compact(const compact_step* c) {
  return c != nullptr && c->run > 0 && static_cast<std::size_t>(c->elems) * sizeof(T) < stream_bytes_min;
}

/// The copies of `c` with the run's bytes (and, when not 0, every op's rows) constants.
template <class T, std::size_t Bytes, index_t Rows>
void run_compact_fixed(const compact_step& c, const T* const* in, T* const* out, const index_t* rep) {
  for (const small_copy& o : c.ops) {
    if (rep[o.dst] >= 0) continue;  // the rank shares another's new block
    const T* src = in[o.src] + o.soff;
    T* dst = out[o.dst] + o.doff;
    const index_t rows = Rows != 0 ? Rows : o.rows;
    for (index_t i = 0; i < rows; ++i) std::memcpy(dst + i * o.dstr, src + i * o.sstr, Bytes);
  }
}

template <class T, std::size_t Bytes>
void run_compact_rows(const compact_step& c, const T* const* in, T* const* out, const index_t* rep) {
  switch (c.rows) {
    case 1: return run_compact_fixed<T, Bytes, 1>(c, in, out, rep);
    case 2: return run_compact_fixed<T, Bytes, 2>(c, in, out, rep);
    case 4: return run_compact_fixed<T, Bytes, 4>(c, in, out, rep);
    case 8: return run_compact_fixed<T, Bytes, 8>(c, in, out, rep);
    default: return run_compact_fixed<T, Bytes, 0>(c, in, out, rep);
  }
}

/// The copies of a compact step: runs of 4 to 64 bytes (and 1, 2, 4 or 8 rows, the same for
/// every op) as constant-size copies, which the compiler turns into a few moves; others
/// through copy_run.
template <class T>
void run_compact(const compact_step& c, const T* const* in, T* const* out, const index_t* rep) {
  switch (static_cast<std::size_t>(c.run) * sizeof(T)) {
    case 4: if constexpr (sizeof(T) <= 4) return run_compact_rows<T, 4>(c, in, out, rep); else break;
    case 8: if constexpr (sizeof(T) <= 8) return run_compact_rows<T, 8>(c, in, out, rep); else break;
    case 16: return run_compact_rows<T, 16>(c, in, out, rep);
    case 32: return run_compact_rows<T, 32>(c, in, out, rep);
    case 64: return run_compact_rows<T, 64>(c, in, out, rep);
    default: break;
  }
  for (const small_copy& o : c.ops) {
    if (rep[o.dst] >= 0) continue;
    const T* src = in[o.src] + o.soff;
    T* dst = out[o.dst] + o.doff;
    for (index_t i = 0; i < o.rows; ++i) copy_run(dst + i * o.dstr, src + i * o.sstr, c.run);
  }
}

// --- the same, on the simulation's threads -----------------------------------------------
// A step's ops write disjoint regions of their ranks' blocks (the pieces of a gather, the
// blocks of a reduce_scatter, one rank's all_reduce), except a fill step's, which fills a
// rank's block and then copies into it: those run rank by rank. Large copies and reductions
// are split along their outermost extent (or their one run) into pieces of about
// task_bytes; in-place moves are not split (a later piece may read what an earlier one
// overwrites). Every element is computed by the same kernel from the same operands in the
// same order as on one thread.

/// Steps moving fewer bytes than this run on the calling thread.
inline constexpr std::size_t parallel_step_bytes = std::size_t{4} << 20;
/// Bytes written per piece of a split op (at least stream_bytes_min, so that pieces store
/// as the whole op would).
inline constexpr std::size_t task_bytes = std::size_t{2} << 20;
static_assert(task_bytes >= stream_bytes_min);

/// The part [lo, hi) of g's outermost extent (of its run when it has one run).
constexpr run_geom slice_geom(const run_geom& g, index_t lo, index_t hi) {
  run_geom s = g;
  if (g.nd == 0) {
    s.run = hi - lo;
    s.soff += lo * g.s_inner;
    s.doff += lo * g.d_inner;
  } else {
    s.ext[0] = hi - lo;
    s.soff += lo * g.sstr[0];
    s.doff += lo * g.dstr[0];
  }
  return s;
}

/// Bytes an op reads and writes.
template <class T>
constexpr std::size_t op_bytes(const sched_op& o, index_t group_size) {
  const bool reduces = o.code == op_code::reduce || o.code == op_code::reduce_bcast;
  return static_cast<std::size_t>(o.geo.count()) * sizeof(T) *
         static_cast<std::size_t>(reduces ? group_size + 1 : 2);
}

/// run_ops_shared's work, on the simulation's threads when the step is large.
template <class T, kernel_set K = every_kernel>
void run_step_ops(step_kind kind, const sched_op* ops, std::size_t n_ops, reduce_op op,
                  index_t group_size, const index_t* members, const T* const* in, T* const* out,
                  const T** srcs, T** dsts, const index_t* rep) {
  if (threads() <= 1 || n_ops == 0)
    return run_ops_shared<T, K>(ops, n_ops, op, group_size, members, in, out, srcs, dsts, rep);
  std::size_t total = 0;
  for (std::size_t k = 0; k < n_ops; ++k) total += op_bytes<T>(ops[k], group_size);
  if (total < parallel_step_bytes)
    return run_ops_shared<T, K>(ops, n_ops, op, group_size, members, in, out, srcs, dsts, rep);

  struct task {
    std::size_t k = 0, count = 1;  // ops k .. k + count - 1, whole (a bundle: count = 0)
    index_t lo = 0, hi = -1;       // hi >= 0: the part [lo, hi) of op k
  };
  std::vector<task> tasks;
  auto skipped = [&](const sched_op& o) { return o.code == op_code::replicate || rep[o.dst] >= 0; };
  for (std::size_t k = 0; k < n_ops;) {
    const sched_op& o = ops[k];
    if (skipped(o)) {
      ++k;
      continue;
    }
    if (kind == step_kind::fill) {  // a rank's ops in order
      std::size_t e = k + 1;
      while (e < n_ops && ops[e].dst == o.dst) ++e;
      tasks.push_back({k, e - k});
      k = e;
      continue;
    }
    if (o.bundle_head && bundle_pays<T>(o)) {
      bool whole = true;
      for (index_t q = 1; q < o.bundle; ++q) whole = whole && !skipped(ops[k + q]);
      if (whole) {
        tasks.push_back({k, 0});
        k += static_cast<std::size_t>(o.bundle);
        continue;
      }
    }
    const bool in_place = o.code == op_code::move && out[o.dst] == in[o.src];
    const index_t extent = o.geo.nd == 0 ? o.geo.run : o.geo.ext[0];
    // pieces of task_bytes written or more (>= stream_bytes_min: each piece still streams
    // its stores, as the whole op would)
    const std::size_t written = static_cast<std::size_t>(o.geo.count()) * sizeof(T);
    const index_t pieces =
        in_place ? 1 : std::max<index_t>(1, std::min<index_t>(extent, static_cast<index_t>(written / task_bytes)));
    if (pieces <= 1) {
      tasks.push_back({k, 1});
    } else {
      for (index_t p = 0; p < pieces; ++p)
        tasks.push_back({k, 1, extent * p / pieces, extent * (p + 1) / pieces});
    }
    ++k;
  }
  // Only reductions read the group's pointers; a gather's task copies one piece, and scratch
  // of group size per piece was ranks^2 of work (a 262,144-rank all_gather: 28 s, now 0.9).
  const bool reduces = kind == step_kind::all_reduce || kind == step_kind::reduce_scatter;
  const auto scratch = static_cast<std::size_t>(reduces ? group_size : 0);
  parallel_for(static_cast<index_t>(tasks.size()), [&](index_t i) {
    const task& t = tasks[static_cast<std::size_t>(i)];
    std::vector<const T*> src(scratch);
    std::vector<T*> dst(scratch);
    if (t.count == 0) return copy_bundle(&ops[t.k], ops[t.k].bundle, in, out);
    if (t.hi < 0) return run_ops_shared<T, K>(&ops[t.k], t.count, op, group_size, members, in, out,
                                           src.data(), dst.data(), rep);
    sched_op piece = ops[t.k];
    piece.geo = slice_geom(piece.geo, t.lo, t.hi);
    piece.bundle = 1;
    piece.bundle_head = true;
    run_ops_shared<T, K>(&piece, 1, op, group_size, members, in, out, src.data(), dst.data(), rep);
  });
}

/// Ranks that share another's new block (rep[r] >= 0) take a share of it.
template <class T>
void share_replicas(const rank_plan* ranks, const index_t* rep, index_t n, slot<T>* next) {
  for (index_t r = 0; r < n; ++r)
    if (const index_t q = rep[r]; q >= 0) {
      next[r].own = next[q].own.share();
      next[r].data = next[r].own.data();
      next[r].shape = ranks[r].shape;
    }
}

/// One step on n ranks (`S`: a step_schedule or its fixed-size copy; `RP`: its replica plan):
/// the ranks that share another's new block are resolved (rep), the others get their
/// buffers, the ops run (on the threads when large), and the sharing ranks take their
/// shares. `in`: the ranks' current data; `out`, `srcs`, `dsts`, `rep`: scratch of n.
template <class T, kernel_set K = every_kernel, class S, class RP>
void run_step(const S& s, const RP& rp, slot<T>* cur, slot<T>* next, const T* const* in,
              T** out, const T** srcs, T** dsts, index_t* rep, index_t n,
              const compact_step* compact = nullptr) {
  const bool shares = rp.any && resolve_replicas<T>(rp, s.ops.data(), s.members.data(),
                                                    s.group_size, in, n, rep);
  if (!shares) std::fill(rep, rep + n, index_t{-1});
  for (index_t r = 0; r < n; ++r)
    if (rep[r] < 0) dispose(s.ranks[static_cast<std::size_t>(r)], cur[r], next[r]);
  for (index_t r = 0; r < n; ++r) out[r] = next[r].data;
  if (runs_compact<T>(compact))
    run_compact<T>(*compact, in, out, rep);
  else
    run_step_ops<T, K>(s.kind, s.ops.data(), s.ops.size(), s.op, s.group_size, s.members.data(), in,
                    out, srcs, dsts, rep);
  if (shares) share_replicas<T>(s.ranks.data(), rep, n, next);
}

/// The locals the slots hold at the end (every slot owns, or shares, its block: start()
/// shares a const input's buffers rather than borrowing them).
template <class T>
local_set<T> finish(slot<T>* slots, index_t n) {
  local_set<T> out(n);
  for (index_t r = 0; r < n; ++r) out.adopt(r, std::move(slots[r].own), slots[r].shape);
  return out;
}

template <class T, class In>
void start(slot<T>* slots, In&& in) {
  for (index_t r = 0; r < in.ranks(); ++r) {
    slots[r].shape = in.shape(r);
    if constexpr (std::is_const_v<std::remove_reference_t<In>>) {
      slots[r].own = in[r].buf.share();  // shared with the input: never written, never copied
      slots[r].data = slots[r].own.data();
    } else {
      slots[r].own = std::move(in[r].buf);
      slots[r].data = slots[r].own.data();
    }
  }
}

/// Run checked schedules (those of build_schedules(p, global)) on slots `a` holding the
/// plan's first state (start()); `reps`: each schedule's replica plan. `b` and the pointer
/// arrays are scratch of n; returns the slots that hold the result (a or b).
template <class T>
slot<T>* run_slots(const plan& p, const std::vector<step_schedule>& scheds, const std::vector<replica_plan>& reps,
                   const std::vector<compact_step>* compact, const shape_vec& global, index_t n, slot<T>* a,
                   slot<T>* b, const T** ins, const T** srcs, T** outs, T** dsts, index_t* rep) {
  for (std::size_t i = 0; i < scheds.size(); ++i) {
    const step_schedule& s = scheds[i];
    for (index_t r = 0; r < n; ++r) ins[r] = a[r].data;
    observe::around([&] { run_step<T>(s, reps[i], a, b, ins, outs, srcs, dsts, rep, n,
                                      compact != nullptr ? &(*compact)[i] : nullptr); },
                    [&] {
                      return observe::on_step(p.steps[static_cast<int>(i)], static_cast<int>(i), p.steps.size(), global,
                                              index_t{sizeof(T)}, 0, n);
                    });
    for (index_t r = 0; r < n; ++r) a[r].own.reset();
    if (is_collective(s.kind) && comm_counter_top() != nullptr)  // bytes only when counted
      record_collective(
          s.kind, s.mask,
          traffic(p.steps[static_cast<int>(i)], global, static_cast<index_t>(sizeof(T))).total_bytes);
    std::swap(a, b);
  }
  return a;
}

/// The scratch of run_slots for at most N ranks, on the stack: a run-time plan on a small
/// mesh then allocates nothing but the blocks (the compile-time path's static_state, sized
/// for any mesh up to N). Only the first n slots are constructed.
template <class T, std::size_t N>
struct small_slots {
  explicit small_slots(index_t n) : n_(n) {
    for (index_t r = 0; r < 2 * n; ++r) ::new (static_cast<void*>(&slots()[r])) slot<T>();
  }
  ~small_slots() {
    for (index_t r = 0; r < 2 * n_; ++r) slots()[r].~slot<T>();
  }
  small_slots(const small_slots&) = delete;
  small_slots& operator=(const small_slots&) = delete;
  slot<T>* a() { return slots(); }
  slot<T>* b() { return slots() + n_; }
  const T* ins[N];
  const T* srcs[N];
  T* outs[N];
  T* dsts[N];
  index_t rep[N];

 private:
  slot<T>* slots() { return std::launder(reinterpret_cast<slot<T>*>(raw_)); }
  index_t n_;
  alignas(slot<T>) unsigned char raw_[2 * N * sizeof(slot<T>)];
};

inline std::vector<replica_plan> replica_plans(const std::vector<step_schedule>& scheds) {
  return per_step(scheds, build_replica_plan);
}

/// The replica plans of Holder's schedules for `global` (cached per thread, as the
/// schedules are).
template <class Holder>
const std::vector<replica_plan>& cached_replica_plans(const shape_vec& global,
                                                      const std::vector<step_schedule>& scheds) {
  return cached_per_shape<Holder>(global, [&] { return replica_plans(scheds); });
}

/// Meshes of at most this many ranks run a run-time plan with their scratch on the stack.
inline constexpr index_t small_mesh_ranks = 32;

/// `compact`: the steps' compact forms (compact_steps), kept with the schedules, or null.
template <class T, class In>
local_set<T> run_schedules(const plan& p, const std::vector<step_schedule>& scheds,
                           const std::vector<replica_plan>& reps, const shape_vec& global,
                           In&& in, const std::vector<compact_step>* compact = nullptr) {
  const index_t n = in.ranks();
  if (n <= small_mesh_ranks) {
    small_slots<T, small_mesh_ranks> st(n);
    start<T>(st.a(), std::forward<In>(in));
    return finish<T>(run_slots<T>(p, scheds, reps, compact, global, n, st.a(), st.b(), st.ins, st.srcs, st.outs,
                                  st.dsts, st.rep),
                     n);
  }
  const std::size_t m = static_cast<std::size_t>(n);
  std::vector<slot<T>> a(m), b(m);
  std::vector<const T*> ins(m), srcs(m);
  std::vector<T*> outs(m), dsts(m);
  std::vector<index_t> rep(m);
  start<T>(a.data(), std::forward<In>(in));
  return finish<T>(run_slots<T>(p, scheds, reps, compact, global, n, a.data(), b.data(), ins.data(), srcs.data(),
                                outs.data(), dsts.data(), rep.data()),
                   n);
}

template <class T, class In>
local_set<T> execute_runtime(const plan& p, const shape_vec& global, In&& in) {
  const std::vector<step_schedule> scheds = checked_schedules<T>(p, global, in, "spmd::sim::execute");
  return run_schedules<T>(p, scheds, replica_plans(scheds), global, std::forward<In>(in));
}

// ---------------------------------------------------------------------------
// The compile-time path
// ---------------------------------------------------------------------------

/// Steps with more ops than this run as a loop over their constant ops, not unrolled
/// (an all_to_all over 32 ranks has up to 1024 copies).
inline constexpr std::size_t unroll_limit = 512;

template <std::size_t NR, std::size_t NO>
struct fixed_replicas {
  std::array<index_t, NR> from{}, twin{};
  std::array<index_t, NR + 1> begin{};
  std::array<index_t, NO> order{};
  bool any = false;
};

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
  static constexpr fixed_replicas<n_ranks, info.ops> replicas = [] {
    const replica_plan p = build_replica_plan(build_schedule(step, global));
    fixed_replicas<n_ranks, info.ops> f{};
    for (std::size_t r = 0; r < n_ranks; ++r) {
      f.from[r] = p.from[r];
      f.twin[r] = p.twin[r];
    }
    for (std::size_t r = 0; r <= n_ranks; ++r) f.begin[r] = p.begin[r];
    for (std::size_t k = 0; k < info.ops; ++k) f.order[k] = p.order[k];
    f.any = p.any;
    return f;
  }();
};

/// The kernels a step's ops run: their op codes, and the step's one reduction when some op
/// reduces.
template <class S>
constexpr kernel_set kernels_of(const S& s) {
  kernel_set k{0u, 0u};
  for (const sched_op& o : s.ops) {
    k.codes |= 1u << static_cast<unsigned>(o.code);
    if (o.code == op_code::reduce || o.code == op_code::reduce_bcast) k.reductions = reduce_bit(s.op);
  }
  return k;
}

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
    run_op<T, kernels_of(S)>(o, S.op, S.group_size, S.members.data(), in, out, srcs, dsts);
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
  constexpr auto& RP = Step::replicas;
  constexpr std::size_t n_ops = S.ops.size();
  [&]<std::size_t... R>(std::index_sequence<R...>) { ((st.in[R] = cur[R].data), ...); }(
      std::make_index_sequence<N>{});
  const T* const* in = st.in.data();
  T* const* out = st.out.data();
  constexpr std::size_t step_bytes = [] {
    std::size_t b = 0;
    for (const sched_op& o : S.ops) b += op_bytes<T>(o, S.group_size);
    return b;
  }();
  if constexpr (RP.any || step_bytes >= parallel_step_bytes) {
    // some ranks share a block, or the step is large enough for the threads: resolved,
    // then a loop over the ops
    std::array<index_t, N> rep;
    run_step<T, kernels_of(S)>(S, RP, cur, next, in, st.out.data(), st.srcs.data(), st.dsts.data(), rep.data(),
                               static_cast<index_t>(N));
  } else {
    [&]<std::size_t... R>(std::index_sequence<R...>) {
      (dispose(S.ranks[R], cur[R], next[R]), ...);
      ((st.out[R] = next[R].data), ...);
    }(std::make_index_sequence<N>{});
    if constexpr (n_ops <= unroll_limit) {
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        (static_op<T, Step, K>(in, out, st.srcs.data(), st.dsts.data()), ...);
      }(std::make_index_sequence<n_ops>{});
    } else {
      run_ops<T, kernels_of(S)>(S.ops.data(), n_ops, S.op, S.group_size, S.members.data(), in, out,
                 st.srcs.data(), st.dsts.data());
    }
  }
  for (std::size_t r = 0; r < N; ++r) cur[r].own.reset();
  if constexpr (is_collective(S.kind)) record_collective(S.kind, S.mask, S.comm_bytes);
}

/// The log line and span of a plan run by value (a plan made at run time: spmd-plan run).
template <class T>
timeline::span watch_execute(const plan& p, const shape_vec& global, index_t ranks) {
  if (p.steps.size() == 0) return {};
  return observe::on_redistribute<T>(p, p.steps[0].from, p.steps[p.steps.size() - 1].to, global, {0, ranks}, false);
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
      (observe::around(
           [&] {
             I % 2 == 0 ? exec_static_step<T, static_step<Holder, static_cast<int>(I), Ext, sizeof(T)>>(
                              st.a.data(), st.b.data(), st)
                        : exec_static_step<T, static_step<Holder, static_cast<int>(I), Ext, sizeof(T)>>(
                              st.b.data(), st.a.data(), st);
           },
           [&] {
             return observe::on_step(p.steps[static_cast<int>(I)], static_cast<int>(I), static_cast<int>(n_steps),
                                     Ext{}.to_vec(), index_t{sizeof(T)}, 0, static_cast<index_t>(N));
           }),
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
  return observe::around([&] { return detail::execute_runtime<T>(p, global, in); },
                         [&] { return detail::watch_execute<T>(p, global, in.ranks()); });
}
/// The same, reusing the input's buffers.
template <class T>
local_set<T> execute(const plan& p, const shape_vec& global, local_set<T>&& in) {
  const index_t n = in.ranks();
  return observe::around([&] { return detail::execute_runtime<T>(p, global, std::move(in)); },
                         [&] { return detail::watch_execute<T>(p, global, n); });
}
/// One step.
template <class T>
local_set<T> execute(const plan_step& s, const shape_vec& global, const local_set<T>& in) {
  plan p{};
  p.steps.push_back(s);
  return execute(p, global, in);
}

}  // namespace spmd::sim
