// spmd/plan/pipeline_schedule.hpp — a pipeline schedule as a table of time slots × ranks,
// built, checked and measured by the compiler.
//
//   using s = pp::schedule<pp::schedule_kind::one_f_one_b, 4, 8>;   // 4 ranks, 8 microbatches
//   static_assert(s::slots == 33 && s::idle_slots * 11 == s::rank_slots * 3);  // bubble 3/11
//   static_assert(s::peak(0) == 4 && s::peak(3) == 1);
//   s::table(t, r)                                    // what rank r does in slot t
//
// How a table is made. Every rank runs its program (pipeline_program.hpp) in order, one task
// at a time; a task starts in the first slot where its inputs are there: a forward's input
// from the stage before, a backward's gradient from the stage after and its own forward.
// An output another rank needs is sent in the slot its task ends and received in the same
// slot, so it is there from the next. A slot where no rank works and none has finished
// means that every rank waits on another: the programs deadlock, and the table records
// that slot and a rank waiting in it (fault::deadlock) instead of a schedule.
//
// Why a table that passes `first_fault` cannot hang when run. A rank posts a slot's sends
// and receives together and finishes them before its next slot; each send is met by the
// peer's receive in the same slot and each task's inputs arrived in an earlier slot, so by
// induction on the slot every rank finishes every slot, whatever their speeds (the argument
// of p2p_schedule.hpp, with up to one send and two receives a slot). Fewer microbatches than
// stages is no special case (torchtitan #775 hung there).
//
// The same functions build a table at compile time (`schedule<...>`, fixed arrays) and at
// run time (`build`, vectors: spmd-plan pipeline), so the two cannot differ.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "spmd/plan/pipeline_program.hpp"

