// spmd/ops/view.hpp — the sharding rules of the view operators, as dim maps written in einsum
// factors (ops/rule.hpp). Every view here makes a new tensor (the simulation copies), so a
// view and a reshape are the same operator.
//
//   transpose<D0, D1>   "ij->ji"           pure relabel: a shard follows its dim
//   permute<P...>       "ijk->kij"         pure relabel
//   squeeze<D>          "i.j->ij"          the size-1 dim has no factor (replicated)
//   unsqueeze<D>        "ij->i.j"          the new size-1 dim has no factor
//   flatten<S, E>       "ijk->iJ" (J = j·k) one group: only the leftmost input dim may stay
//                                          sharded, and only evenly; the others are fixed
//   reshape<E...>       groups of input dims matched with groups of output dims by products
//                       (DTensor's view_groups): (4, 6) -> (2, 2, 6) is [4]->[2, 2], [6]->[6]
//
// Why evenness. A group's local block is a contiguous run of its flattened index only when
// the leftmost dim is cut into equal pieces: rank r of n holds rows [r·a/n, (r+1)·a/n) of an
// (a, b) input, i.e. flat elements [r·a·b/n, (r+1)·a·b/n), which is exactly the output's rank
// r chunk of a·b. With an uneven cut (a = 5 on 4 ranks: 2, 2, 1, 0 rows) the input pieces are
// 6, 6, 3, 0 flat elements while the output's chunks of 15 are 4, 4, 4, 3 — relabelling the
// shard would silently give wrong numbers (pytorch #143372). Here such a factor is
// `even_only`, so the propagation redistributes first. A split needs the same on the output
// side: the leftmost output dim must divide too (checked, as every even_only factor is, on
// every tensor that has it, at every level of nested sharding).
//
// Every view passes every Partial through: a view only moves elements, so the view of a sum
// (mean, max, min, product) of pieces is that reduction of the viewed pieces. (The rule lists
// the pass-through only for the partial ops its input holds: see dim_map for why.)
#pragma once

#include <initializer_list>
#include <stdexcept>
#include <string>

#include "spmd/core/extents.hpp"
#include "spmd/ops/propagate.hpp"
#include "spmd/ops/rule.hpp"
#include "spmd/ops/shape_text.hpp"

