// Point-to-point tables (spmd/plan/p2p_schedule.hpp) checked by the compiler, once: the ring
// that context parallelism passes K/V around is paired slot by slot for every group size a
// mesh dim may have at run time here (1 to 64 ranks). An instantiation whose ring dim has a
// static size checks its own table (runtime/ops/ring_attention.hpp); one whose size comes at
// run time relies on this proof, the table being the same function of the size.
#include <spmd/plan/p2p_schedule.hpp>

#include <utility>

namespace p2p = spmd::p2p;

static_assert(p2p::rings_paired(std::make_integer_sequence<int, 64>{}),
              "spmd: the ring's table pairs every send with a receive in its slot, for 1 to 64 ranks");

// The check can fail: a ring whose rank 2 receives from rank 0 in slot 1 (rank 0 sends to 1).
constexpr auto broken = [] {
  auto t = p2p::ring<4, 3>();
  t(1, 2).recv_from = 0;
  return t;
}();
static_assert(p2p::first_unpaired(broken).slot == 1 && p2p::first_unpaired(broken).rank == 1);

int main() { return 0; }
