// spmd/ops/rule.hpp — an operator's sharding rule as data: einsum-like factors plus the
// Partial placements it passes through. Everything is constexpr and allocation-free, so a
// rule can be written in a header, expanded and costed by the compiler (ops/propagate.hpp),
// and printed by `spmd-plan explain` at run time.
//
//   constexpr op_rule mm = einsum("mk,kn->mn");         // k is contracted: sharding it on a
//                                                        // mesh dim gives an output P(sum)
//   constexpr op_rule sm = einsum("ij->ij").fixed('j');  // softmax along j: j never sharded
//
// Factors. Each letter is one factor (one iteration axis). A tensor dim labelled with a
// factor is sharded when the factor is; a factor missing from a tensor leaves that tensor
// replicated on the mesh dims that shard the factor. A factor missing from the output is
// reduced: sharding it makes the output Partial(factor.reduce), or is not allowed when the
// factor is not `reducible` (then the op must see the whole factor on every rank).
//   - `fixed`: never sharded (softmax's dim, layer_norm's normalised dims, cat's dim);
//   - `even_only`: sharded only when every tensor's extent of that factor splits evenly at
//     every level (a mean, whose Partial(avg) is right only for equal pieces; a flatten,
//     whose pieces line up only then).
// '.' in a subscript is a dim with no factor: a broadcast dim of size 1, always replicated.
// A factor that only the output has (a split's new dim) is fixed.
//
// Partial rules. For one mesh dim, a rule says which Partial (or Replicate) placement each
// input may hold and which Partial the output then holds: add passes P(sum) on both inputs
// to P(sum); mul passes P(sum) on one input when the other is replicated; relu passes P(max)
// (monotone). Facts in ../docs/operators.md.
#pragma once

#include <cstdint>

#include "spmd/core/config.hpp"
#include "spmd/core/placement.hpp"
#include "spmd/core/small_array.hpp"

namespace spmd::ops {

inline constexpr int max_op_inputs = 4;
inline constexpr int max_factors = 16;
inline constexpr int max_partial_rules = 12;
inline constexpr std::int8_t no_factor = -1;

struct factor_info {
  char name = '?';
  bool reducible = false;        // may be sharded while missing from the output
  reduce_op reduce = reduce_op::sum;
  bool fixed = false;            // never sharded
  bool even_only = false;        // sharded only where every level splits evenly
  index_t granule = 1;           // even_only in pieces of this many (attention's heads)
};

/// One mesh dim's pass-through of Partial placements: input i holds in[i] (replicate or
/// partial), the output holds `out` (a partial).
struct partial_rule {
  svec<placement, max_op_inputs> in{};
  placement out{};
};

using factor_dims = svec<std::int8_t, max_tensor_dims>;  // the factor of each tensor dim

struct op_rule {
  svec<factor_dims, max_op_inputs> in{};
  factor_dims out{};
  svec<factor_info, max_factors> factors{};
  svec<partial_rule, max_partial_rules> partials{};
  bool ok = true;                // false: the einsum text was malformed
  const char* error = nullptr;

  constexpr int inputs() const { return in.size(); }

  /// The factor called `c`, or no_factor.
  constexpr int factor(char c) const {
    for (int f = 0; f < factors.size(); ++f)
      if (factors[f].name == c) return f;
    return no_factor;
  }
  /// True when factor f labels some dim of `dims`.
  static constexpr bool has(const factor_dims& dims, int f) { return dim_of(dims, f) >= 0; }
  /// The dim of `dims` labelled f, or -1.
  static constexpr int dim_of(const factor_dims& dims, int f) {
    for (int d = 0; d < dims.size(); ++d)
      if (dims[d] == f) return d;
    return -1;
  }

