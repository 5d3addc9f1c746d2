// tests/plan/agreement_check.cpp — the compiler's plans equal the run-time planner's.
//
// The generated translation units (gen_agreement.py, run at build time) each instantiate a
// few hundred random spmd::plan_of<Src, Dst, T>, so the search ran in the constant
// evaluator; here make_plan runs on the same layouts and byte count at run time, and the
// two results must be the same: error, states searched, every step (kind, mesh dims, op,
// both states) and the cost.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "agreement_case.hpp"

TEST_CASE("plan_of (compile time) and make_plan (run time) agree", "[agreement]") {
  const auto& cases = agreement::registry();
  std::size_t differ = 0, exact_cost = 0, steps = 0, collectives = 0;
  std::ostringstream first;
  for (const agreement::typed_case& c : cases) {
    const spmd::plan_result& typed = *c.typed;
    const spmd::plan_result run = spmd::make_plan(c.src, c.dst, c.bytes);
    const bool same_cost = std::abs(run.value.cost_us - typed.value.cost_us) <= 1e-12 * (1 + typed.value.cost_us);
    exact_cost += run.value.cost_us == typed.value.cost_us;
    steps += static_cast<std::size_t>(typed.value.steps.size());
    collectives += static_cast<std::size_t>(typed.value.collectives());
    if (!typed.ok() || run.error != typed.error || run.states != typed.states ||
        !(run.value.steps == typed.value.steps) || !same_cost) {
      if (differ++ < 10)
        first << c.name << ": compile time " << spmd::trace(typed.value, c.src, c.dst).view() << " ("
              << typed.value.cost_us << " us, " << typed.states << " states), run time "
              << spmd::trace(run.value, c.src, c.dst).view() << " (" << run.value.cost_us << " us, " << run.states
              << " states)\n";
    }
  }
  std::printf("agreement: %zu typed pairs, %zu steps, %zu collectives; %zu differ; cost bit-identical in %zu\n",
              cases.size(), steps, collectives, differ, exact_cost);
  INFO(first.str());
  CHECK(cases.size() >= 1000);
  CHECK(differ == 0);
}
