// spmd/core/put_placement.hpp — one placement as text, written by constant expressions:
// "R", "P(sum)", "S(0)", "S(1)[2]". Plan traces (plan/trace.hpp) and placement lists
// (io/placement_format.hpp) both write placements this way; they differ only in when the
// order bracket is shown.
#pragma once

#include <string_view>

#include "spmd/core/fixed_text.hpp"
#include "spmd/core/placement.hpp"

namespace spmd {

/// The longest text of a valid placement (a layout's: shard dims and orders below 8):
/// "P(product)" or "S(-7)[7]".
inline constexpr int placement_chars = 10;

/// The longest text of any placement value, valid or not (a parsed list is checked against a
/// mesh only later, so its dims and orders are any int): "S(-2147483648)[-2147483648]".
inline constexpr int any_placement_chars = 27;
static_assert(sizeof(int) == 4, "any_placement_chars assumes a 32-bit int");

/// p into t; a shard's order as "[k]" when `order` (a trace: the dim is sharded on several
/// mesh dims; a placement list: the order is not the default).
template <int N>
constexpr void put_placement(fixed_text<N>& t, const placement& p, bool order) {
  switch (p.kind) {
    case placement_kind::replicate: t.put('R'); return;
    case placement_kind::partial:
      t.put("P(");
      t.put(std::string_view(reduce_op_name(p.op)));
      t.put(')');
      return;
    case placement_kind::shard:
      t.put("S(");
      t.put(static_cast<long long>(p.dim));
      t.put(')');
      if (order) {
        t.put('[');
        t.put(static_cast<long long>(p.order));
        t.put(']');
      }
      return;
  }
  t.put('?');
}

}  // namespace spmd