namespace spmd::ops {

namespace view_detail {

using text = einsum_writer;
constexpr char letter(int f) { return factor_letter(f); }

/// What a dim map says of one factor besides its dims.
enum class factor_kind : std::uint8_t { free, even, fixed };

/// The rule "in0,in1,...->out" over generated factor numbers, `kind[f]` for factor f, and the
/// Partial pass-through P(op) (every input) -> P(op) for each op some input of `c` holds.
///
/// Why only those: the planner prices a Shard or Replicate -> Partial move at 0 (a local
/// zero-fill), and the propagation costs only the inputs, so with a P(sum) rule present an
/// S(0) input that cannot stay sharded (flatten of (5, 3) on 4 ranks) would become a P(sum)
/// output — right numbers, but an all-reduce left for later instead of an all-gather now.
/// DTensor never redistributes to Partial for this reason. A view of an input that holds
/// P(op) still passes it through, for all five ops.
constexpr op_rule dim_map(const svec<factor_dims, max_op_inputs>& in, const factor_dims& out,
                          const svec<factor_kind, max_factors>& kind, const op_context& c) {
  text t{};
  for (int i = 0; i < in.size(); ++i) {
    if (i) t.put(',');
    t.put(in[i]);
  }
  t.put('-');
  t.put('>');
  t.put(out);
  op_rule r = einsum(t.text);
  for (int f = 0; f < kind.size(); ++f) {
    if (kind[f] == factor_kind::fixed) r = r.fixed(letter(f)).not_reducible(letter(f));
    if (kind[f] == factor_kind::even) r = r.even_only(letter(f));
  }
  for (reduce_op op : {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min, reduce_op::product}) {
    bool held = false;
    for (const layout_spec& s : c.in)
      for (const placement& p : s.placements) held = held || (p.is_partial() && p.op == op);
    if (held) r = r.passes_partial(op, op);
  }
  return r;
}

constexpr op_rule dim_map(const factor_dims& in, const factor_dims& out,
                          const svec<factor_kind, max_factors>& kind, const op_context& c) {
  svec<factor_dims, max_op_inputs> ins{};
  ins.push_back(in);
  return dim_map(ins, out, kind, c);
}

/// 0, 1, ..., n-1: every dim its own factor.
constexpr factor_dims identity(int n) {
  factor_dims d{};
  for (int i = 0; i < n; ++i) d.push_back(static_cast<std::int8_t>(i));
  return d;
}

constexpr svec<factor_kind, max_factors> kinds(int n, factor_kind k) {
  svec<factor_kind, max_factors> v{};
  for (int i = 0; i < n; ++i) v.push_back(k);
  return v;
}

/// The product of the extents, or dyn when one is dyn.
constexpr index_t count(const shape_vec& s) {
  index_t n = 1;
  for (index_t e : s) {
    if (e == dyn) return dyn;
    n *= e;
  }
  return n;
}

using ops::shape_text;

/// The rule of a reshape of `in` to `out` (DTensor's view_groups). Size-1 dims have no
/// factor. The other dims form groups, each a run of input dims and a run of output dims
/// with the same product: a group of one dim on each side (same extent) is a relabel; any
/// other group is a flatten then a split, where the leftmost input dim and the leftmost
/// output dim share one `even_only` factor and every other dim is fixed. A dynamic input
/// extent or an empty tensor gives no groups: every dim is fixed (replicated).
constexpr op_rule reshape_rule(const shape_vec& in, const shape_vec& out, const op_context& c) {
  factor_dims fin{}, fout{};
  svec<factor_kind, max_factors> kind{};
  const bool groupable = count(in) != dyn && count(in) > 0 && count(in) == count(out);
  if (!groupable) {
    for (int d = 0; d < in.size(); ++d) {
      fin.push_back(static_cast<std::int8_t>(kind.size()));
      kind.push_back(factor_kind::fixed);
    }
    for (int d = 0; d < out.size(); ++d) {
      fout.push_back(static_cast<std::int8_t>(kind.size()));
      kind.push_back(factor_kind::fixed);
    }
    return dim_map(fin, fout, kind, c);
  }
  for (int d = 0; d < in.size(); ++d) fin.push_back(no_factor);
  for (int d = 0; d < out.size(); ++d) fout.push_back(no_factor);
  auto fresh = [&kind](factor_kind k) {
    kind.push_back(k);
    return static_cast<std::int8_t>(kind.size() - 1);
  };
  int i = 0, j = 0;
  while (true) {
    while (i < in.size() && in[i] == 1) ++i;  // size-1 dims: no factor
    while (j < out.size() && out[j] == 1) ++j;
    if (i == in.size() || j == out.size()) break;  // equal counts: both sides end together
    const int i0 = i, j0 = j;
    index_t pin = in[i++], pout = out[j++];
    while (pin != pout) {
      if (pin < pout) pin *= in[i++];
      else pout *= out[j++];
    }
    const bool relabel = i == i0 + 1 && j == j0 + 1;
    const std::int8_t lead = fresh(relabel ? factor_kind::free : factor_kind::even);
    fin[i0] = lead;
    fout[j0] = lead;
    for (int k = i0 + 1; k < i; ++k)
      if (in[k] != 1) fin[k] = fresh(factor_kind::fixed);
    for (int k = j0 + 1; k < j; ++k)
      if (out[k] != 1) fout[k] = fresh(factor_kind::fixed);
  }
  return dim_map(fin, fout, kind, c);
}

}  // namespace view_detail

/// Swaps dims D0 and D1 (both in [0, rank)).
template <int D0, int D1>
struct transpose {
  static constexpr const char* name = "transpose";
  static constexpr factor_dims out_map(int rank) {
    factor_dims o = view_detail::identity(rank);
    o[D0] = static_cast<std::int8_t>(D1);
    o[D1] = static_cast<std::int8_t>(D0);
    return o;
  }
  static constexpr op_rule rule(const op_context& c) {
    const int n = c.in_shape[0].size();
    return view_detail::dim_map(view_detail::identity(n), out_map(n),
                                view_detail::kinds(n, view_detail::factor_kind::free), c);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec s = in[0];
    s[D0] = in[0][D1];
    s[D1] = in[0][D0];
    return s;
  }
};

/// Output dim k is input dim P[k] (P a permutation of [0, rank)).
template <int... P>
struct permute {
  static constexpr const char* name = "permute";
  static constexpr op_rule rule(const op_context& c) {
    const int n = c.in_shape[0].size();
    factor_dims o{};
    (o.push_back(static_cast<std::int8_t>(P)), ...);
    return view_detail::dim_map(view_detail::identity(n), o,
                                view_detail::kinds(n, view_detail::factor_kind::free), c);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec s{};
    (s.push_back(in[0][P]), ...);
    return s;
  }
};

/// Removes dim D, which must have extent 1.
template <int D>
struct squeeze {
  static constexpr const char* name = "squeeze";
  static constexpr op_rule rule(const op_context& c) {
    const int n = c.in_shape[0].size();
    factor_dims i = view_detail::identity(n), o{};
    i[D] = no_factor;
    for (int d = 0; d < n; ++d)
      if (d != D) o.push_back(static_cast<std::int8_t>(d));
    return view_detail::dim_map(i, o, view_detail::kinds(n, view_detail::factor_kind::free), c);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    if (in[0][D] != 1 && in[0][D] != dyn)
      throw std::invalid_argument("spmd::squeeze: dim " + std::to_string(D) + " of the shape " +
                                  view_detail::shape_text(in[0]) + " has extent " +
                                  std::to_string(in[0][D]) + ", not 1");
    shape_vec s{};
    for (int d = 0; d < in[0].size(); ++d)
      if (d != D) s.push_back(in[0][d]);
    return s;
  }
};

/// Inserts a dim of extent 1 before dim D (D in [0, rank]).
template <int D>
struct unsqueeze {
  static constexpr const char* name = "unsqueeze";
  static constexpr op_rule rule(const op_context& c) {
    const int n = c.in_shape[0].size();
    factor_dims o{};
    for (int d = 0; d <= n; ++d) {
      if (d == D) o.push_back(no_factor);
      if (d < n) o.push_back(static_cast<std::int8_t>(d));
    }
    return view_detail::dim_map(view_detail::identity(n), o,
                                view_detail::kinds(n, view_detail::factor_kind::free), c);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec s{};
    for (int d = 0; d <= in[0].size(); ++d) {
      if (d == D) s.push_back(1);
      if (d < in[0].size()) s.push_back(in[0][d]);
    }
    return s;
  }
};

/// Merges dims [Start, End] (0 <= Start <= End < rank) into one. Size-1 dims of the group
/// have no factor; the leftmost other dim carries the group's factor (even_only when another
/// dim of extent > 1 joins it: see the top of this file), the rest are fixed.
template <int Start, int End>
struct flatten {
  static constexpr const char* name = "flatten";
  static constexpr op_rule rule(const op_context& c) {
    using view_detail::factor_kind;
    const shape_vec& s = c.in_shape[0];
    const int n = s.size();
    factor_dims i{}, o{};
    svec<factor_kind, max_factors> kind = view_detail::kinds(n, factor_kind::free);
    int lead = -1, wide = 0;  // the group's leftmost dim of extent != 1; how many there are
    for (int d = 0; d < n; ++d) {
      const bool in_group = d >= Start && d <= End;
      if (in_group && s[d] == 1) {
        i.push_back(no_factor);
        continue;
      }
      i.push_back(static_cast<std::int8_t>(d));
      if (in_group && lead < 0) lead = d;
      else if (in_group) kind[d] = factor_kind::fixed;
      wide += in_group ? 1 : 0;
    }
    if (lead >= 0 && wide > 1) kind[lead] = factor_kind::even;
    for (int d = 0; d < n; ++d) {
      if (d == Start) o.push_back(lead >= 0 ? static_cast<std::int8_t>(lead) : no_factor);
      else if (d < Start || d > End) o.push_back(static_cast<std::int8_t>(d));
    }
    return view_detail::dim_map(i, o, kind, c);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec s{};
    shape_vec group{};
    for (int d = 0; d < in[0].size(); ++d) {
      if (d >= Start && d <= End) group.push_back(in[0][d]);
      if (d == End) s.push_back(view_detail::count(group));
      else if (d < Start || d > End) s.push_back(in[0][d]);
    }
    return s;
  }
};

/// A new tensor of the static extents E... with the same elements in row-major order.
template <index_t... E>
struct reshape {
  static constexpr const char* name = "reshape";
  static constexpr shape_vec target() { return shape_vec{{E...}, static_cast<int>(sizeof...(E))}; }
  static constexpr op_rule rule(const op_context& c) {
    return view_detail::reshape_rule(c.in_shape[0], target(), c);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    const index_t n = view_detail::count(in[0]), m = view_detail::count(target());
    if (n != dyn && n != m)
      throw std::invalid_argument("spmd::reshape: the shape " + view_detail::shape_text(in[0]) + " has " +
                                  std::to_string(n) + " elements, the new shape " +
                                  view_detail::shape_text(target()) + " has " + std::to_string(m));
    return target();
  }
};

/// Elements [Start, Start + Len) of dim Dim (torch.narrow; split's pieces, cat's backward).
/// Dim is fixed (never sharded: a slice of a sharded dim would need the blocks to move); the
/// other dims keep their sharding, and Partials pass (a slice of a sum is the sum of slices).
template <int Dim, index_t Start, index_t Len>
struct narrow {
  static_assert(Start >= 0 && Len >= 0, "spmd::narrow: Start and Len must be >= 0.");
  static constexpr const char* name = "narrow";
  static constexpr op_rule rule(const op_context& c) {
    const int n = c.in_shape[0].size();
    svec<view_detail::factor_kind, max_factors> kind = view_detail::kinds(n, view_detail::factor_kind::free);
    kind[Dim] = view_detail::factor_kind::fixed;
    return view_detail::dim_map(view_detail::identity(n), view_detail::identity(n), kind, c);
  }
  static constexpr shape_vec out_shape(const svec<shape_vec, max_op_inputs>& in) {
    shape_vec s = in[0];
    if (Dim < 0 || Dim >= s.size())
      throw std::invalid_argument("spmd::narrow: the dim is outside the tensor's dims");
    if (s[Dim] != dyn && Start + Len > s[Dim])
      throw std::invalid_argument("spmd::narrow: [" + std::to_string(Start) + ", " + std::to_string(Start + Len) +
                                  ") is outside dim " + std::to_string(Dim) + " of extent " +
                                  std::to_string(s[Dim]));
    s[Dim] = Len;
    return s;
  }
};

}  // namespace spmd::ops
