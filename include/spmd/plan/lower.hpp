// spmd/plan/lower.hpp — a redistribute step lowered to box operations on local buffers.
//
// `build_schedule(step, global)` applies the box semantics of spmd/plan/step.hpp to a global
// shape and returns what every rank does: keep its buffer, modify it (in place when it owns
// it), or get a fresh one; and a list of operations on runs of contiguous elements (copy,
// move, fill, scale, reduce). It also checks the step's preconditions (the boxes fit).
//
// Placements on mesh dims of size 1 are not checked: they change no box (the planner
// treats them as R and emits no step for them).
//
// It is constexpr: the typed path evaluates it in the compiler (static extents), so each op
// of each rank is a constant and the executor unrolls over them; the runtime path (a `plan`
// value, dynamic extents) calls the same function. One lowering serves both.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/core/config.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/core/small_array.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/step.hpp"
#include "spmd/plan/traffic.hpp"

namespace spmd {

// ---------------------------------------------------------------------------
// Geometry: a box of a row-major array as runs of contiguous elements
// ---------------------------------------------------------------------------

/// A region copied between two row-major arrays (or read from several same-shaped ones),
/// with dims of extent 1 dropped and neighbouring dims merged wherever both arrays are
/// contiguous across them: an aligned box is a single run.
struct run_geom {
  int nd = 0;              // outer dims left after merging (0: one run)
  index_t run = 0;         // elements per run; 0: the region is empty
  index_t s_inner = 1;     // element stride inside a run in the source (1: contiguous)
  index_t d_inner = 1;     // ... in the destination
  index_t ext[max_tensor_dims]{};   // outer extents, outermost first
  index_t sstr[max_tensor_dims]{};  // source strides of the outer dims
  index_t dstr[max_tensor_dims]{};  // destination strides of the outer dims
  index_t soff = 0;        // source offset of the first element
  index_t doff = 0;        // destination offset of the first element

