// spmd/autoshard/choose.hpp — the choice among the parallelisations a program has compiled: on
// a mesh whose sizes are known only at run time, the program holds a few candidates (FSDP,
// DDP, everything replicated, ...), each fixing its parameters' and its data's layouts; the
// search costs each (the activations placed by the search), and the search without pins says
// how far the best candidate is from the best step the model allows.
//
//   const autoshard::choice c = autoshard::choose(g, cm, {fsdp_pins, ddp_pins, replicated_pins});
//   c.best                 // the index of the candidate to run (the least modelled step)
//
// Ties: FSDP and DDP cost the same under the alpha-beta model (a ring all_gather and
// reduce_scatter are an all_reduce, step for step), so among candidates of equal modelled time
// the one with fewer collectives wins (each has fixed costs the model does not see: a
// synchronisation, a buffer, a launch), then the one that holds less.
//   c.candidates[i]        // its solution (not ok: that candidate cannot run this graph)
//   c.unrestricted         // the search's own best step
//   c.optimal()            // the best candidate is as fast as the unrestricted search's step
#pragma once

#include <vector>

#include "spmd/autoshard/search.hpp"

namespace spmd::autoshard {

struct choice {
  int best = -1;                      // -1: no candidate fits
  std::vector<solution> candidates{};
  solution unrestricted{};
  /// Whether running the best candidate is running a step the unrestricted search finds
  /// optimal (the same modelled time, up to rounding of the sums).
  constexpr bool optimal() const {
    if (best < 0 || !unrestricted.ok()) return false;
    const double a = candidates[static_cast<std::size_t>(best)].step_s(), b = unrestricted.step_s();
    return a - b <= 1e-9 * (b > 0 ? b : 1);
  }
};

/// Whether a is a better candidate than b: faster, or as fast (up to rounding of the sums)
/// with fewer collectives, or with as many and less memory.
constexpr bool better_candidate(const solution& a, const solution& b) {
  const double ta = a.step_s(), tb = b.step_s(), tol = 1e-12 * (ta > tb ? ta : tb);
  if (ta < tb - tol) return true;
  if (ta > tb + tol) return false;
  if (a.collectives.total() != b.collectives.total()) return a.collectives.total() < b.collectives.total();
  return a.memory_bytes < b.memory_bytes;
}

constexpr choice choose(const graph& g, const cost_model& cm, const std::vector<pins>& candidates) {
  choice c{};
  c.unrestricted = search(g, cm);
  for (const pins& p : candidates) {
    c.candidates.push_back(search(g, cm, p));
    const solution& s = c.candidates.back();
    if (s.ok() && (c.best < 0 || better_candidate(s, c.candidates[static_cast<std::size_t>(c.best)])))
      c.best = static_cast<int>(c.candidates.size()) - 1;
  }
  return c;
}

}  // namespace spmd::autoshard
