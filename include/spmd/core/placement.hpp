// spmd/core/placement.hpp — how one mesh dim places a tensor: shard, replicate, partial.
//
// Types at the surface (`shard<0>`, `replicate`, `partial<reduce_op::max>`) so layouts
// are template parameters; each type carries a constexpr `placement` value, and the
// algorithms run over those values as ordinary constexpr code.
#pragma once

#include <concepts>
#include <cstdint>

#include "spmd/core/config.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd {

enum class placement_kind : std::uint8_t { replicate, shard, partial };

/// The reduction a Partial placement stands for.
enum class reduce_op : std::uint8_t { sum, avg, max, min, product };

/// "No explicit position in the shard order": nested shards apply left to right.
inline constexpr int default_order = -1;

/// Value form of one placement.
/// @post for shards, `dim` may be negative (counts from the end) until a layout
///       normalises it; `order` is this mesh dim's position in `dim`'s shard order.
struct placement {
  placement_kind kind = placement_kind::replicate;
  int dim = 0;                  // shard only
  reduce_op op = reduce_op::sum;  // partial only
  int order = default_order;    // shard only

  SPMD_HD constexpr bool is_shard() const { return kind == placement_kind::shard; }
  SPMD_HD constexpr bool is_shard(int d) const { return is_shard() && dim == d; }
  SPMD_HD constexpr bool is_replicate() const { return kind == placement_kind::replicate; }
  SPMD_HD constexpr bool is_partial() const { return kind == placement_kind::partial; }

  SPMD_HD friend constexpr bool operator==(const placement& a, const placement& b) {
    if (a.kind != b.kind) return false;
    if (a.kind == placement_kind::shard) return a.dim == b.dim && a.order == b.order;
    if (a.kind == placement_kind::partial) return a.op == b.op;
    return true;
  }
};

/// "sum", "avg", "max", "min", "product" (the text form inside P(...)).
SPMD_HD constexpr const char* reduce_op_name(reduce_op op) {
  switch (op) {
    case reduce_op::sum: return "sum";
    case reduce_op::avg: return "avg";
    case reduce_op::max: return "max";
    case reduce_op::min: return "min";
    case reduce_op::product: return "product";
  }
  return "?";
}

SPMD_HD constexpr placement make_shard(int dim, int order = default_order) {
  return {placement_kind::shard, dim, reduce_op::sum, order};
}
SPMD_HD constexpr placement make_replicate() { return {}; }
SPMD_HD constexpr placement make_partial(reduce_op op = reduce_op::sum) {
  return {placement_kind::partial, 0, op, default_order};
}

/// One entry per mesh dim.
using placement_vec = svec<placement, max_mesh_dims>;

/// True when some mesh dim holds Partial(op).
SPMD_HD constexpr bool holds_partial(const placement_vec& p, reduce_op op) {
  for (int m = 0; m < p.size(); ++m)
    if (p[m].is_partial() && p[m].op == op) return true;
  return false;
}

// ---------------------------------------------------------------------------
// Types at the surface
// ---------------------------------------------------------------------------

/// Split tensor dim D over this mesh dim, torch.chunk style. D < 0 counts from the
/// end. Order = this mesh dim's position in D's shard order (0 splits first); leave
/// it out everywhere for the default left-to-right order.
template <int D, int Order = default_order>
struct shard {
  static_assert(Order >= default_order, "spmd::shard: a shard order position must be >= 0.");
  SPMD_HD static constexpr placement value() { return make_shard(D, Order); }
};

/// Every rank of the mesh dim holds the whole (current) tensor.
struct replicate {
  SPMD_HD static constexpr placement value() { return make_replicate(); }
};

/// Every rank holds a partial value; the tensor is the Op-reduction over the mesh dim.
template <reduce_op Op = reduce_op::sum>
struct partial {
  SPMD_HD static constexpr placement value() { return make_partial(Op); }
};

template <class T>
concept placement_type = requires {
  { T::value() } -> std::same_as<placement>;
};

/// The placement list of a layout, one per mesh dim.
template <class... P>
struct placements {
  static_assert((placement_type<P> && ...),
                "spmd::placements: every entry must be spmd::shard<D>, spmd::replicate or "
                "spmd::partial<Op>.");
  static_assert(sizeof...(P) <= max_mesh_dims,
                "spmd::placements: at most spmd::max_mesh_dims (8) placements.");
  static constexpr int size = sizeof...(P);

  SPMD_HD static constexpr placement_vec value() {
    placement_vec v{};
    (v.push_back(P::value()), ...);
    return v;
  }
};

}  // namespace spmd
