// expect: only the interleaved schedule has several stages per rank
// GPipe over 2 ranks with 2 stages each is PyTorch's looped schedule, which spmd does not
// build: the shape is refused with a sentence.
#include <spmd/plan/pipeline_schedule.hpp>

constexpr int slots = spmd::pp::schedule<spmd::pp::schedule_kind::gpipe, 2, 4, 2>::slots;
int main() { return slots; }
