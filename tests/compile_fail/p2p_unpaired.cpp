// expect: a send or a receive of this schedule has no partner in its slot
// A ring of 4 ranks whose rank 2 receives from rank 0 in slot 1 while rank 0 sends to rank 1:
// rank 1's send to rank 2 would never be received. The error names the slot and the rank
// (unpaired_send_or_receive<1, 1>).
#include <spmd/plan/p2p_schedule.hpp>

struct bad {
  static constexpr auto value = [] {
    auto t = spmd::p2p::ring<4, 3>();
    t(1, 2).recv_from = 0;
    return t;
  }();
};
static_assert(spmd::p2p::require_paired<bad>());
int main() {}
