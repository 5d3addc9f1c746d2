// Point-to-point tables (spmd/plan/p2p_schedule.hpp) checked by the compiler, once. The ring
// that context parallelism passes K/V around is paired slot by slot for 1 to 64 ranks. An
// instantiation whose ring dim has a static size checks its own table
// (runtime/ops/ring_attention.hpp); one whose size comes at run time relies on this proof and
// on the table's form, the same for every n: rank r sends to r + 1 mod n, which receives from r.
#include <spmd/plan/p2p_schedule.hpp>

#include <array>
#include <utility>

namespace p2p = spmd::p2p;

static_assert(p2p::rings_paired(std::make_integer_sequence<int, 64>{}),
              "spmd: the ring's table pairs every send with a receive in its slot, for 1 to 64 ranks");
static_assert(p2p::first_unpaired(p2p::ring<4, 3>()).slot < 0);
static_assert(p2p::first_unpaired(p2p::ring<1, 2>()).slot < 0);
static_assert(p2p::require_paired<p2p::ring_table<8, 7>>());

// The check can fail: a ring whose rank 2 receives from rank 0 in slot 1 (rank 0 sends to 1).
constexpr auto broken = [] {
  auto t = p2p::ring<4, 3>();
  t(1, 2).recv_from = 0;
  return t;
}();
static_assert(p2p::first_unpaired(broken).slot == 1 && p2p::first_unpaired(broken).rank == 1);

// Blocks passed along the table's receives: after slot s rank r holds the block that started
// on rank r − s − 1. So after the n − 1 slots of the forward every rank has seen every block,
// and the backward's n-th slot brings each dK/dV block home.
template <int N>
constexpr bool blocks_travel_the_ring() {
  const auto t = p2p::ring<N, N>();
  std::array<int, N> held{};
  for (int r = 0; r < N; ++r) held[r] = r;
  for (int s = 0; s < N; ++s) {
    std::array<int, N> next = held;
    for (int r = 0; r < N; ++r)
      if (t(s, r).recv_from >= 0) next[r] = held[t(s, r).recv_from];
    held = next;
    for (int r = 0; r < N; ++r)
      if (held[r] != ((r - s - 1) % N + N) % N) return false;
  }
  return true;
}
static_assert(blocks_travel_the_ring<1>() && blocks_travel_the_ring<2>() && blocks_travel_the_ring<5>() &&
              blocks_travel_the_ring<8>());

int main() { return 0; }