  // Builders (each returns a modified copy, so rules read as one expression).
  constexpr op_rule fixed(char c) const {
    op_rule r = *this;
    if (const int f = factor(c); f >= 0) r.factors[f].fixed = true;
    return r;
  }
  constexpr op_rule even_only(char c) const {
    op_rule r = *this;
    if (const int f = factor(c); f >= 0) r.factors[f].even_only = true;
    return r;
  }
  /// even_only in whole groups of `granule` (each piece a multiple of it: whole heads).
  constexpr op_rule even_in(char c, index_t granule) const {
    op_rule r = even_only(c);
    if (const int f = factor(c); f >= 0) r.factors[f].granule = granule;
    return r;
  }
  /// Factor c, when missing from the output, reduces with `op` (sharding it gives P(op)).
  constexpr op_rule reduces(char c, reduce_op op) const {
    op_rule r = *this;
    if (const int f = factor(c); f >= 0) {
      r.factors[f].reducible = true;
      r.factors[f].reduce = op;
    }
    return r;
  }
  /// Factor c, when missing from the output, may not be sharded.
  constexpr op_rule not_reducible(char c) const {
    op_rule r = *this;
    if (const int f = factor(c); f >= 0) r.factors[f].reducible = false;
    return r;
  }
  constexpr op_rule with_partial(partial_rule p) const {
    op_rule r = *this;
    if (r.partials.size() < max_partial_rules) r.partials.push_back(p);
    return r;
  }
  /// Every input holding P(in_op) gives P(out_op) (linear or monotone in every input).
  constexpr op_rule passes_partial(reduce_op in_op, reduce_op out_op) const {
    partial_rule p{};
    for (int i = 0; i < inputs(); ++i) p.in.push_back(make_partial(in_op));
    p.out = make_partial(out_op);
    return with_partial(p);
  }
  /// Input i alone holding P(in_op), the others replicated, gives P(out_op) (multilinear).
  constexpr op_rule passes_partial_of(int i, reduce_op in_op, reduce_op out_op) const {
    partial_rule p{};
    for (int k = 0; k < inputs(); ++k) p.in.push_back(k == i ? make_partial(in_op) : make_replicate());
    p.out = make_partial(out_op);
    return with_partial(p);
  }
};

/// The letter of factor number f in generated einsum text: a-z, then A-Z.
constexpr char factor_letter(int f) {
  return f < 26 ? static_cast<char>('a' + f) : static_cast<char>('A' + f - 26);
}

/// Einsum text assembled in the compiler, for rules built from shapes (elementwise
/// broadcasting, views, normalisations): letters, '.', ',' and "->". Zero-filled, so the
/// text is always terminated.
struct einsum_writer {
  char text[2 * (max_tensor_dims + 1) * max_op_inputs]{};
  int n = 0;
  constexpr einsum_writer& put(char c) {
    text[n++] = c;
    return *this;
  }
  /// One subscript from factor numbers ('.' for no_factor).
  constexpr einsum_writer& put(const factor_dims& dims) {
    for (std::int8_t f : dims) put(f == no_factor ? '.' : factor_letter(f));
    return *this;
  }
  /// The letters of dims first .. first + count - 1 (dim d is factor d).
  constexpr einsum_writer& dims(int first, int count) {
    for (int d = first; d < first + count; ++d) put(factor_letter(d));
    return *this;
  }
};

/// A rule from einsum text: "mk,kn->mn", "ij,.j->ij", "bij->bji". Factors missing from the
/// output are reducible with sum (a contraction); use reduces()/not_reducible() to change.
constexpr op_rule einsum(const char* text) {
  op_rule r{};
  auto fail = [&r](const char* why) {
    r.ok = false;
    r.error = why;
    return r;
  };
  auto factor_of = [&r](char c) -> int {
    for (int f = 0; f < r.factors.size(); ++f)
      if (r.factors[f].name == c) return f;
    if (r.factors.size() == max_factors) return -2;
    r.factors.push_back(factor_info{c, true, reduce_op::sum, false, false});
    return r.factors.size() - 1;
  };
  factor_dims cur{};
  bool output = false;
  for (const char* p = text;; ++p) {
    const char c = *p;
    if (c == ',' || c == '-' || c == '\0') {
      if (output) {
        if (c != '\0') return fail("text after the output subscript");
        r.out = cur;
        break;
      }
      if (r.in.size() == max_op_inputs) return fail("more than 4 inputs");
      r.in.push_back(cur);
      cur = factor_dims{};
      if (c == '-') {
        if (p[1] != '>') return fail("'-' not followed by '>'");
        ++p;
        output = true;
      } else if (c == '\0') {
        return fail("no '->' in the einsum text");
      }
      continue;
    }
    if (cur.size() == max_tensor_dims) return fail("a subscript with more than 8 dims");
    if (c == '.') {
      cur.push_back(no_factor);
      continue;
    }
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return fail("a subscript letter is not a-z or A-Z");
    const int f = factor_of(c);
    if (f == -2) return fail("more than 16 factors");
    for (std::int8_t e : cur)
      if (e == f) return fail("a factor repeats within one subscript");
    cur.push_back(static_cast<std::int8_t>(f));
  }
  // A factor only the output has (a split's new dim) is made by the op: never sharded.
  for (int f = 0; f < r.factors.size(); ++f) {
    bool in_input = false;
    for (const factor_dims& d : r.in) in_input = in_input || op_rule::has(d, f);
    if (!in_input) r.factors[f].fixed = true;
  }
  return r;
}

}  // namespace spmd::ops
