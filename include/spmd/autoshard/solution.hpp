// spmd/autoshard/solution.hpp — what the search is asked and answers: the layouts a caller
// pins, the refusals, and the solution (docs/auto.md).
#pragma once

#include <cstdint>
#include <vector>

#include "spmd/autoshard/cost.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/ops/rule.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::autoshard {

/// Layouts the caller fixes (a hand-written plan, `spmd-plan auto --fix`): per tensor, or
/// none. A parameter's is its layout at rest; an activation's the one its operator makes;
/// data's the one every reader reads.
struct pins {
  std::vector<layout_spec> layout{};
  std::vector<std::uint8_t> pinned{};  // not vector<bool>: clang cannot evaluate that one in constexpr
  constexpr void pin(int t, const layout_spec& l, std::size_t tensors) {
    if (layout.size() < tensors) layout.resize(tensors), pinned.resize(tensors, 0);
    layout[static_cast<std::size_t>(t)] = l;
    pinned[static_cast<std::size_t>(t)] = 1;
  }
  constexpr bool has(int t) const { return static_cast<std::size_t>(t) < pinned.size() && pinned[static_cast<std::size_t>(t)] != 0; }

  /// A parameter's layout as its readers read it (FSDP's gathered one: a program that gathers
  /// a parameter whole on dp before every use never reads it sharded there).
  std::vector<layout_spec> read_layout{};
  std::vector<std::uint8_t> read_pinned{};
  constexpr void pin_read(int t, const layout_spec& l, std::size_t tensors) {
    if (read_layout.size() < tensors) read_layout.resize(tensors), read_pinned.resize(tensors, 0);
    read_layout[static_cast<std::size_t>(t)] = l;
    read_pinned[static_cast<std::size_t>(t)] = 1;
  }
  constexpr bool has_read(int t) const {
    return static_cast<std::size_t>(t) < read_pinned.size() && read_pinned[static_cast<std::size_t>(t)] != 0;
  }
  constexpr bool read_ok(int t, const layout_spec& l) const {
    return static_cast<std::size_t>(t) >= read_pinned.size() || read_pinned[static_cast<std::size_t>(t)] == 0 ||
           same_blocks(read_layout[static_cast<std::size_t>(t)], l);
  }
};

enum class search_error : std::uint8_t {
  none,
  not_in_order,         // an operator reads a tensor made later
  shared_parameter,     // a parameter read by two operators (tied weights: not yet)
  no_strategy,          // an operator has no strategy that fits (or the pins allow none)
  over_budget,          // no assignment fits the memory budget (min_memory says what does)
  too_many_states,      // the live activations' layouts do not fit a state's 64-bit code
};

constexpr const char* describe(search_error e) {
  switch (e) {
    case search_error::none: return "found";
    case search_error::not_in_order: return "an operator reads a tensor made after it: give the operators in the order they run";
    case search_error::shared_parameter: return "a parameter is read by two operators (tied weights are not searched yet)";
    case search_error::no_strategy: return "an operator has no strategy that fits its shapes and the pinned layouts";
    case search_error::over_budget: return "no assignment fits the memory budget";
    case search_error::too_many_states: return "the activations live at once have more layouts together than a state can number (2^62)";
  }
  return "?";
}

struct solution {
  search_error error = search_error::none;
  int bad_op = -1;  // the operator an error names
  double compute_s = 0, comm_s = 0, memory_bytes = 0;
  double min_memory = 0;  // over_budget: the smallest budget an assignment meets
  collective_counts collectives{};  // forward and backward, by kind, as the plans count them
  std::vector<layout_spec> layouts{};  // per tensor (see pins)
  std::vector<int> strategy{};         // per operator: its candidate index (ops::make_candidate)
  std::vector<svec<layout_spec, ops::max_op_inputs>> reads{};  // per operator: its inputs as it reads them
  std::vector<svec<layout_spec, ops::max_op_inputs>> grads{};  // per operator: its inputs' gradients as its backward makes them
  long states = 0;                     // states the dynamic program made
  long plans = 0;                      // distinct moves it planned
  constexpr double step_s() const { return compute_s + comm_s; }
  constexpr bool ok() const { return error == search_error::none; }
};

}  // namespace spmd::autoshard
