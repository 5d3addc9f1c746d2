// expect: this pipeline schedule cannot run
// Two ranks, two microbatches: rank 0 runs microbatch 0's backward before microbatch 1's
// forward, while rank 1 runs both forwards before any backward. Rank 0 waits for a gradient
// rank 1 sends only after microbatch 1's forward, which waits for rank 0: a deadlock, found
// in slot 2 (pipeline_cannot_run_at_slot<fault::deadlock, 2, 0>).
#include <spmd/plan/pipeline_schedule.hpp>

namespace pp = spmd::pp;

struct crossed {
  static constexpr pp::task order[2][4] = {
      {{pp::work::forward, 0, 0}, {pp::work::backward, 0, 0}, {pp::work::forward, 0, 1}, {pp::work::backward, 0, 1}},
      {{pp::work::forward, 1, 0}, {pp::work::forward, 1, 1}, {pp::work::backward, 1, 0}, {pp::work::backward, 1, 1}}};
  constexpr int length(int) const { return 4; }
  constexpr pp::task at(int rank, int i) const { return order[rank][i]; }
  constexpr bool defers_weight() const { return false; }
  constexpr int live_cap(int) const { return 2; }
};
struct holder {
  static constexpr crossed value{};
};

constexpr int slots = pp::program_schedule<holder, 2, 2>::slots;
int main() { return slots; }
