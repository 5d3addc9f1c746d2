// spmd/io/op_summary.hpp — one operator's compile-time sharding decision as text: the
// placements each input runs with (and the plan that moves it there), the output's
// placements, and the collectives the plans contain. Everything printed is a constant the
// compiler computed; nothing is measured.
//
//   std::cout << spmd::io::op_summary<spmd::ops::matmul_t, float, void, LX, LW>("x @ W1^T");
//   // x @ W1^T: in0 S(0),R (kept)  in1 R,S(0) (kept)  -> out S(0),S(1); 0 collectives
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "spmd/core/fixed_text.hpp"
#include "spmd/io/placement_format.hpp"
#include "spmd/plan/trace.hpp"
#include "spmd/ops/typed_op.hpp"
#include "spmd/plan/typed_plan.hpp"

namespace spmd::io {

namespace summary_detail {

/// Room for four inputs, each moved by a plan, and a forced output: what the op set has.
inline constexpr int input_chars = 2 * placements_chars + plan_text::capacity + 48;
inline constexpr int capacity = 4 * input_chars + 2 * placements_chars + plan_text::capacity + 96;
using text = fixed_text<capacity>;

template <int N>
constexpr void put_collectives(fixed_text<N>& t, int n) {
  t.put(static_cast<long long>(n));
  t.put(n == 1 ? " collective" : " collectives");
}

template <class R, class T, std::size_t I, class L>
constexpr void put_input(text& t, int& collectives) {
  t.put("  in");
  t.put(static_cast<long long>(I));
  t.put(' ');
  put_placements(t, L::spec());
  if constexpr (R::template input_moves<I>) {
    using P = plan_of<L, typename R::template input_layout<I>, T>;
    collectives += P::collectives();
    t.put(" -> ");
    put_placements(t, R::template input_layout<I>::spec());
    t.put(" (plan ");
    t.put(P::trace().view());
    t.put(", ");
    put_collectives(t, P::collectives());
    t.put(')');
  } else {
    t.put(" (kept)");
  }
}

/// Everything after the label, built by the compiler.
template <class Op, class T, class Forced, class... L, std::size_t... I>
constexpr text summary(std::index_sequence<I...>) {
  using R = ops::resolved<Op, T, Forced, L...>;
  text t;
  int collectives = 0;
  t.put(':');
  (put_input<R, T, I, L>(t, collectives), ...);
  t.put("  -> out ");
  put_placements(t, R::compute_layout::spec());
  if constexpr (R::output_moves) {
    using P = plan_of<typename R::compute_layout, typename R::out_layout, T>;
    collectives += P::collectives();
    t.put(" -> ");
    put_placements(t, R::out_layout::spec());
    t.put(" (forced; plan ");
    t.put(P::trace().view());
    t.put(')');
  }
  t.put("; ");
  put_collectives(t, collectives);
  t.put(R::result.costed ? " (cheapest strategy)" : " (inputs as they are)");
  return t;
}

/// The summary's characters, no more: what the program holds is the text, not the buffer.
template <class Op, class T, class Forced, class... L>
struct constant {
  static constexpr text full = summary<Op, T, Forced, L...>(std::index_sequence_for<L...>{});
  static_assert(full.n < text::capacity, "spmd::io::op_summary: the summary outgrew its buffer; raise summary_detail::capacity.");
  struct chars_t {
    char c[full.n + 1]{};
  };
  static constexpr chars_t chars = [] {
    chars_t out;
    for (int i = 0; i < full.n; ++i) out.c[i] = full.chars[i];
    return out;
  }();
  static constexpr std::string_view view() { return {chars.c, static_cast<std::size_t>(full.n)}; }
};

/// The pieces joined, out of line: the summaries' only code.
[[gnu::noinline]] inline std::string joined(std::initializer_list<std::string_view> pieces) {
  std::size_t n = 0;
  for (std::string_view p : pieces) n += p.size();
  std::string s;
  s.reserve(n);
  for (std::string_view p : pieces) s.append(p.data(), p.size());
  return s;
}

}  // namespace summary_detail

/// The compile-time decision of Op on input layouts L... with element type T (`Forced` as
/// in sim::apply), one line: `label` followed by text the compiler wrote.
template <class Op, class T, class Forced, class... L>
std::string op_summary(std::string_view label) {
  return summary_detail::joined({label, summary_detail::constant<Op, T, Forced, L...>::view()});
}

}  // namespace spmd::io
