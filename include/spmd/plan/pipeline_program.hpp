// spmd/plan/pipeline_program.hpp — what each rank of a pipeline computes, in its order: the
// programs of GPipe, 1F1B, interleaved 1F1B and zero bubble (ZB-H1), as constexpr functions.
//
//   constexpr pp::shape s{.ranks = 4, .virtual_stages = 1, .microbatches = 8};
//   constexpr pp::task t = pp::program_task(pp::schedule_kind::one_f_one_b, s, 0, 4);
//   static_assert(t.kind == pp::work::backward && t.microbatch == 0);
//
// A program is only an order. When each task runs, which transfers it needs and whether the
// order can finish at all are the timetable's (pipeline_schedule.hpp): it runs the programs
// slot by slot, the way PyTorch computes one global, time-ordered action table up front
// (pytorch PR #127332) — the fix for its interleaved schedules' hangs.
//
// The model is cut into ranks × virtual_stages stages; stage s lives on rank s mod ranks
// (looped placement, as Megatron-LM and PyTorch's interleaved schedules place them), so with
// one stage per rank stage s is rank s.
#pragma once

#include <string_view>

namespace spmd::pp {

/// The four schedules. Their names on the command line: gpipe, 1f1b, interleaved, zb.
enum class schedule_kind : unsigned char { gpipe, one_f_one_b, interleaved, zero_bubble };

constexpr std::string_view name(schedule_kind k) {
  switch (k) {
    case schedule_kind::gpipe: return "gpipe";
    case schedule_kind::one_f_one_b: return "1f1b";
    case schedule_kind::interleaved: return "interleaved";
    case schedule_kind::zero_bubble: return "zb";
  }
  return "?";
}

/// The schedule a name names; false (and `out` untouched) for any other text.
constexpr bool parse_schedule(std::string_view text, schedule_kind& out) {
  for (schedule_kind k : {schedule_kind::gpipe, schedule_kind::one_f_one_b,
                          schedule_kind::interleaved, schedule_kind::zero_bubble})
    if (name(k) == text) {
      out = k;
      return true;
    }
  return false;
}

/// A task's kind: F (forward), B (the whole backward), I (the backward to the stage's input
/// only) and W (the weights' gradient only); zero-bubble schedules split B into I and W, and
/// run the W late, where a rank would otherwise wait.
enum class work : unsigned char { idle, forward, backward, backward_input, backward_weight };

constexpr char letter(work w) {
  switch (w) {
    case work::forward: return 'F';
    case work::backward: return 'B';
    case work::backward_input: return 'I';
    case work::backward_weight: return 'W';
    case work::idle: break;
  }
  return '-';
}

/// Slots a task takes. The unit is a forward; a backward is two (its two products per
/// weight against the forward's one), split into I and W of one each, the costs the
/// zero-bubble paper (Qi et al., ICLR 2024) schedules with. The bubble fractions follow from
/// these: 1F1B's is (p−1)/(m+p−1) of the step, as published.
constexpr int duration(work w) { return w == work::backward ? 2 : w == work::idle ? 0 : 1; }

struct task {
  work kind = work::idle;
  int stage = -1;
  int microbatch = -1;
  constexpr bool operator==(const task&) const = default;
};

/// A pipeline's size: `ranks` along the pp mesh dim, `virtual_stages` model stages per rank
/// (interleaving), `microbatches` per step.
struct shape {
  int ranks = 1;
  int virtual_stages = 1;
  int microbatches = 1;
  constexpr int stages() const { return ranks * virtual_stages; }
  constexpr int rank_of(int stage) const { return stage % ranks; }
};

/// Why a schedule cannot take a shape; nullptr when it can. The sizes themselves must be at
/// least 1; only the interleaved schedule has virtual stages (GPipe and 1F1B with several
/// stages per rank would be PyTorch's looped schedules, and the zero-bubble V-shape, ZBV,
/// is not built).
constexpr const char* shape_error(schedule_kind k, shape s) {
  if (s.ranks < 1) return "the pipeline needs at least one rank";
  if (s.virtual_stages < 1) return "each rank needs at least one stage";
  if (s.microbatches < 1) return "a step needs at least one microbatch";
  if (s.virtual_stages > 1 && k != schedule_kind::interleaved)
    return "only the interleaved schedule has several stages per rank";
  return nullptr;
}

namespace program_detail {

/// The 1F1B pattern over n forwards of which the first `warmup` run before the first
/// backward: i-th entry is (true, j) for the j-th forward, (false, j) for the j-th backward.
struct slot_in_order {
  bool forward;
  int index;
};
constexpr slot_in_order one_f_one_b_order(int n, int warmup, int i) {
  if (i < warmup) return {true, i};
  if (i < 2 * n - warmup) {
    const int k = i - warmup;
    return k % 2 == 0 ? slot_in_order{true, warmup + k / 2} : slot_in_order{false, k / 2};
  }
  return {false, i - n};
}

/// Interleaving: a rank's forwards go round by round (each of g microbatches) through
/// chunk 0, then chunk 1, ...; its backwards in the same rounds, the chunks last to first.
/// The rounds are the largest divisor of m not above max(1, ⌊m / p⌋), so they are equal and
/// g ≥ p once m ≥ p: PyTorch's ScheduleInterleaved1F1B's rounds where it takes the count
/// (it refuses m when ⌊m / p⌋ does not divide it), and the next fewer rounds that divide m
/// where it does not. Rounds of ⌈m / r⌉ with a short last one deadlock at 56 shapes of
/// p ≤ 8, v ≤ 4, m ≤ 64 (5 ranks, 3 chunks, 31 microbatches among them); these run at all
/// (tests/plan/pipeline_schedule.cpp builds every one).
constexpr int round_size(shape s) {
  int rounds = s.microbatches / s.ranks > 1 ? s.microbatches / s.ranks : 1;
  while (s.microbatches % rounds != 0) --rounds;
  return s.microbatches / rounds;
}

struct chunk_and_microbatch {
  int chunk;
  int microbatch;
};
constexpr chunk_and_microbatch interleaved_index(shape s, int k) {
  const int g = round_size(s), v = s.virtual_stages;
  const int round = k / (g * v), in = k % (g * v);
  return {in / g, round * g + in % g};
}

constexpr int min_int(int a, int b) { return a < b ? a : b; }

}  // namespace program_detail

/// Tasks in rank `rank`'s program (zero bubble: its F and I; the timetable adds the W's).
constexpr int program_length(schedule_kind, shape s, int) {
  return 2 * s.microbatches * s.virtual_stages;
}

/// The i-th task of rank `rank`'s program.
///   gpipe        every forward, then every backward (PyTorch's ScheduleGPipe);
///   1f1b         ranks − 1 − rank forwards, then one forward and one backward in turn
///                (PipeDream-Flush; Schedule1F1B);
///   interleaved  1F1B over the rank's virtual stages in rounds, 2·(ranks − 1 − rank) +
///                (virtual − 1)·g forwards first (Megatron-LM; ScheduleInterleaved1F1B);
///   zb           1F1B with each B an I (ZB-H1): the W's go where the rank would wait.
constexpr task program_task(schedule_kind k, shape s, int rank, int i) {
  using namespace program_detail;
  const int m = s.microbatches;
  switch (k) {
    case schedule_kind::gpipe:
      return i < m ? task{work::forward, rank, i} : task{work::backward, rank, i - m};
    case schedule_kind::one_f_one_b:
    case schedule_kind::zero_bubble: {
      const slot_in_order o = one_f_one_b_order(m, min_int(s.ranks - 1 - rank, m), i);
      const work back = k == schedule_kind::zero_bubble ? work::backward_input : work::backward;
      return {o.forward ? work::forward : back, rank, o.index};
    }
    case schedule_kind::interleaved: {
      const int n = m * s.virtual_stages;
      const int warmup =
          min_int(n, 2 * (s.ranks - 1 - rank) + (s.virtual_stages - 1) * round_size(s));
      const slot_in_order o = one_f_one_b_order(n, warmup, i);
      const chunk_and_microbatch c = interleaved_index(s, o.index);
      const int chunk = o.forward ? c.chunk : s.virtual_stages - 1 - c.chunk;
      return {o.forward ? work::forward : work::backward, chunk * s.ranks + rank, c.microbatch};
    }
  }
  return {};
}

/// The built-in schedules as a program: what the timetable runs.
struct schedule_program {
  schedule_kind kind;
  shape dims;
  /// A shape the schedule cannot take (shape_error) has no program.
  constexpr int length(int rank) const {
    return shape_error(kind, dims) ? 0 : program_length(kind, dims, rank);
  }
  constexpr task at(int rank, int i) const { return program_task(kind, dims, rank, i); }
  /// Zero bubble: each I leaves a W for the timetable to place.
  constexpr bool defers_weight() const { return kind == schedule_kind::zero_bubble; }
  /// Zero bubble: before a forward, a rank with this many stage-microbatches live (forward
  /// run, W not yet) runs a pending W first. min(ranks, microbatches) is 1F1B's peak on its
  /// first rank, which ZB-H1 keeps on every rank (Qi et al.: the same peak memory as 1F1B);
  /// with it the step is 3m + p − 1 slots once m ≥ p, the paper's bubble of p − 1.
  constexpr int live_cap(int) const {
    return program_detail::min_int(dims.ranks, dims.microbatches);
  }
};;

}  // namespace spmd::pp
