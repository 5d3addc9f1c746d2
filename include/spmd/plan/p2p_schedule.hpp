// spmd/plan/p2p_schedule.hpp — point-to-point schedules as tables, their pairing checked by
// the compiler.
//
//   constexpr auto t = p2p::ring(4, 3);             // 3 slots: each rank sends to the next
//   static_assert(p2p::first_unpaired(t).slot < 0);  // every send meets its receive
//   p2p::require_paired<p2p::ring_table<4, 3>>();     // fails to compile naming the slot
//
// A schedule is a table of slots × ranks of a group; in a slot a rank sends at most one block
// to one peer and receives at most one from one peer. Every rank posts a slot's send and
// receive together and waits for both before its next slot (MPI_Sendrecv; NCCL's grouped
// send/recv), so a slot completes exactly when each of its sends is met by the peer's
// receive in the same slot: a table whose slots are all paired cannot deadlock, whatever the
// ranks' speeds, and one that is not would hang at its first unpaired slot. The check names
// that slot and rank. Context parallelism's ring (runtime/ops/ring_attention.hpp) is the first
// user; a pipeline's schedule is the same kind of table.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

namespace spmd::p2p {

/// What a rank does in a slot: the peer it sends to and the peer it receives from (group
/// positions; −1: none).
struct action {
  int send_to = -1;
  int recv_from = -1;
  constexpr bool operator==(const action&) const = default;
};

/// A table of Slots × Ranks actions.
template <int Slots, int Ranks>
struct table {
  static constexpr int slots = Slots;
  static constexpr int ranks = Ranks;
  std::array<std::array<action, static_cast<std::size_t>(Ranks > 0 ? Ranks : 1)>,
             static_cast<std::size_t>(Slots > 0 ? Slots : 1)>
      at{};
  constexpr action& operator()(int slot, int rank) {
    return at[static_cast<std::size_t>(slot)][static_cast<std::size_t>(rank)];
  }
  constexpr const action& operator()(int slot, int rank) const {
    return at[static_cast<std::size_t>(slot)][static_cast<std::size_t>(rank)];
  }
};

/// The first slot (and rank) whose send or receive the peer does not match in that slot;
/// slot −1 when every one is paired. A peer outside the group is unpaired too.
struct unpaired {
  int slot = -1;
  int rank = -1;
};
template <class Table>
constexpr unpaired first_unpaired(const Table& t) {
  for (int s = 0; s < t.slots; ++s)
    for (int r = 0; r < t.ranks; ++r) {
      const action a = t(s, r);
      if (a.send_to >= t.ranks || a.recv_from >= t.ranks) return {s, r};
      if (a.send_to >= 0 && t(s, a.send_to).recv_from != r) return {s, r};
      if (a.recv_from >= 0 && t(s, a.recv_from).send_to != r) return {s, r};
    }
  return {};
}

/// The ring of n ranks over `slots` slots: in each, rank r sends its block to r + 1 and
/// receives r − 1's (mod n); a group of one rank sends nothing. After slot s rank r holds the
/// block that started on rank r − s − 1.
constexpr action ring_action(int n, int rank) {
  if (n <= 1) return {};
  return {(rank + 1) % n, (rank + n - 1) % n};
}
template <int N, int Slots>
constexpr table<Slots, N> ring() {
  table<Slots, N> t{};
  for (int s = 0; s < Slots; ++s)
    for (int r = 0; r < N; ++r) t(s, r) = ring_action(N, r);
  return t;
}
template <int N, int Slots>
struct ring_table {
  static constexpr table<Slots, N> value = ring<N, Slots>();
};

/// Fails to compile when a send or receive has no partner in its slot; the template
/// arguments of the error name the slot and the rank.
template <int Slot, int Rank>
struct unpaired_send_or_receive {
  static_assert(Slot < 0,
                "spmd::p2p: a send or a receive of this schedule has no partner in its slot (the slot "
                "and the rank are this template's arguments): the ranks would wait on each other "
                "for ever, so the schedule does not compile.");
  static constexpr bool value = true;
};
template <class Holder>
constexpr bool require_paired() {
  constexpr unpaired u = first_unpaired(Holder::value);
  return unpaired_send_or_receive<u.slot, u.rank>::value;
}

/// The ring is paired for every group size in N + 1 (a dim of a dynamic mesh gets its size at
/// run time; the table is the same function of it). tests/static/p2p.cpp proves it for 1 to 64
/// once: a proof at namespace scope in a header would be evaluated by every including unit.
template <int... N>
constexpr bool rings_paired(std::integer_sequence<int, N...>) {
  return ((first_unpaired(ring<N + 1, 2>()).slot < 0) && ...);
}

}  // namespace spmd::p2p