  SPMD_HD constexpr index_t count() const {
    index_t n = run;
    for (int d = 0; d < nd; ++d) n *= ext[d];
    return n;
  }
  SPMD_HD constexpr bool contiguous() const { return s_inner == 1 && d_inner == 1; }
  SPMD_HD friend constexpr bool operator==(const run_geom&, const run_geom&) = default;
};

/// Intersection of two boxes (an empty box, offsets unspecified, when they do not meet).
SPMD_HD constexpr local_box intersect(const local_box& a, const local_box& b) {
  local_box r{};
  for (int d = 0; d < a.shape.size(); ++d) {
    const index_t lo = a.offset[d] > b.offset[d] ? a.offset[d] : b.offset[d];
    const index_t ha = a.offset[d] + a.shape[d], hb = b.offset[d] + b.shape[d];
    const index_t hi = ha < hb ? ha : hb;
    r.offset.push_back(lo);
    r.shape.push_back(hi > lo ? hi - lo : 0);
  }
  return r;
}

/// True when every element of `inner` lies in `outer` (an empty box lies in any box).
SPMD_HD constexpr bool contains(const local_box& outer, const local_box& inner) {
  if (box_volume(inner) == 0) return true;
  for (int d = 0; d < inner.shape.size(); ++d)
    if (inner.offset[d] < outer.offset[d] ||
        inner.offset[d] + inner.shape[d] > outer.offset[d] + outer.shape[d])
      return false;
  return true;
}

/// Same elements (two empty boxes are the same).
SPMD_HD constexpr bool same_box(const local_box& a, const local_box& b) {
  const index_t n = box_volume(a);
  if (n != box_volume(b)) return false;
  return n == 0 || a == b;
}

/// The runs of `region` (global coordinates) between a source array holding box `src`
/// and a destination array holding box `dst`. @pre region lies in both, or is empty.
SPMD_HD constexpr run_geom make_geom(const local_box& region, const local_box& src,
                                     const local_box& dst) {
  run_geom g{};
  const int rank = region.shape.size();
  if (box_volume(region) == 0) return g;  // run = 0
  // Row-major strides of both arrays, and the offset of the region's first element.
  index_t ss[max_tensor_dims]{}, ds[max_tensor_dims]{};
  index_t s = 1, t = 1;
  for (int d = rank - 1; d >= 0; --d) {
    ss[d] = s;
    ds[d] = t;
    s *= src.shape[d];
    t *= dst.shape[d];
    g.soff += (region.offset[d] - src.offset[d]) * ss[d];
    g.doff += (region.offset[d] - dst.offset[d]) * ds[d];
  }
  // Merge from the innermost dim outwards; dims of extent 1 do not count.
  index_t e[max_tensor_dims]{}, es[max_tensor_dims]{}, ed[max_tensor_dims]{};
  int k = 0;  // groups, innermost first
  for (int d = rank - 1; d >= 0; --d) {
    const index_t x = region.shape[d];
    if (x == 1) continue;
    if (k > 0 && ss[d] == e[k - 1] * es[k - 1] && ds[d] == e[k - 1] * ed[k - 1]) {
      e[k - 1] *= x;
    } else {
      e[k] = x;
      es[k] = ss[d];
      ed[k] = ds[d];
      ++k;
    }
  }
  if (k == 0) {  // a single element
    g.run = 1;
    return g;
  }
  g.run = e[0];
  g.s_inner = es[0];
  g.d_inner = ed[0];
  g.nd = k - 1;
  for (int i = 0; i < g.nd; ++i) {  // outermost first
    g.ext[i] = e[k - 1 - i];
    g.sstr[i] = es[k - 1 - i];
    g.dstr[i] = ed[k - 1 - i];
  }
  return g;
}

/// The whole of a contiguous array of n elements as one run.
SPMD_HD constexpr run_geom whole_geom(index_t n) {
  run_geom g{};
  g.run = n;
  return g;
}

/// True when two layouts give every rank the same block: equal up to placements on mesh
/// dims of size 1 (which split into one piece and reduce over one rank) and the shard
/// positions those take. The planner keeps R on such dims, the caller's layout may not.
SPMD_HD constexpr bool same_blocks(const layout_spec& a, const layout_spec& b) {
  if (!(a.mesh == b.mesh) || a.tensor_rank != b.tensor_rank ||
      a.placements.size() != a.mesh.size() || b.placements.size() != b.mesh.size())
    return false;
  for (int m = 0; m < a.mesh.size(); ++m) {
    if (a.mesh[m] == 1) continue;
    const placement& x = a.placements[m];
    const placement& y = b.placements[m];
    if (x.kind != y.kind || (x.is_shard() && x.dim != y.dim) ||
        (x.is_partial() && x.op != y.op))
      return false;
  }
  for (int d = 0; d < a.tensor_rank; ++d) {  // the order of the real splits
    const auto oa = a.shard_order(d), ob = b.shard_order(d);
    int i = 0, j = 0;
    for (;;) {
      while (i < oa.size() && a.mesh[oa[i]] == 1) ++i;
      while (j < ob.size() && b.mesh[ob[j]] == 1) ++j;
      if (i == oa.size() || j == ob.size()) {
        if (i != oa.size() || j != ob.size()) return false;
        break;
      }
      if (oa[i++] != ob[j++]) return false;
    }
  }
  return true;
}

// ---------------------------------------------------------------------------
// Schedules
// ---------------------------------------------------------------------------

/// What a step does to a rank's buffer.
enum class disposition : std::uint8_t {
  keep,    // the local is unchanged: the new state holds the same buffer
  modify,  // same or smaller: written in place when the rank owns its buffer
  fresh,   // a new buffer (the rank's old one is still read by the step)
};

struct rank_plan {
  disposition how = disposition::keep;
  shape_vec shape{};  // the local shape after the step (box_B(r))
  index_t elems = 0;
  SPMD_HD friend constexpr bool operator==(const rank_plan&, const rank_plan&) = default;
};

enum class op_code : std::uint8_t {
  copy,          // out[dst][geo.d] = in[src][geo.s]                      (distinct buffers)
  move,          // the same, where out[dst] may be in[src] (forward order, memmove)
  fill,          // out[dst][geo.d] = identity(op)
  scale,         // out[dst][geo.d] = in[src][geo.s] * group size           (fill, avg)
  reduce,        // out[dst][geo.d] = op over the members of group src of in[m][geo.s]
  reduce_bcast,  // every member m of group src: out[m] = op over all in[.] (whole buffers)
  replicate,     // out[dst] = out[src] (whole buffers of the same box; src's ops ran before)
};

struct sched_op {
  op_code code = op_code::copy;
  index_t src = 0;  // mesh index in state A, or the group (reduce, reduce_bcast)
  index_t dst = 0;  // mesh index in state B
  run_geom geo{};
  // Copies from one source whose runs interleave in it (the same rows, other columns: an
  // all_to_all's pieces) form a bundle of `bundle` consecutive ops, the first marked
  // `bundle_head`. Large bundles run row by row across their ops, so the source is read
  // in order once instead of once per destination, column band by column band.
  index_t bundle = 1;
  bool bundle_head = true;
  SPMD_HD friend constexpr bool operator==(const sched_op&, const sched_op&) = default;
};

/// True when a and b read runs of the same shape at the same source strides.
SPMD_HD constexpr bool same_rows(const run_geom& a, const run_geom& b) {
  if (a.nd != b.nd || a.run != b.run || !a.contiguous() || !b.contiguous()) return false;
  for (int d = 0; d < a.nd; ++d)
    if (a.ext[d] != b.ext[d] || a.sstr[d] != b.sstr[d]) return false;
  return true;
}

/// Why a step cannot run.
enum class step_error : std::uint8_t {
  none,
  mesh_mismatch,        // from and to differ in mesh or tensor rank
  shape_mismatch,       // the global shape has another number of dims than the specs
  bad_mask,             // G is empty or names dims outside the mesh
  changes_outside,      // a placement outside G differs between from and to
  wrong_placements,     // G's placements do not fit the step kind or its op
  not_covered,          // gather/all_to_all: the pieces do not cover box_B(r) exactly
  not_contained,        // a box that must lie in another does not
};

constexpr const char* describe(step_error e) {
  switch (e) {
    case step_error::none: return "no error";
    case step_error::mesh_mismatch:
      return "the step's from and to states differ in mesh or tensor rank";
    case step_error::shape_mismatch:
      return "the global shape has another number of dims than the step's states";
    case step_error::bad_mask:
      return "the step's mesh dims (G) are empty or outside the mesh";
    case step_error::changes_outside:
      return "a placement outside the step's mesh dims (G) changes";
    case step_error::wrong_placements:
      return "the placements on the step's mesh dims do not fit its kind or reduce op";
    case step_error::not_covered:
      return "the pieces gathered from the group do not cover the rank's new block exactly";
    case step_error::not_contained:
      return "a rank's new block does not lie where the step kind needs it (inside the old "
             "block, or equal to it)";
  }
  return "unknown error";
}

/// One step, lowered. Vectors so that it is built the same way at compile time and at run
/// time; the typed path copies it into fixed arrays (`fixed_schedule`).
struct step_schedule {
  step_kind kind = step_kind::chunk;
  reduce_op op = reduce_op::sum;
  dim_mask mask = 0;
  index_t group_size = 1;
  index_t group_count = 1;
  std::vector<index_t> members;  // members[g * group_size + j]: mesh index, group order
  std::vector<rank_plan> ranks;  // by mesh index
  std::vector<sched_op> ops;
  step_error error = step_error::none;
  index_t error_rank = -1;       // the mesh index the error is about, when there is one
};

namespace detail {

constexpr bool fits_kind(const plan_step& s, const placement& a, const placement& b) {
  const bool a_partial = a.is_partial() && a.op == s.op;
  const bool b_partial = b.is_partial() && b.op == s.op;
  switch (s.kind) {
    case step_kind::all_gather:
    case step_kind::all_to_all: return a.is_shard() && !b.is_partial();
    case step_kind::all_reduce:
    case step_kind::reduce_scatter: return a_partial && !b.is_partial();
    case step_kind::chunk: return !a.is_partial() && !b.is_partial();
    case step_kind::partition: return a.is_replicate() && b_partial;
    case step_kind::fill: return !a.is_partial() && b_partial;
  }
  return false;
}

}  // namespace detail

/// Lower `s` on a tensor of global shape `global`. On a failed precondition the result
/// carries `error` (and `error_rank`) and no ops.
constexpr step_schedule build_schedule(const plan_step& s, const shape_vec& global) {
  step_schedule out{};
  out.kind = s.kind;
  out.op = s.op;
  out.mask = s.mesh_dims;
  auto fail = [&out](step_error e, index_t r = -1) {
    out.error = e;
    out.error_rank = r;
    out.ops.clear();
    return out;
  };
  const mesh_shape_vec& mesh = s.from.mesh;
  if (!(s.from.mesh == s.to.mesh) || s.from.tensor_rank != s.to.tensor_rank ||
      s.from.placements.size() != mesh.size() || s.to.placements.size() != mesh.size())
    return fail(step_error::mesh_mismatch);
  if (global.size() != s.from.tensor_rank) return fail(step_error::shape_mismatch);
  if (s.mesh_dims == 0 || (s.mesh_dims >> mesh.size()) != 0) return fail(step_error::bad_mask);
  for (int m = 0; m < mesh.size(); ++m) {
    const placement& a = s.from.placements[m];
    const placement& b = s.to.placements[m];
    if (mesh[m] == 1) continue;  // splits into one piece, reduces over one rank: no effect
    if (!in_mask(s.mesh_dims, m)) {
      if (!(a == b)) return fail(step_error::changes_outside);
    } else if (!detail::fits_kind(s, a, b)) {
      return fail(step_error::wrong_placements);
    }
  }

  const index_t n_ranks = s.from.mesh_size();
  const index_t n = group_size(mesh, s.mesh_dims);
  out.group_size = n;
  out.group_count = group_count(mesh, s.mesh_dims);
  // (push_back only: clang 14 cannot resize a vector of trivial types in a constant
  // expression.)
  const std::size_t nr = static_cast<std::size_t>(n_ranks);
  out.members.reserve(nr);
  for (index_t g = 0; g < out.group_count; ++g)
    for (index_t j = 0; j < n; ++j) out.members.push_back(group_member(mesh, s.mesh_dims, g, j));

  std::vector<local_box> A, B;
  A.reserve(nr);
  B.reserve(nr);
  out.ranks.reserve(nr);
  for (index_t r = 0; r < n_ranks; ++r) {
    const coord_vec c = unravel(mesh, r);
    A.push_back(box_at(s.from, global, c));
    B.push_back(box_at(s.to, global, c));
    out.ranks.push_back({disposition::fresh, B.back().shape, box_volume(B.back())});
  }
  // Two ops per rank at most, but for all_to_all's pieces (one per rank and group member
  // whose boxes meet: up to ranks x group size), which grow the vector as they come. Reserving
  // that bound asked 75 GB of a 16,384-rank all_gather whose ops are one per rank.
  out.ops.reserve(2 * nr);
  auto member = [&](index_t g, index_t j) {
    return out.members[static_cast<std::size_t>(g * n + j)];
  };

  for (index_t r = 0; r < n_ranks; ++r) {
    const local_box& a = A[static_cast<std::size_t>(r)];
    const local_box& b = B[static_cast<std::size_t>(r)];
    rank_plan& p = out.ranks[static_cast<std::size_t>(r)];
    const group_position gp = group_of(mesh, s.mesh_dims, r);
    const bool unchanged = same_box(a, b);

    switch (s.kind) {
      case step_kind::all_gather:
      case step_kind::all_to_all: break;  // below, source by source
      case step_kind::all_reduce: {
        // Every member gets the reduction of the whole (common) box.
        if (!unchanged) return fail(step_error::not_contained, r);
        if (n == 1 || p.elems == 0) {
          p.how = disposition::keep;
          break;
        }
        p.how = disposition::modify;
        if (gp.index == 0)
          out.ops.push_back({op_code::reduce_bcast, gp.group, r, whole_geom(p.elems)});
        break;
      }
      case step_kind::reduce_scatter: {
        // out_r = op over s in group(r) of in_s[box_B(r)]; box_A is the same for all s.
        if (!contains(a, b)) return fail(step_error::not_contained, r);
        if (p.elems == 0) break;  // fresh, empty
        if (n == 1 && unchanged) {
          p.how = disposition::keep;
          break;
        }
        out.ops.push_back({op_code::reduce, gp.group, r, make_geom(b, a, b)});
        break;
      }
      case step_kind::chunk: {
        // out_r = in_r[box_B(r)].
        if (!contains(a, b)) return fail(step_error::not_contained, r);
        if (unchanged) {
          p.how = disposition::keep;
        } else if (p.elems > 0) {
          p.how = disposition::modify;
          out.ops.push_back({op_code::move, r, r, make_geom(b, a, b)});
        }
        break;
      }
      case step_kind::partition: {
        // sum/product: the rank with G-coordinates 0 keeps in_r, the others hold the
        // identity; avg/max/min: out_r = in_r.
        if (!unchanged) return fail(step_error::not_contained, r);
        const bool to_identity =
            (s.op == reduce_op::sum || s.op == reduce_op::product) && gp.index != 0;
        if (to_identity && p.elems > 0) {
          p.how = disposition::modify;
          out.ops.push_back({op_code::fill, r, r, whole_geom(p.elems)});
        } else {
          p.how = disposition::keep;
        }
        break;
      }
      case step_kind::fill: {
        // out_r = identity over box_B(r); out_r[box_A(r)] = in_r (times n for avg).
        if (!contains(b, a)) return fail(step_error::not_contained, r);
        if (p.elems == 0) break;
        const bool avg = s.op == reduce_op::avg;
        if (unchanged) {
          if (avg && n > 1) {
            p.how = disposition::modify;
            out.ops.push_back({op_code::scale, r, r, whole_geom(p.elems)});
          } else {
            p.how = disposition::keep;
          }
          break;
        }
        out.ops.push_back({op_code::fill, r, r, whole_geom(p.elems)});
        if (box_volume(a) > 0)
          out.ops.push_back({avg ? op_code::scale : op_code::copy, r, r, make_geom(a, a, b)});
        break;
      }
    }
  }
  if (s.kind == step_kind::all_gather || s.kind == step_kind::all_to_all) {
    // out_r[box_B(r)] = union over s in group(r) of in_s[box_A(s) ∩ box_B(r)]. A rank whose
    // block does not change keeps its buffer (the pieces are disjoint: only its own meets
    // it); a rank whose new block equals its group's first member's copies that member's
    // result whole (all_gather to R); the others assemble the pieces, emitted source by
    // source so that the pieces read from one source can run as a bundle.
    std::vector<index_t> covered, assemble;
    covered.reserve(nr);
    assemble.reserve(nr);
    for (index_t r = 0; r < n_ranks; ++r) {
      const auto i = static_cast<std::size_t>(r);
      rank_plan& p = out.ranks[i];
      const index_t first = member(group_of(mesh, s.mesh_dims, r).group, 0);
      const bool keep = same_box(A[i], B[i]);
      const bool copy_first = !keep && r != first && p.elems > 0 &&
                              same_box(B[i], B[static_cast<std::size_t>(first)]);
      if (keep) p.how = disposition::keep;
      covered.push_back(0);
      assemble.push_back(!keep && !copy_first && p.elems > 0);
    }
    // The members that assemble, group by group: all of them in an all_to_all, only the first
    // in an all_gather to R, whose pieces are then one per member rather than one per pair.
    std::vector<index_t> assemblers;
    assemblers.reserve(static_cast<std::size_t>(n));
    for (index_t g = 0; g < out.group_count; ++g) {
      assemblers.clear();
      for (index_t i = 0; i < n; ++i)
        if (assemble[static_cast<std::size_t>(member(g, i))]) assemblers.push_back(member(g, i));
      for (index_t j = 0; j < n; ++j) {
        const index_t src = member(g, j);
        const local_box& as = A[static_cast<std::size_t>(src)];
        const std::size_t bundle_start = out.ops.size();
        for (const index_t r : assemblers) {
          const local_box piece = intersect(as, B[static_cast<std::size_t>(r)]);
          const index_t k = box_volume(piece);
          if (k == 0) continue;
          covered[static_cast<std::size_t>(r)] += k;
          out.ops.push_back(
              {op_code::copy, src, r, make_geom(piece, as, B[static_cast<std::size_t>(r)])});
        }
        // Mark the bundles of this source: maximal runs of same_rows ops.
        std::size_t h = bundle_start;
        while (h < out.ops.size()) {
          std::size_t e = h + 1;
          while (e < out.ops.size() && out.ops[h].geo.nd > 0 &&
                 same_rows(out.ops[h].geo, out.ops[e].geo))
            ++e;
          for (std::size_t q = h; q < e; ++q) {
            out.ops[q].bundle = static_cast<index_t>(e - h);
            out.ops[q].bundle_head = q == h;
          }
          h = e;
        }
      }
    }
    for (index_t r = 0; r < n_ranks; ++r)
      if (assemble[static_cast<std::size_t>(r)] &&
          covered[static_cast<std::size_t>(r)] != out.ranks[static_cast<std::size_t>(r)].elems)
        return fail(step_error::not_covered, r);
    for (index_t r = 0; r < n_ranks; ++r) {
      const auto i = static_cast<std::size_t>(r);
      const index_t first = member(group_of(mesh, s.mesh_dims, r).group, 0);
      if (out.ranks[i].how != disposition::keep && !assemble[i] && out.ranks[i].elems > 0)
        out.ops.push_back({op_code::replicate, first, r, whole_geom(out.ranks[i].elems)});
    }
  }
  return out;
}

// ---------------------------------------------------------------------------
// Whole plans
// ---------------------------------------------------------------------------

inline std::string mask_text(dim_mask mask) {
  std::string s = "{";
  for (int m = 0; m < max_mesh_dims; ++m)
    if (in_mask(mask, m)) s += (s.size() > 1 ? ", " : "") + std::to_string(m);
  return s + "}";
}

inline std::string step_text(const plan_step& s, int i) {
  return "step " + std::to_string(i) + " (" + step_kind_name(s.kind) + " over mesh dims " +
         mask_text(s.mesh_dims) + ")";
}

/// Build and check every step's schedule; throws std::invalid_argument naming the step.
inline std::vector<step_schedule> build_schedules(const plan& p, const shape_vec& global,
                                                  const char* who = "spmd::execute") {
  std::vector<step_schedule> out;
  out.reserve(static_cast<std::size_t>(p.steps.size()));
  for (int i = 0; i < p.steps.size(); ++i) {
    const plan_step& s = p.steps[i];
    if (i > 0 && !same_blocks(p.steps[i - 1].to, s.from))
      throw std::invalid_argument(std::string(who) + ": " + step_text(s, i) +
                                  " does not start where step " + std::to_string(i - 1) +
                                  " ends");
    out.push_back(build_schedule(s, global));
    const step_schedule& sc = out.back();
    if (sc.error != step_error::none)
      throw std::invalid_argument(
          std::string(who) + ": " + step_text(s, i) + " cannot run: " + describe(sc.error) +
          (sc.error_rank >= 0 ? " (mesh index " + std::to_string(sc.error_rank) + ")" : ""));
  }
  return out;
}

/// build() for the last global shape it was called with, kept per thread and per (Holder,
/// Build) instantiation: a compile-time plan's run-time data on dynamic extents, rebuilt
/// only when the shape changes. A build that throws leaves no value behind.
template <class Holder, class Build>
const auto& cached_per_shape(const shape_vec& global, Build&& build) {
  using V = std::remove_cvref_t<decltype(build())>;
  thread_local bool valid = false;
  thread_local shape_vec last{};
  thread_local V value{};
  if (!valid || !(last == global)) {
    valid = false;
    value = build();
    last = global;
    valid = true;
  }
  return value;
}

/// build() for the last (plan, global shape) that Key ran, kept per thread: a run-time plan's
/// data (a mesh with a dynamic size: plan/dynamic_plan.hpp, whose providers keep each plan
/// where they made it, so its address names it). A build that throws leaves no value behind.
template <class Key, class Build>
const auto& cached_per_plan(const plan& p, const shape_vec& global, Build&& build) {
  using V = std::remove_cvref_t<decltype(build())>;
  thread_local bool valid = false;
  thread_local const plan* last_plan = nullptr;
  thread_local shape_vec last{};
  thread_local V value{};
  if (!valid || last_plan != &p || !(last == global)) {
    valid = false;
    value = build();
    last_plan = &p;
    last = global;
    valid = true;
  }
  return value;
}

/// The schedules of the compile-time plan Holder::value for `global`, built once per
/// thread and global shape (the typed path with dynamic extents).
template <class Holder>
const std::vector<step_schedule>& cached_schedules(const shape_vec& global,
                                                   const char* who = "spmd::execute") {
  return cached_per_shape<Holder>(global, [&] { return build_schedules(Holder::value, global, who); });
}

}  // namespace spmd
