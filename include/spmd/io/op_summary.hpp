// spmd/io/op_summary.hpp — one operator's compile-time sharding decision as text: the
// placements each input runs with (and the plan that moves it there), the output's
// placements, and the collectives the plans contain. Everything printed is a constant the
// compiler computed; nothing is measured.
//
//   std::cout << spmd::io::op_summary<spmd::ops::matmul_t, float, void, LX, LW>("x @ W1^T");
//   // x @ W1^T: in0 S(0),R (kept)  in1 R,S(0) (kept)  -> out S(0),S(1); 0 collectives
#pragma once

#include <cstddef>
#include <string>
#include <utility>

#include "spmd/io/placement_text.hpp"
#include "spmd/ops/typed_op.hpp"
#include "spmd/plan/typed_plan.hpp"

namespace spmd::io {

namespace summary_detail {

template <class R, class T, std::size_t I, class L>
std::string input_text(int& collectives) {
  std::string s = "in" + std::to_string(I) + " " + format_placements(L::spec());
  if constexpr (R::template input_moves<I>) {
    using P = plan_of<L, typename R::template input_layout<I>, T>;
    collectives += P::collectives();
    s += " -> " + format_placements(R::template input_layout<I>::spec()) + " (plan " +
         std::string(P::trace().view()) + ", " + std::to_string(P::collectives()) +
         " collective" + (P::collectives() == 1 ? "" : "s") + ")";
  } else {
    s += " (kept)";
  }
  return s;
}

template <class Op, class T, class Forced, class... L, std::size_t... I>
std::string summary(const std::string& label, std::index_sequence<I...>) {
  using R = ops::resolved<Op, T, Forced, L...>;
  int collectives = 0;
  std::string s = label + ":";
  ((s += "  " + input_text<R, T, I, L>(collectives)), ...);
  s += "  -> out " + format_placements(R::compute_layout::spec());
  if constexpr (R::output_moves) {
    using P = plan_of<typename R::compute_layout, typename R::out_layout, T>;
    collectives += P::collectives();
    s += " -> " + format_placements(R::out_layout::spec()) + " (forced; plan " +
         std::string(P::trace().view()) + ")";
  }
  s += "; " + std::to_string(collectives) + " collective" + (collectives == 1 ? "" : "s") +
       (R::result.costed ? " (cheapest strategy)" : " (inputs as they are)");
  return s;
}

}  // namespace summary_detail

/// The compile-time decision of Op on input layouts L... with element type T (`Forced` as
/// in sim::apply), one line.
template <class Op, class T, class Forced, class... L>
std::string op_summary(const std::string& label) {
  return summary_detail::summary<Op, T, Forced, L...>(label, std::index_sequence_for<L...>{});
}

}  // namespace spmd::io
