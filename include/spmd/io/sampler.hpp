// spmd/io/sampler.hpp — which samples each step of training reads: PyTorch's
// DistributedSampler (each data-parallel rank's share of an epoch) and the global batches a
// data loader makes of it.
//
//   spmd::io::distributed_sampler s(1000, {.replicas = 4, .rank = 1, .shuffle = true, .seed = 7});
//   s.set_epoch(3);
//   std::vector<index_t> mine = s.indices();         // 250 sample indices, rank 1's of epoch 3
//
//   spmd::io::batch_order o(1000, {.batch = 8, .replicas = 4, .shuffle = true, .seed = 7});
//   o.epoch_of(step);   o.batch(step);               // the 8 samples of a step, in batch order
//
// distributed_sampler follows torch.utils.data.DistributedSampler line for line: an epoch's
// order is 0 .. n-1, or with `shuffle` a permutation drawn from a generator seeded with
// seed + epoch; without `drop_last` it is padded to a multiple of the replicas by repeating
// its start, with `drop_last` cut to one; rank r takes every replicas-th index from r. The
// permutation is spmd::randperm's (random/permutation.hpp), not torch.randperm's: the same
// rule, another stream.
//
// batch_order makes global batches of `batch` samples of that order, as a DataLoader with
// batch_size = batch / replicas and drop_last=True on each rank makes them: when the replicas
// divide the batch, rows [r·b, (r+1)·b) of step k's batch (b = batch / replicas, a dtensor's
// Shard(0) block of rank r on the data-parallel dim) are rank r's sampler indices
// [k·b, (k+1)·b). PyTorch has no rule for a batch the replicas do not divide; spmd then takes
// the step's `batch` positions of the epoch's order in order (a Shard(0) block of uneven
// size, torch.chunk's, reads its rows of them). Either way step k of an epoch reads positions
// [k·batch, (k+1)·batch) of the epoch's order, so one replica and many read the same samples
// per step; an epoch has floor(total / batch) steps and the rest of its order is not read.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/random/generator.hpp"
#include "spmd/random/permutation.hpp"

namespace spmd::io {

struct sampler_options {
  index_t replicas = 1;      // num_replicas: the data-parallel ranks
  index_t rank = 0;          // this replica, 0 .. replicas-1
  bool shuffle = true;       // PyTorch's default
  std::uint64_t seed = 0;
  bool drop_last = false;
};

namespace detail {

inline void check_replicas(index_t samples, index_t replicas, const char* who) {
  if (samples < 0) throw std::invalid_argument(std::string(who) + ": " + std::to_string(samples) + " samples");
  if (replicas < 1)
    throw std::invalid_argument(std::string(who) + ": replicas = " + std::to_string(replicas) + ", at least 1");
}

/// DistributedSampler's num_samples: each replica's share of an epoch.
inline index_t samples_per_replica(index_t samples, index_t replicas, bool drop_last) {
  if (drop_last && samples % replicas != 0) return (samples - 1) / replicas;  // ceil((n - R) / R)
  return (samples + replicas - 1) / replicas;
}

/// An epoch's whole order (DistributedSampler's `indices` before each rank takes its share):
/// shuffled or not, padded or cut to `total`.
inline std::vector<index_t> epoch_order(index_t samples, index_t total, bool shuffle, std::uint64_t seed,
                                        index_t epoch, bool drop_last) {
  std::vector<index_t> order;
  if (shuffle) {
    generator g(seed + static_cast<std::uint64_t>(epoch));
    order = randperm(samples, g);
  } else {
    order.resize(static_cast<std::size_t>(samples));
    for (index_t i = 0; i < samples; ++i) order[static_cast<std::size_t>(i)] = i;
  }
  if (drop_last) {
    order.resize(static_cast<std::size_t>(total));
  } else {
    const std::size_t n = order.size();
    for (std::size_t i = 0; order.size() < static_cast<std::size_t>(total); ++i) order.push_back(order[i % n]);
  }
  return order;
}

}  // namespace detail

/// torch.utils.data.DistributedSampler over `samples` items.
class distributed_sampler {
 public:
  distributed_sampler(index_t samples, const sampler_options& o) : n_(samples), o_(o) {
    detail::check_replicas(samples, o.replicas, "spmd::io::distributed_sampler");
    if (o.rank < 0 || o.rank >= o.replicas)
      throw std::invalid_argument("spmd::io::distributed_sampler: rank " + std::to_string(o.rank) +
                                  ", rank should be in the interval [0, " + std::to_string(o.replicas - 1) + "]");
    num_samples_ = detail::samples_per_replica(samples, o.replicas, o.drop_last);
  }
  /// The epoch whose order indices() gives (DistributedSampler.set_epoch).
  void set_epoch(index_t epoch) { epoch_ = epoch; }
  index_t epoch() const { return epoch_; }
  /// How many indices each replica gets per epoch (len(sampler)).
  index_t num_samples() const { return num_samples_; }
  index_t total_size() const { return num_samples_ * o_.replicas; }

