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
//
// Per unit: a program whose units each hold their parameters one of a few ways, chosen when it
// builds the model (nn/unit_choice.hpp: FSDP or DDP per unit), has options[k] pinning every
// tensor as option k everywhere would; choose_mix costs the mixes (unit u taking option
// mix[u]) and returns the best, every mix searched while there are at most `limit`.
//
//   const autoshard::mix_choice m = autoshard::choose_mix(g, cm, {fsdp_pins, ddp_pins}, unit_of, 3);
//   m.best                 // per unit, its option (empty: no mix fits the budget)
#pragma once

#include <vector>

#include "spmd/autoshard/search.hpp"

namespace spmd::autoshard {

/// Whether step s is as fast as the unrestricted search's (up to rounding of the sums).
constexpr bool reaches(const solution& s, const solution& unrestricted) {
  if (!s.ok() || !unrestricted.ok()) return false;
  const double b = unrestricted.step_s();
  return s.step_s() - b <= 1e-9 * (b > 0 ? b : 1);
}

struct choice {
  int best = -1;                      // -1: no candidate fits
  std::vector<solution> candidates{};
  solution unrestricted{};
  /// Whether running the best candidate is running a step the unrestricted search finds
  /// optimal (the same modelled time, up to rounding of the sums).
  constexpr bool optimal() const { return best >= 0 && reaches(candidates[static_cast<std::size_t>(best)], unrestricted); }
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

/// The pins of a mix: every tensor of unit u (unit_of[t] = u) pinned as options[mix[u]] pins it,
/// its read too; every other tensor as options[0] does (data: the options pin it alike).
constexpr pins mix_pins(const std::vector<pins>& options, const std::vector<int>& unit_of, const std::vector<int>& mix) {
  pins p = options[0];
  const std::size_t n = unit_of.size();
  p.layout.resize(n), p.pinned.resize(n, 0), p.read_layout.resize(n), p.read_pinned.resize(n, 0);
  for (std::size_t t = 0; t < n; ++t) {
    if (unit_of[t] < 0) continue;
    const pins& o = options[static_cast<std::size_t>(mix[static_cast<std::size_t>(unit_of[t])])];
    const int x = static_cast<int>(t);
    p.pinned[t] = 0, p.read_pinned[t] = 0;
    if (o.has(x)) p.pin(x, o.layout[t], n);
    if (o.has_read(x)) p.pin_read(x, o.read_layout[t], n);
  }
  return p;
}

/// What choose_mix found.
struct mix_choice {
  std::vector<int> best{};    // per unit, its option; empty: no mix fits (see least_memory)
  solution step{};            // the best mix's solution
  long mixes = 0;             // mixes searched
  bool exhaustive = true;     // every mix was searched (else: the best uniform one, improved a unit at a time)
  double least_memory = 0;    // no mix fits the budget: the least any mix needs
  /// Whether the best mix gives every unit the same option (the program's uniform candidate).
  constexpr bool uniform() const {
    for (const int o : best)
      if (o != best.front()) return false;
    return true;
  }
};

/// The best mix of options over `units` units (better_candidate's order: the fastest, then the
/// fewest collectives, then the least memory). Every mix while options^units <= limit, so the
/// answer is the best of them; past that, coordinate descent from the best uniform mix (one
/// unit changed at a time while that improves: no proof of optimality, `exhaustive` false).
constexpr mix_choice choose_mix(const graph& g, const cost_model& cm, const std::vector<pins>& options,
                                const std::vector<int>& unit_of, int units, long limit = 4096) {
  mix_choice out{};
  const int k = static_cast<int>(options.size());
  long total = 1;
  for (int u = 0; u < units && total <= limit; ++u) total *= k;
  std::vector<int> mix(static_cast<std::size_t>(units), 0);
  bool any_over = false;
  const auto consider = [&](const std::vector<int>& m) {
    ++out.mixes;
    const solution s = search(g, cm, mix_pins(options, unit_of, m));
    if (s.error == search_error::over_budget &&
        (!any_over || s.min_memory < out.least_memory))
      out.least_memory = s.min_memory, any_over = true;
    if (s.ok() && (out.best.empty() || better_candidate(s, out.step))) {
      out.best = m;
      out.step = s;
      return true;
    }
    return false;
  };
  if (total <= limit) {
    for (long i = 0; i < total; ++i) {
      long r = i;
      for (int u = 0; u < units; ++u) mix[static_cast<std::size_t>(u)] = static_cast<int>(r % k), r /= k;
      consider(mix);
    }
    return out;
  }
  out.exhaustive = false;
  for (int o = 0; o < k; ++o) consider(std::vector<int>(static_cast<std::size_t>(units), o));
  if (out.best.empty()) return out;
  for (bool better = true; better;) {
    better = false;
    for (int u = 0; u < units; ++u)
      for (int o = 0; o < k; ++o) {
        if (o == out.best[static_cast<std::size_t>(u)]) continue;
        mix = out.best;
        mix[static_cast<std::size_t>(u)] = o;
        better = consider(mix) || better;
      }
  }
  return out;
}

}  // namespace spmd::autoshard
