// spmd/random/generator.hpp — a Philox generator's state (seed, offset), the default one, and
// what a random operator takes from it.
//
//   spmd::manual_seed(42);                           // the default generator, offset 0
//   spmd::generator g(7);                            // a user's own
//   auto x = spmd::sim::rand<float, L>(g);           // advances g (runtime/random.hpp)
//   spmd::generator_state s = g.get_state();         // {seed, offset}; g.set_state(s)
//
// As in PyTorch since its change to DTensor's generator semantics (seed 001): every random
// operator on a dtensor advances the generator it used — the default one or the one passed —
// by an amount that depends only on the operator, the element type and the global shape
// (random::words_for), identically on every rank and whatever the layout. Nothing is
// communicated: every process must seed alike (MPI, NCCL: each process has its own default
// generator).
//
// The offset counts 32-bit words of the Philox stream and is always a multiple of 4. Taking
// words is one atomic add, so threads that share a generator get disjoint words; which thread
// gets which is up to the scheduler (use a generator per thread for reproducible results).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "spmd/core/atomic.hpp"

namespace spmd {

/// A generator's whole state: equal states give equal streams.
struct generator_state {
  std::uint64_t seed = 0;
  std::uint64_t offset = 0;  // 32-bit words taken; a multiple of 4
  friend bool operator==(const generator_state&, const generator_state&) = default;
};

/// A counter-based Philox4x32-10 generator: a seed and an offset into its stream.
class generator {
 public:
  /// PyTorch's default seed (default_rng_seed_val).
  static constexpr std::uint64_t default_seed = 67280421310721ull;

  explicit generator(std::uint64_t seed = default_seed) : seed_(seed), offset_(0) {}
  generator(const generator& o) : seed_(o.seed_), offset_(o.offset_.load()) {}
  generator& operator=(const generator& o) {
    seed_ = o.seed_;
    offset_.store(o.offset_.load());
    return *this;
  }

  /// A new seed; the offset goes back to 0 (torch.manual_seed).
  void manual_seed(std::uint64_t seed) {
    seed_ = seed;
    offset_.store(0);
  }
  /// The seed (torch.Generator.initial_seed).
  std::uint64_t initial_seed() const { return seed_; }
  std::uint64_t offset() const { return offset_.load(); }
  /// Throws std::invalid_argument for an offset that is not a multiple of 4.
  void set_offset(std::uint64_t offset) {
    check_offset(offset);
    offset_.store(offset);
  }
  generator_state get_state() const { return {seed_, offset_.load()}; }
  void set_state(const generator_state& s) {
    check_offset(s.offset);
    seed_ = s.seed;
    offset_.store(s.offset);
  }

  /// Takes `words` words (rounded up to a multiple of 4) and returns the state the operator
  /// reads from (the offset before the call).
  generator_state take(std::uint64_t words) {
    const std::uint64_t n = (words + 3) / 4 * 4;
    return {seed_, offset_.fetch_add(n)};
  }

 private:
  static void check_offset(std::uint64_t offset) {
    if (offset % 4 != 0)
      throw std::invalid_argument("spmd::generator: offset " + std::to_string(offset) +
                                  " is not a multiple of 4 (it counts 32-bit words of whole "
                                  "Philox blocks)");
  }

  std::uint64_t seed_;
  atomic_word<std::uint64_t> offset_;
};

/// This process's default generator (seeded with generator::default_seed until manual_seed).
inline generator& default_generator() {
  static generator g;
  return g;
}

/// Seeds the default generator and sets its offset to 0 (torch.manual_seed).
inline void manual_seed(std::uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace spmd
