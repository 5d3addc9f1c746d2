// spmd/runtime/comm_counter.hpp — count the collectives the simulation runs (CommDebugMode).
//
//   {
//     spmd::sim::comm_counter comm;
//     auto y = spmd::sim::redistribute<spmd::placements<spmd::replicate>>(x);
//     comm.count(spmd::step_kind::all_gather);          // 1
//     comm.count(spmd::step_kind::all_gather, 0b1);     // 1: over mesh dim 0
//     comm.bytes();                                     // what the ranks received
//   }
//
// While a counter is alive, every collective step the calling thread executes is counted
// in it (and in every other live counter of that thread: nested scopes each see what ran
// inside them). Local steps (chunk, partition, fill) are not collectives and are not
// counted. The collectives on local tensors (collectives.hpp) are counted the same way,
// by kind and group mask; broadcast, which no plan step uses, has its own count
// (count_broadcast). The point-to-point slots of a schedule (plan/p2p_schedule.hpp: context
// parallelism's ring) are counted apart too (count_p2p: one per slot run over a group mask;
// bytes_p2p: what the ranks received).
//
// Bytes: for each rank, the bytes it receives from OTHER ranks, summed over ranks, on exact
// boxes (no padding), times the size of the element type communicated (the forward dtype,
// if any). Per rank r of a step from state A to state B (spmd::received_elements in
// plan/traffic.hpp, the numbers `spmd-plan plan` reports, so the two agree):
//   all_gather, all_to_all   |box_B(r)| - |box_A(r) ∩ box_B(r)|  (every element r lacked)
//   reduce_scatter           |box_A(r)| - |box_B(r)|             (ring: all chunks but r's)
//   all_reduce               2 (|box_B(r)| - r's chunk of it)     (reduce_scatter + all_gather)
//   broadcast                |source shard| on every member but the source
// The reductions are counted as the ring algorithms NCCL runs move them; the simulation
// computes the same values directly.
#pragma once

#include <array>
#include <cstdint>

#include "spmd/core/mesh_groups.hpp"
#include "spmd/plan/step.hpp"

namespace spmd::runtime {

class comm_counter;

namespace detail {
inline comm_counter*& comm_counter_top() {
  thread_local comm_counter* top = nullptr;
  return top;
}
inline void record_collective(step_kind k, dim_mask mask, std::int64_t bytes);
inline void record_broadcast(dim_mask mask, std::int64_t bytes);
inline void record_p2p(dim_mask mask, std::int64_t bytes);
}  // namespace detail

class comm_counter {
 public:
  static constexpr int max_masks = 1 << max_mesh_dims;

  comm_counter() : prev_(detail::comm_counter_top()) { detail::comm_counter_top() = this; }
  ~comm_counter() {
    // Unlink wherever it is (scopes normally end in reverse order; this copes otherwise).
    for (comm_counter** p = &detail::comm_counter_top(); *p; p = &(*p)->prev_)
      if (*p == this) {
        *p = prev_;
        break;
      }
  }
  comm_counter(const comm_counter&) = delete;
  comm_counter& operator=(const comm_counter&) = delete;

  /// Collectives of kind k.
  int count(step_kind k) const {
    if (!is_collective(k)) return 0;
    int n = 0;
    for (int c : counts_[slot(k)]) n += c;
    return n;
  }
  /// Collectives of kind k over exactly the mesh dims in `mask` (bit m = mesh dim m).
  int count(step_kind k, dim_mask mask) const {
    return is_collective(k) && mask < max_masks ? counts_[slot(k)][mask] : 0;
  }
  /// Broadcasts (collectives.hpp's broadcast on local tensors; no plan step broadcasts).
  int count_broadcast() const {
    int n = 0;
    for (int c : counts_[broadcast_slot]) n += c;
    return n;
  }
  int count_broadcast(dim_mask mask) const {
    return mask < max_masks ? counts_[broadcast_slot][mask] : 0;
  }
  /// Point-to-point slots (every rank of the mask's groups sends and receives once).
  int count_p2p() const {
    int n = 0;
    for (int c : counts_[p2p_slot]) n += c;
    return n;
  }
  int count_p2p(dim_mask mask) const { return mask < max_masks ? counts_[p2p_slot][mask] : 0; }
  /// All collectives, broadcasts and point-to-point slots included.
  int total() const {
    int n = count_broadcast() + count_p2p();
    for (int k = 0; k < collective_kind_count; ++k) n += count(static_cast<step_kind>(k));
    return n;
  }
  /// Bytes received from other ranks, summed over ranks (see the top of this file).
  std::int64_t bytes() const {
    std::int64_t b = 0;
    for (std::int64_t x : bytes_) b += x;
    return b;
  }
  std::int64_t bytes(step_kind k) const { return is_collective(k) ? bytes_[slot(k)] : 0; }
  std::int64_t bytes_broadcast() const { return bytes_[broadcast_slot]; }
  std::int64_t bytes_p2p() const { return bytes_[p2p_slot]; }

  void reset() {
    counts_ = {};
    bytes_ = {};
  }

  /// Called by the executor for every collective step.
  void record(step_kind k, dim_mask mask, std::int64_t bytes) {
    if (!is_collective(k)) return;
    if (mask < max_masks) ++counts_[slot(k)][mask];
    bytes_[slot(k)] += bytes;
  }
  /// Called by collectives.hpp's broadcast.
  void record_broadcast(dim_mask mask, std::int64_t bytes) {
    if (mask < max_masks) ++counts_[broadcast_slot][mask];
    bytes_[broadcast_slot] += bytes;
  }
  /// Called by a backend's point-to-point slot (once per slot, bytes over every rank).
  void record_p2p(dim_mask mask, std::int64_t bytes) {
    if (mask < max_masks) ++counts_[p2p_slot][mask];
    bytes_[p2p_slot] += bytes;
  }

 private:
  friend void detail::record_collective(step_kind, dim_mask, std::int64_t);
  friend void detail::record_broadcast(dim_mask, std::int64_t);
  friend void detail::record_p2p(dim_mask, std::int64_t);
  static constexpr int broadcast_slot = collective_kind_count;
  static constexpr int p2p_slot = collective_kind_count + 1;
  static int slot(step_kind k) { return is_collective(k) ? static_cast<int>(k) : 0; }

  comm_counter* prev_;
  std::array<std::array<int, max_masks>, collective_kind_count + 2> counts_{};
  std::array<std::int64_t, collective_kind_count + 2> bytes_{};
};

namespace detail {
inline void record_collective(step_kind k, dim_mask mask, std::int64_t bytes) {
  for (comm_counter* c = comm_counter_top(); c; c = c->prev_) c->record(k, mask, bytes);
}
inline void record_broadcast(dim_mask mask, std::int64_t bytes) {
  for (comm_counter* c = comm_counter_top(); c; c = c->prev_) c->record_broadcast(mask, bytes);
}
inline void record_p2p(dim_mask mask, std::int64_t bytes) {
  for (comm_counter* c = comm_counter_top(); c; c = c->prev_) c->record_p2p(mask, bytes);
}
/// True while some counter of this thread is alive (bytes are worked out only then).
inline bool counting() { return comm_counter_top() != nullptr; }
}  // namespace detail

}  // namespace spmd::runtime
