// Pipeline schedules (spmd/plan/pipeline_schedule.hpp) made and measured by the compiler:
// their length, bubble and peak against the published formulas. F is one slot, B two, I
// and W one each.
#include <spmd/plan/pipeline_schedule.hpp>

namespace pp = spmd::pp;
using pp::schedule_kind;

// 1F1B: 3(m + p − 1) slots, bubble (p − 1)/(m + p − 1), rank r holds min(p − r, m).
using one_f = pp::schedule<schedule_kind::one_f_one_b, 4, 8>;
static_assert(one_f::slots == 3 * (8 + 4 - 1));
static_assert(one_f::idle_slots * (8 + 4 - 1) == one_f::rank_slots * (4 - 1));
static_assert(one_f::peak(0) == 4 && one_f::peak(1) == 3 && one_f::peak(2) == 2 && one_f::peak(3) == 1);
static_assert(one_f::bubble > 0.27 && one_f::bubble < 0.28);

// GPipe: the same length and bubble, but every rank holds every microbatch.
using gpipe = pp::schedule<schedule_kind::gpipe, 4, 8>;
static_assert(gpipe::slots == one_f::slots && gpipe::idle_slots == one_f::idle_slots);
static_assert(gpipe::peak(0) == 8 && gpipe::peak(3) == 8 && gpipe::peak_max == 8);

// Fewer microbatches than stages: no hang (torchtitan #775), every rank idle but one slot.
using few = pp::schedule<schedule_kind::one_f_one_b, 4, 1>;
static_assert(few::slots == 3 * 4 && few::idle_slots == 4 * 12 - 4 * 3);

// Interleaved 1F1B, v stages per rank: 3(vm + p − 1) slots when p divides m, bubble
// (p − 1)/(vm + p − 1); rank r holds (v − 1)·p + 2(p − 1 − r) + 1 (Megatron-LM's warm-up).
using inter = pp::schedule<schedule_kind::interleaved, 4, 8, 2>;
static_assert(inter::slots == 3 * (2 * 8 + 4 - 1));
static_assert(inter::idle_slots * (2 * 8 + 4 - 1) == inter::rank_slots * (4 - 1));
static_assert(inter::peak(0) == 4 + 6 + 1 && inter::peak(3) == 4 + 0 + 1);

// ZB-H1: the backward split into I and W, the W's where a rank would wait: 3m + p − 1 slots
// (the bubble p − 1 of Qi et al. against 1F1B's 3(p − 1)), the peak of 1F1B's first rank.
using zb = pp::schedule<schedule_kind::zero_bubble, 4, 8>;
static_assert(zb::slots == 3 * 8 + 4 - 1);
static_assert(zb::idle_slots == 4 * (4 - 1));
static_assert(zb::peak_max == one_f::peak_max);
static_assert(zb::bubble < one_f::bubble);

// A cell: rank 0 of 1F1B starts its first backward in slot 10 and receives its gradient
// from rank 1 in slot 9, the slot rank 1's backward ends.
static_assert(one_f::table(10, 0).work == pp::task{pp::work::backward, 0, 0});
static_assert(one_f::table(9, 0).recv[0] == pp::transfer{1, 1, 0, true});
static_assert(one_f::table(9, 1).send == pp::transfer{0, 1, 0, true});
static_assert(one_f::table(11, 0).continues);

// One rank: no transfers, no bubble.
using alone = pp::schedule<schedule_kind::zero_bubble, 1, 3>;
static_assert(alone::slots == 9 && alone::idle_slots == 0);

// The programs are plain functions too.
static_assert(pp::program_task(schedule_kind::one_f_one_b, {4, 1, 8}, 0, 4) ==
              pp::task{pp::work::backward, 0, 0});
static_assert(pp::program_task(schedule_kind::interleaved, {2, 2, 2}, 0, 2) ==
              pp::task{pp::work::forward, 2, 0});
static_assert(pp::shape_error(schedule_kind::gpipe, {2, 2, 4}) != nullptr);

int main() {}