namespace spmd::pp {

/// An activation (a forward's output, to the next stage) or a gradient (a backward's, to
/// the stage before) between two ranks, named by the task that made it.
struct transfer {
  int peer = -1;  // the rank it goes to (a send) or comes from (a receive); −1: none
  int stage = -1;
  int microbatch = -1;
  bool gradient = false;
  constexpr bool operator==(const transfer&) const = default;
};

/// What one rank does in one slot: the task it starts (idle: none), or `continues` the
/// two-slot backward it started the slot before; the transfer it sends and up to two it
/// receives (from the rank before and the rank after it).
struct cell {
  task work;
  bool continues = false;
  transfer send;
  std::array<transfer, 2> recv{};
};

/// Why a table cannot run; the first slot and rank where it shows.
enum class fault : unsigned char {
  none,
  deadlock,          // no rank can go on: each waits on a transfer that cannot come
  unpaired,          // a send without its receive in the slot, or the other way round
  input_missing,     // a task starts before its input is there
  wrong_rank,        // a task of a stage this rank does not hold, or out of range
  repeated,          // a task runs twice
  incomplete         // the step ends with a task not run
};

constexpr const char* describe(fault f) {
  switch (f) {
    case fault::none: return "none";
    case fault::deadlock: return "deadlock: every rank waits on a transfer that cannot come";
    case fault::unpaired: return "a send without its receive in the same slot";
    case fault::input_missing: return "a task starts before its input is there";
    case fault::wrong_rank: return "a task of a stage this rank does not hold";
    case fault::repeated: return "a task runs twice";
    case fault::incomplete: return "the step ends with a task not run";
  }
  return "?";
}

struct fault_at {
  fault what = fault::none;
  int slot = -1;
  int rank = -1;
};

/// A table's figures: `slots` long; `busy` slots of work summed over the ranks. The bubble is
/// the idle share of ranks × slots.
struct summary {
  int slots = 0;
  int busy = 0;
  fault_at failed{};
};

namespace schedule_detail {

inline constexpr int never = 1 << 30;

/// Indices into the run's integer scratch: per (stage, microbatch) the slot its forward,
/// backward-to-input (B or I) and weight gradient (B or W) ended; per rank its program
/// counter, the last slot of its task, the stage-microbatches live and its queue of W's.
struct layout {
  int stages, microbatches, ranks;
  constexpr int pairs() const { return stages * microbatches; }
  constexpr int forward_done(int s, int m) const { return s * microbatches + m; }
  constexpr int input_done(int s, int m) const { return pairs() + s * microbatches + m; }
  constexpr int weight_done(int s, int m) const { return 2 * pairs() + s * microbatches + m; }
  constexpr int pc(int r) const { return 3 * pairs() + r; }
  constexpr int busy_until(int r) const { return 3 * pairs() + ranks + r; }
  constexpr int live(int r) const { return 3 * pairs() + 2 * ranks + r; }
  constexpr int queue_head(int r) const { return 3 * pairs() + 3 * ranks + r; }
  constexpr int queue_tail(int r) const { return 3 * pairs() + 4 * ranks + r; }
  constexpr int size() const { return 3 * pairs() + 5 * ranks; }
  // the W queue: rank r's W's at [r · per_rank, (r + 1) · per_rank) of the task scratch
  constexpr int per_rank() const { return pairs(); }
  constexpr int queue_size() const { return ranks * per_rank(); }
};

constexpr layout layout_of(shape s) { return {s.stages(), s.microbatches, s.ranks}; }

/// No table to fill: the first pass only counts the slots.
struct no_table {
  constexpr void work(int, int, task, bool) const {}
  constexpr void send(int, int, transfer) const {}
  constexpr void receive(int, int, transfer) const {}
};

/// Whether a task's inputs ended before slot t (s: the stages).
template <class Ints>
constexpr bool ready(const Ints& x, layout l, task k, int t) {
  const int s = k.stage, m = k.microbatch;
  switch (k.kind) {
    case work::forward: return s == 0 || x[l.forward_done(s - 1, m)] < t;
    case work::backward:
    case work::backward_input:
      return x[l.forward_done(s, m)] < t && (s == l.stages - 1 || x[l.input_done(s + 1, m)] < t);
    case work::backward_weight: return x[l.input_done(s, m)] < t;
    case work::idle: break;
  }
  return false;
}

}  // namespace schedule_detail

/// Runs `program` on `dims`, slot by slot, reporting every cell to `table`
/// (work/send/receive), and returns the slot count, the work and the first fault. `ints`
/// and `queue` are scratch of at least layout_of(dims).size() and .queue_size() entries.
/// A program is any type with length(rank), at(rank, i), defers_weight() and live_cap(rank).
template <class Program, class Ints, class Tasks, class Table>
constexpr summary run(const Program& program, shape dims, Ints& ints, Tasks& queue, Table&& table) {
  using namespace schedule_detail;
  const layout l = layout_of(dims);
  for (int i = 0; i < l.size(); ++i) ints[i] = 0;
  for (int i = 0; i < 3 * l.pairs(); ++i) ints[i] = never;
  for (int r = 0; r < l.ranks; ++r) ints[l.busy_until(r)] = -1;
  // Every slot but a deadlocked one has some rank working, so the step ends within the sum
  // of all durations; one more slot shows a deadlock.
  int limit = 1;
  for (int r = 0; r < l.ranks; ++r) limit += 2 * program.length(r) + (program.defers_weight() ? program.length(r) : 0);

  // a task the program may not hold: out of range, on another rank, or a B where the
  // backward is split (and I or W where it is not; the W's are the timetable's)
  auto misplaced = [&](int r, task k) {
    return k.stage < 0 || k.stage >= l.stages || k.microbatch < 0 || k.microbatch >= l.microbatches ||
           dims.rank_of(k.stage) != r || k.kind == work::idle || k.kind == work::backward_weight ||
           (k.kind == work::backward && program.defers_weight()) ||
           (k.kind == work::backward_input && !program.defers_weight());
  };
  auto start = [&](int t, int r, task k) -> fault {
    const int s = k.stage, m = k.microbatch;
    const int slot_of = k.kind == work::forward ? l.forward_done(s, m) : l.input_done(s, m);
    if (ints[slot_of] != never) return fault::repeated;
    const int end = t + duration(k.kind) - 1;
    ints[slot_of] = end;
    if (k.kind == work::backward) ints[l.weight_done(s, m)] = end;
    ints[l.busy_until(r)] = end;
    table.work(t, r, k, false);
    for (int u = t + 1; u <= end; ++u) table.work(u, r, k, true);
    if (k.kind == work::forward) {
      ints[l.live(r)] += 1;
      if (s + 1 < l.stages && dims.rank_of(s + 1) != r) {
        const int peer = dims.rank_of(s + 1);
        table.send(end, r, transfer{peer, s, m, false});
        table.receive(end, peer, transfer{r, s, m, false});
      }
    } else {
      if (k.kind == work::backward) ints[l.live(r)] -= 1;
      if (s > 0 && dims.rank_of(s - 1) != r) {
        const int peer = dims.rank_of(s - 1);
        table.send(end, r, transfer{peer, s, m, true});
        table.receive(end, peer, transfer{r, s, m, true});
      }
      if (k.kind == work::backward_input) {
        queue[static_cast<std::size_t>(r * l.per_rank() + ints[l.queue_tail(r)])] = task{work::backward_weight, s, m};
        ints[l.queue_tail(r)] += 1;
      }
    }
    return fault::none;
  };
  auto run_weight = [&](int t, int r) {
    const task w = queue[static_cast<std::size_t>(r * l.per_rank() + ints[l.queue_head(r)])];
    ints[l.queue_head(r)] += 1;
    ints[l.weight_done(w.stage, w.microbatch)] = t;
    ints[l.busy_until(r)] = t;
    ints[l.live(r)] -= 1;
    table.work(t, r, w, false);
  };

  summary out;
  for (int t = 0; t < limit; ++t) {
    bool finished = true, moved = false;
    int waiting = -1;
    for (int r = 0; r < l.ranks; ++r) {
      if (ints[l.busy_until(r)] >= t) {  // inside a two-slot backward
        finished = false;
        moved = true;
        out.busy += 1;
        continue;
      }
      const int pc = ints[l.pc(r)];
      const bool has_weight = ints[l.queue_head(r)] < ints[l.queue_tail(r)];
      if (pc >= program.length(r) && !has_weight) continue;
      finished = false;
      if (pc < program.length(r)) {
        const task k = program.at(r, pc);
        if (misplaced(r, k)) {
          out.failed = {fault::wrong_rank, t, r};
          return out;
        }
        // zero bubble: a forward waits for a W while the rank holds as many live as 1F1B
        const bool over_cap = has_weight && k.kind == work::forward &&
                              ints[l.live(r)] >= program.live_cap(r);
        if (ready(ints, l, k, t) && !over_cap) {
          const fault f = start(t, r, k);
          if (f != fault::none) {
            out.failed = {f, t, r};
            return out;
          }
          ints[l.pc(r)] = pc + 1;
          moved = true;
          out.busy += duration(k.kind);
          continue;
        }
      }
      if (has_weight) {
        run_weight(t, r);
        moved = true;
        out.busy += 1;
      } else if (waiting < 0) {
        waiting = r;
      }
    }
    if (finished) {
      out.slots = t;
      return out;
    }
    if (!moved) {
      out.failed = {fault::deadlock, t, waiting};
      return out;
    }
  }
  out.failed = {fault::deadlock, limit, 0};
  return out;
}

/// A table of Slots × Ranks cells, for the compiler.
template <int Slots, int Ranks>
struct fixed_table {
  static constexpr int slots = Slots;
  static constexpr int ranks = Ranks;
  std::array<cell, static_cast<std::size_t>((Slots > 0 ? Slots : 1) * Ranks)> cells{};
  constexpr cell& operator()(int t, int r) { return cells[static_cast<std::size_t>(t * Ranks + r)]; }
  constexpr const cell& operator()(int t, int r) const {
    return cells[static_cast<std::size_t>(t * Ranks + r)];
  }
};

/// The same at run time: sized by `build`.
struct table {
  int slots = 0;
  int ranks = 0;
  std::vector<cell> cells;
  cell& operator()(int t, int r) { return cells[static_cast<std::size_t>(t * ranks + r)]; }
  const cell& operator()(int t, int r) const { return cells[static_cast<std::size_t>(t * ranks + r)]; }
};

namespace schedule_detail {

/// Fills a table's cells from the run.
template <class Table>
struct fill {
  Table* t;
  constexpr void work(int slot, int r, task k, bool continues) const {
    (*t)(slot, r).work = k;
    (*t)(slot, r).continues = continues;
  }
  constexpr void send(int slot, int r, transfer x) const { (*t)(slot, r).send = x; }
  constexpr void receive(int slot, int r, transfer x) const {
    cell& c = (*t)(slot, r);
    c.recv[c.recv[0].peer < 0 ? 0 : 1] = x;
  }
};

}  // namespace schedule_detail

/// The first fault of any table (hand-written, or edited): each send met by its receive in
/// the slot and the other way round, each task on its stage's rank once, its inputs there
/// before its slot (held by the rank, or received in an earlier slot), and every F and
/// backward of the step run. `split`: backwards are I and W. {fault::none} when none.
template <class Table, class Ints>
constexpr fault_at first_fault(const Table& t, shape dims, bool split, Ints& ints) {
  using namespace schedule_detail;
  const layout l = layout_of(dims);
  // per (stage, microbatch): slot the forward / input-backward / weight ran; slot an
  // activation / gradient arrived at its consumer's rank
  const int p = l.pairs();
  for (int i = 0; i < 5 * p; ++i) ints[i] = never;
  auto arrived = [&](bool gradient, int s, int m) -> int& { return ints[(gradient ? 4 : 3) * p + s * l.microbatches + m]; };
  auto local_or_arrived = [&](int r, int slot, int done_index, bool gradient, int from_stage, int m) {
    return dims.rank_of(from_stage) == r ? ints[done_index] < slot : arrived(gradient, from_stage, m) < slot;
  };
  // the task a cell starts: on its stage's rank, once, its inputs there before the slot
  auto task_fault = [&](int slot, int r, task k) -> fault {
    const int s = k.stage, m = k.microbatch;
    if (s < 0 || s >= l.stages || m < 0 || m >= l.microbatches || dims.rank_of(s) != r ||
        (k.kind == work::backward && split) ||
        ((k.kind == work::backward_input || k.kind == work::backward_weight) && !split))
      return fault::wrong_rank;
    int& done = k.kind == work::forward           ? ints[l.forward_done(s, m)]
                : k.kind == work::backward_weight ? ints[l.weight_done(s, m)]
                                                  : ints[l.input_done(s, m)];
    if (done != never) return fault::repeated;
    bool ok = false;
    switch (k.kind) {
      case work::forward:
        ok = s == 0 || local_or_arrived(r, slot, l.forward_done(s - 1, m), false, s - 1, m);
        break;
      case work::backward:
      case work::backward_input:
        ok = ints[l.forward_done(s, m)] < slot &&
             (s == l.stages - 1 || local_or_arrived(r, slot, l.input_done(s + 1, m), true, s + 1, m));
        break;
      case work::backward_weight: ok = ints[l.input_done(s, m)] < slot; break;
      case work::idle: break;
    }
    if (!ok) return fault::input_missing;
    done = slot + duration(k.kind) - 1;
    if (k.kind == work::backward) ints[l.weight_done(s, m)] = done;
    return fault::none;
  };
  // a cell's transfers: each send met by the peer's receive in the slot and the other way
  // round, and sent by the rank that made it, no earlier than the slot its task ends
  auto transfer_fault = [&](int slot, int r, const cell& c) -> fault {
    if (c.send.peer >= 0) {
      const transfer x = c.send;
      if (x.peer >= t.ranks || x.peer == r) return fault::unpaired;
      const cell& d = t(slot, x.peer);
      const transfer back{r, x.stage, x.microbatch, x.gradient};
      if (!(d.recv[0] == back || d.recv[1] == back)) return fault::unpaired;
      if (x.stage < 0 || x.stage >= l.stages || x.microbatch < 0 || x.microbatch >= l.microbatches ||
          dims.rank_of(x.stage) != r)
        return fault::wrong_rank;
      const int produced = x.gradient ? l.input_done(x.stage, x.microbatch) : l.forward_done(x.stage, x.microbatch);
      if (ints[produced] > slot) return fault::input_missing;
      arrived(x.gradient, x.stage, x.microbatch) = slot;
    }
    for (const transfer& x : c.recv)
      if (x.peer >= 0 && (x.peer >= t.ranks || !(t(slot, x.peer).send == transfer{r, x.stage, x.microbatch, x.gradient})))
        return fault::unpaired;
    return fault::none;
  };
  // the slot's tasks first: a transfer leaves in the slot its task ends
  for (int slot = 0; slot < t.slots; ++slot) {
    for (int r = 0; r < t.ranks; ++r) {
      const cell& c = t(slot, r);
      if (c.continues || c.work.kind == work::idle) continue;
      if (const fault f = task_fault(slot, r, c.work); f != fault::none) return {f, slot, r};
    }
    for (int r = 0; r < t.ranks; ++r)
      if (const fault f = transfer_fault(slot, r, t(slot, r)); f != fault::none) return {f, slot, r};
  }
  for (int s = 0; s < l.stages; ++s)
    for (int m = 0; m < l.microbatches; ++m)
      if (ints[l.forward_done(s, m)] == never || ints[l.input_done(s, m)] == never ||
          ints[l.weight_done(s, m)] == never)
        return {fault::incomplete, t.slots, dims.rank_of(s)};
  return {};
}

/// The most stage-microbatches rank r holds live at once: forward begun, backward (B, or
/// W when split) not ended. What a schedule costs in activation memory, in microbatches.
template <class Table>
constexpr int peak_live(const Table& t, int r) {
  int live = 0, peak = 0;
  for (int slot = 0; slot < t.slots; ++slot) {
    const cell& c = t(slot, r);
    if (c.continues) continue;
    if (c.work.kind == work::forward) live += 1;
    if (live > peak) peak = live;
    if (c.work.kind == work::backward || c.work.kind == work::backward_weight) live -= 1;
  }
  return peak;
}

/// Slots a rank works in, summed over the ranks.
template <class Table>
constexpr int busy_slots(const Table& t) {
  int busy = 0;
  for (int slot = 0; slot < t.slots; ++slot)
    for (int r = 0; r < t.ranks; ++r)
      busy += t(slot, r).work.kind != work::idle ? 1 : 0;
  return busy;
}

/// Builds the table of a built-in schedule at run time; its `failed` is the run's fault.
struct built {
  pp::table table;
  summary info;
};
inline built build(schedule_kind kind, shape dims) {
  const schedule_program program{kind, dims};
  const schedule_detail::layout l = schedule_detail::layout_of(dims);
  std::vector<int> ints(static_cast<std::size_t>(l.size()));
  std::vector<task> queue(static_cast<std::size_t>(l.queue_size()));
  built b;
  b.info = run(program, dims, ints, queue, schedule_detail::no_table{});
  if (b.info.failed.what != fault::none) return b;
  b.table.slots = b.info.slots;
  b.table.ranks = dims.ranks;
  b.table.cells.resize(static_cast<std::size_t>(b.info.slots) * static_cast<std::size_t>(dims.ranks));
  run(program, dims, ints, queue, schedule_detail::fill<pp::table>{&b.table});
  return b;
}

/// Checks a run-time table (first_fault with its own scratch).
inline fault_at check(const pp::table& t, shape dims, bool split) {
  std::vector<int> ints(static_cast<std::size_t>(5 * dims.stages() * dims.microbatches));
  return first_fault(t, dims, split, ints);
}

/// Fails to compile when a pipeline's programs cannot run: the arguments name the fault
/// (fault's value), the slot and a rank where it shows.
template <fault What, int Slot, int Rank>
struct pipeline_cannot_run_at_slot {
  static_assert(What == fault::none,
                "spmd::pp: this pipeline schedule cannot run: at the slot and rank that are this "
                "template's arguments every rank waits on another (deadlock), or a task is on a "
                "rank that does not hold its stage, runs twice, or starts before its input is "
                "there; as a program it would hang or compute the wrong thing, so it does not "
                "compile.");
  static constexpr bool value = true;
};

namespace schedule_detail {

template <class Program, shape Dims>
struct compiled {
  static constexpr layout l = layout_of(Dims);
  static constexpr summary info = [] {
    std::array<int, static_cast<std::size_t>(l.size())> ints{};
    std::array<task, static_cast<std::size_t>(l.queue_size())> queue{};
    return run(Program::value, Dims, ints, queue, no_table{});
  }();
  static_assert(pipeline_cannot_run_at_slot<info.failed.what, info.failed.slot, info.failed.rank>::value);
  static constexpr int slots = info.failed.what == fault::none ? info.slots : 0;
  static constexpr fixed_table<slots, Dims.ranks> cells = [] {
    fixed_table<slots, Dims.ranks> t{};
    std::array<int, static_cast<std::size_t>(l.size())> ints{};
    std::array<task, static_cast<std::size_t>(l.queue_size())> queue{};
    if constexpr (slots > 0) run(Program::value, Dims, ints, queue, fill<fixed_table<slots, Dims.ranks>>{&t});
    return t;
  }();
  // the table checked on its own terms (a second opinion on `run`; skipped where the run
  // already failed, or had nothing to run, so that one mistake gives one error)
  static constexpr fault_at checked = [] {
    std::array<int, static_cast<std::size_t>(5 * l.pairs())> ints{};
    if (slots == 0) return fault_at{};
    return first_fault(cells, Dims, Program::value.defers_weight(), ints);
  }();
  static_assert(pipeline_cannot_run_at_slot<checked.what, checked.slot, checked.rank>::value);
};

template <schedule_kind Kind, shape Dims>
struct builtin {
  static_assert(shape_error(Kind, Dims) == nullptr,
                "spmd::pp: a pipeline shape this schedule cannot take: every size must be at least "
                "1, and only the interleaved schedule has several stages per rank.");
  static constexpr schedule_program value{Kind, Dims};
};

}  // namespace schedule_detail

/// A pipeline schedule, made and checked in the compiler. Program: a type whose static
/// `value` is a program (length, at, defers_weight, live_cap), for schedules of one's own.
template <class Program, int Ranks, int Microbatches, int Virtual = 1>
struct program_schedule {
  static constexpr shape dims{Ranks, Virtual, Microbatches};
  using compiled = schedule_detail::compiled<Program, dims>;
  static constexpr int slots = compiled::slots;
  static constexpr const auto& table = compiled::cells;
  /// Slots × ranks, and how many of those are idle: the bubble is idle_slots / rank_slots.
  static constexpr int rank_slots = slots * Ranks;
  static constexpr int idle_slots = rank_slots - busy_slots(compiled::cells);
  static constexpr double bubble = rank_slots > 0 ? double(idle_slots) / double(rank_slots) : 0.0;
  static constexpr int peak(int rank) { return peak_live(compiled::cells, rank); }
  static constexpr int peak_max = [] {
    int m = 0;
    for (int r = 0; r < Ranks; ++r) m = peak(r) > m ? peak(r) : m;
    return m;
  }();
};

/// A built-in schedule: `schedule<schedule_kind::interleaved, 4, 8, 2>` is interleaved 1F1B
/// over 4 ranks with 2 stages each and 8 microbatches.
template <schedule_kind Kind, int Ranks, int Microbatches, int Virtual = 1>
using schedule =
    program_schedule<schedule_detail::builtin<Kind, shape{Ranks, Virtual, Microbatches}>, Ranks,
                     Microbatches, Virtual>;

}  // namespace spmd::pp