  /// This replica's sample indices of the current epoch, in order.
  std::vector<index_t> indices() const {
    const std::vector<index_t> all = detail::epoch_order(n_, total_size(), o_.shuffle, o_.seed, epoch_, o_.drop_last);
    std::vector<index_t> mine;
    mine.reserve(static_cast<std::size_t>(num_samples_));
    for (index_t i = o_.rank; i < total_size(); i += o_.replicas) mine.push_back(all[static_cast<std::size_t>(i)]);
    return mine;
  }

 private:
  index_t n_;
  sampler_options o_;
  index_t num_samples_ = 0;
  index_t epoch_ = 0;
};

struct batch_options {
  index_t batch = 1;         // samples per step, over every replica
  index_t replicas = 1;      // the data-parallel ranks the batch is split over
  bool shuffle = false;      // spmd-train's default: the data's own order
  std::uint64_t seed = 0;
  bool drop_last = false;    // the sampler's (the loader always drops an incomplete batch)
};

/// The global batches of training over `samples` items: each step's sample indices, epoch
/// after epoch (see the top of this file). It keeps the last epoch's order (made again when a
/// step of another epoch is asked), so one object is not for several threads at once.
class batch_order {
 public:
  batch_order(index_t samples, const batch_options& o) : n_(samples), o_(o) {
    detail::check_replicas(samples, o.replicas, "spmd::io::batch_order");
    if (o.batch < 1)
      throw std::invalid_argument("spmd::io::batch_order: batch = " + std::to_string(o.batch) + ", at least 1");
    total_ = detail::samples_per_replica(samples, o.replicas, o.drop_last) * o.replicas;
    steps_ = total_ / o.batch;
    if (steps_ == 0)
      throw std::invalid_argument("spmd::io::batch_order: " + std::to_string(samples) + " samples" +
                                  (total_ != samples ? " (" + std::to_string(total_) + " over " +
                                                           std::to_string(o.replicas) + " replicas)"
                                                     : std::string()) +
                                  " do not make one batch of " + std::to_string(o.batch));
  }
  index_t samples() const { return n_; }
  index_t steps_per_epoch() const { return steps_; }
  /// The epoch of step s (0-based, as the step).
  index_t epoch_of(index_t step) const { return step / steps_; }

  /// Step s's sample indices in batch order (row i of the step's global batch reads sample
  /// batch(s)[i]).
  std::vector<index_t> batch(index_t step) const {
    if (step < 0) throw std::invalid_argument("spmd::io::batch_order: step " + std::to_string(step) + " is negative");
    const index_t epoch = epoch_of(step), k = step % steps_;
    if (epoch != cached_epoch_) {
      order_ = detail::epoch_order(n_, total_, o_.shuffle, o_.seed, epoch, o_.drop_last);
      cached_epoch_ = epoch;
    }
    std::vector<index_t> out(static_cast<std::size_t>(o_.batch));
    const index_t R = o_.replicas;
    if (o_.batch % R == 0) {  // DistributedSampler's shares, b at a time
      const index_t b = o_.batch / R;
      for (index_t r = 0; r < R; ++r)
        for (index_t j = 0; j < b; ++j)
          out[static_cast<std::size_t>(r * b + j)] = order_[static_cast<std::size_t>((k * b + j) * R + r)];
    } else {
      for (index_t i = 0; i < o_.batch; ++i)
        out[static_cast<std::size_t>(i)] = order_[static_cast<std::size_t>(k * o_.batch + i)];
    }
    return out;
  }

 private:
  index_t n_;
  batch_options o_;
  index_t total_ = 0, steps_ = 0;
  mutable index_t cached_epoch_ = -1;
  mutable std::vector<index_t> order_;
};

}  // namespace spmd::io
