// spmd/host/distribute.hpp — from a global tensor to every rank's local, and back.
//
// Value-level (a layout_spec and a global shape), so the typed dtensor and the CLI share it.
//
//   distribute(global, spec, shape)   every rank's local; Partial placements get values that
//                                     differ from the global one and reduce to it exactly
//   generate(spec, shape, f)          every rank's local of f(global row-major index), with
//                                     what a Replicate -> Partial partition leaves on Partial
//                                     placements (the factories' rule)
//   full_tensor(locals, spec, shape)  the global tensor, reducing Partial placements in
//                                     group order (members row-major over the partial dims)
//
// ## How distribute splits a value x over the n ranks of a Partial group
// j is the rank's position in its group over the partial mesh dims (row-major over them, the
// order full_tensor and a merged all_reduce reduce in); i is the element's local linear index.
//
// | op      | rank j holds                                                       |
// |---------|--------------------------------------------------------------------|
// | sum     | x * c_j with c = (2, -1, -2, 2, -2, 2, ...) for even n,            |
// |         | (4, -2, -1, -2, 2, -2, 2, ...) for odd n: every partial sum in      |
// |         | group order is x times 4, 2, 1 or -1, so floats sum exactly. x = 0: |
// |         | (1, -1, 1, -1, ...) or (1, 1, -2, 1, -1, ...).                      |
// | avg     | the sum split of n * x (avg = sum / n): exact for integers, and for |
// |         | floats whenever n * x is exact (n a power of two, small integers).  |
// | max     | rank i mod n holds x; the others hold x - (|x| + 1) k < x, k their  |
// |         | distance from it (integers: x - k, clamped at lowest)              |
// | min     | the same upwards: x + (|x| + 1) k > x                              |
// | product | floats: (2x, 0.5, 1, 1, ...); integers: (-x, -1, 1, 1, ...);         |
// |         | x = 0: (2, 0, 1, ...).                                              |
//
// So no single rank holds the global value (sum, avg: none does; max, min: which one does
// changes from element to element), and a backend that skips or reorders the reduction is
// caught. Where the scaled values would overflow (|x| > max / 4 for sum, non-finite x), rank
// 0 holds x and the others the identity. Integer sums wrap (combine uses unsigned
// arithmetic), so they are exact in any order; float sums are exact in group order, and in
// any order when the multiples of x are exact (integer-valued data).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/first_equal.hpp"
#include "spmd/core/layout_spec.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/partial_split.hpp"
#include "spmd/host/text_out.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::host {

namespace detail {

/// Mesh dims with a Partial placement, and their op.
struct partial_info {
  dim_mask mask = 0;
  reduce_op op = reduce_op::sum;
};
constexpr partial_info partial_of(const layout_spec& spec) {
  partial_info p{};
  for (int m = 0; m < spec.placements.size(); ++m)
    if (spec.placements[m].is_partial()) {
      p.mask |= 1u << m;
      p.op = spec.placements[m].op;
    }
  return p;
}
constexpr dim_mask replicate_mask(const layout_spec& spec) {
  dim_mask r = 0;
  for (int m = 0; m < spec.placements.size(); ++m)
    if (spec.placements[m].is_replicate()) r |= 1u << m;
  return r;
}

template <class T>
SPMD_SIM_NOINLINE void split_partial(T* p, index_t size, reduce_op op, index_t j, index_t n) {
  for (index_t i = 0; i < size; ++i) p[i] = partial_part(op, p[i], j, n, i);
}

using host::shape_text;

/// What distribute does for each rank, independent of the element type.
struct rank_slice {
  shape_vec shape{};
  run_geom geo{};     // from the global tensor to the local
  index_t part = 0;   // position in the partial group
};

SPMD_SIM_NOINLINE inline std::vector<rank_slice> slices(const layout_spec& spec,
                                                         const shape_vec& global) {
  const local_box whole{global, shape_vec{{}, global.size()}};
  const partial_info part = partial_of(spec);
  std::vector<rank_slice> out;
  out.reserve(static_cast<std::size_t>(spec.mesh_size()));
  for (index_t r = 0; r < spec.mesh_size(); ++r) {
    const local_box b = box_at(spec, global, unravel(spec.mesh, r));
    out.push_back({b.shape, make_geom(b, whole, b), group_of(spec.mesh, part.mask, r).index});
  }
  return out;
}

/// first_equal over the held slices: the same block (geometry from the global tensor) of
/// the same Partial split.
SPMD_SIM_NOINLINE inline std::vector<index_t> slice_twins(const std::vector<rank_slice>& plan, index_t n_ranks,
                                                          held_range held) {
  return first_equal(
      n_ranks, [&](index_t r) { return held.contains(r); },
      [&](index_t r) {
        const rank_slice& s = plan[static_cast<std::size_t>(r)];
        std::uint64_t h = hash_mix(hash_mix(0, s.part), s.geo.soff);
        for (const index_t e : s.shape) h = hash_mix(h, e);
        return h;
      },
      [&](index_t q, index_t r) {
        const rank_slice& a = plan[static_cast<std::size_t>(q)];
        const rank_slice& b = plan[static_cast<std::size_t>(r)];
        return a.part == b.part && a.shape == b.shape && a.geo == b.geo;
      });
}

}  // namespace detail

/// The reductions distribute and full_tensor run on a spec: its Partial op, or none.
constexpr reduce_set partial_reduces(const layout_spec& spec) {
  const detail::partial_info p = detail::partial_of(spec);
  return p.mask != 0 ? reduce_bit(p.op) : 0;
}

/// Every rank's local of a global row-major tensor under `spec` (see the table at the top
/// for Partial placements). @pre spec came from make_spec; global.size() == tensor rank.
/// Ops: partial_reduces(spec) where the spec is known at compile time (no Partial: the
/// split is not compiled), else every_reduce_op.
template <element T, reduce_set Ops = every_reduce_op>
local_set<T> distribute(std::span<const T> data, const layout_spec& spec,
                        const shape_vec& global, held_range held) {
  const index_t total = shape_elems(global);
  if (static_cast<index_t>(data.size()) != total)
    throw std::invalid_argument((text_out() << "spmd::sim::distribute_tensor: the global data has " << data.size()
                                             << " elements, the shape " << shape_text(global) << " needs " << total)
                                    .str());
  const detail::partial_info part = detail::partial_of(spec);
  if (part.mask != 0) check_reduce_op<T>(part.op, "spmd::sim::distribute_tensor");
  const index_t n = group_size(spec.mesh, part.mask);
  const std::vector<detail::rank_slice> plan = detail::slices(spec, global);
  const std::vector<index_t> twins = detail::slice_twins(plan, spec.mesh_size(), held);
  local_set<T> out(spec.mesh_size(), held);
  for (const index_t r : held.indices()) {
    const detail::rank_slice& s = plan[static_cast<std::size_t>(r)];
    if (const index_t twin = twins[static_cast<std::size_t>(r)]; twin >= 0) {
      out.share(r, twin);  // the same block of the same split: a replica
      continue;
    }
    out.assign(r, s.shape);
    detail::copy_region(out.data(r), data.data(), s.geo);
    if (part.mask != 0 && n > 1) {
      if constexpr (Ops == 0) detail::reduce_op_not_compiled(part.op);
      else detail::split_partial(out.data(r), out.size(r), part.op, s.part, n);
    }
  }
  return out;
}
/// Every rank's local (the simulation).
template <element T>
local_set<T> distribute(std::span<const T> data, const layout_spec& spec,
                        const shape_vec& global) {
  return distribute<T>(data, spec, global, held_range{0, spec.mesh_size()});
}

/// True when the rank at mesh index r holds the identity, not the value, of a generated
/// tensor (the factories' rule on Partial placements: for sum and product, every member of
/// a partial group but the first). Factories, random draws and checkpoint loads follow it.
inline bool holds_identity(const layout_spec& spec, index_t r) {
  const detail::partial_info part = detail::partial_of(spec);
  return part.mask != 0 && (part.op == reduce_op::sum || part.op == reduce_op::product) &&
         group_of(spec.mesh, part.mask, r).index != 0;
}

/// Fill every rank's local with f(global row-major index) over its box; then apply the
/// partition rule for Partial placements (sum, product: ranks off the group's first member
/// hold the identity; avg, max, min: every rank holds the value). The factories' rule.
/// For each mesh index, the first held one whose generated local is the same by
/// construction (the same block of the global tensor, or the identity of a Partial layout
/// in a block of the same shape), or -1: that rank's local is a replica (local_set::share).
inline std::vector<index_t> generated_twins(const layout_spec& spec, const shape_vec& global,
                                            held_range held) {
  std::vector<local_box> boxes;
  std::vector<char> id;  // not vector<bool>: its bit iterators are a class of their own to compile
  boxes.reserve(static_cast<std::size_t>(spec.mesh_size()));
  id.reserve(static_cast<std::size_t>(spec.mesh_size()));
  for (index_t r = 0; r < spec.mesh_size(); ++r) {
    boxes.push_back(box_at(spec, global, unravel(spec.mesh, r)));
    id.push_back(holds_identity(spec, r));
  }
  return first_equal(
      spec.mesh_size(), [&](index_t r) { return held.contains(r); },
      [&](index_t r) {
        const auto i = static_cast<std::size_t>(r);
        std::uint64_t h = hash_mix(0, id[i]);
        for (const index_t e : boxes[i].shape) h = hash_mix(h, e);
        if (!id[i])
          for (const index_t o : boxes[i].offset) h = hash_mix(h, o);
        return h;
      },
      [&](index_t q, index_t r) {
        const auto i = static_cast<std::size_t>(r), j = static_cast<std::size_t>(q);
        return id[j] == id[i] && boxes[j].shape == boxes[i].shape &&
               (id[i] || boxes[j].offset == boxes[i].offset);
      });
}

template <element T, class F>
local_set<T> generate(const layout_spec& spec, const shape_vec& global, F&& f,
                      held_range held) {
  const index_t n_ranks = spec.mesh_size();
  const detail::partial_info part = detail::partial_of(spec);
  if (part.mask != 0) check_reduce_op<T>(part.op, "spmd::sim::generate");
  local_set<T> out(n_ranks, held);
  if (held.count() > 0 && detail::replicate_mask(spec) == (dim_mask{1} << spec.placements.size()) - 1) {
    // Replicated everywhere (a loss's seed gradient, a bias): one block, every rank's.
    out.assign(held.lo, global);
    T* p = out.data(held.lo);
    for (index_t i = 0; i < out.size(held.lo); ++i) p[i] = f(i);
    for (const index_t r : held.indices()) out.share(r, held.lo);
    return out;
  }
  const std::vector<index_t> twins = generated_twins(spec, global, held);
  for (const index_t r : held.indices()) {
    const local_box b = box_at(spec, global, unravel(spec.mesh, r));
    if (const index_t twin = twins[static_cast<std::size_t>(r)]; twin >= 0) {
      out.share(r, twin);  // the same block (or the identity of the same shape): a replica
      continue;
    }
    out.assign(r, b.shape);
    const index_t size = out.size(r);
    T* p = out.data(r);
    if (holds_identity(spec, r)) {
      std::fill_n(p, size, identity<T>(part.op));
      continue;
    }
    if constexpr (requires { std::remove_cvref_t<F>::constant; }) {  // one value: a fill
      std::fill_n(p, size, f(index_t{0}));
      continue;
    }
    // Walk the box row-major, tracking the global linear index.
    const int rank = global.size();
    index_t idx[max_tensor_dims]{}, gstride[max_tensor_dims]{};
    index_t s = 1, g = 0;
    for (int d = rank - 1; d >= 0; --d) {
      gstride[d] = s;
      g += b.offset[d] * s;
      s *= global[d];
    }
    for (index_t i = 0; i < size; ++i) {
      p[i] = f(g);
      for (int d = rank - 1; d >= 0; --d) {
        g += gstride[d];
        if (++idx[d] < b.shape[d]) break;
        g -= gstride[d] * b.shape[d];
        idx[d] = 0;
      }
    }
  }
  return out;
}
template <element T, class F>
local_set<T> generate(const layout_spec& spec, const shape_vec& global, F&& f) {
  return generate<T>(spec, global, std::forward<F>(f), held_range{0, spec.mesh_size()});
}

namespace detail {

/// One block of the global tensor: the ranks it is reduced from (one, when nothing is
/// partial) and where it goes.
struct gather_block {
  run_geom geo{};                 // from the locals (all the same shape) to the global
  std::vector<index_t> members;   // mesh indices, group order
};

SPMD_SIM_NOINLINE inline std::vector<gather_block> gather_blocks(const layout_spec& spec,
                                                                 const shape_vec& global) {
  const local_box whole{global, shape_vec{{}, global.size()}};
  const partial_info part = partial_of(spec);
  const dim_mask rep = replicate_mask(spec);
  const index_t n = group_size(spec.mesh, part.mask);
  std::vector<gather_block> out;
  for (index_t r = 0; r < spec.mesh_size(); ++r) {
    const coord_vec c = unravel(spec.mesh, r);
    bool first = true;
    for (int m = 0; m < c.size(); ++m)
      if (in_mask(rep | part.mask, m) && c[m] != 0) first = false;
    if (!first) continue;
    const local_box b = box_at(spec, global, c);
    gather_block g{make_geom(b, b, whole), {}};
    const index_t grp = group_of(spec.mesh, part.mask, r).group;
    for (index_t j = 0; j < n; ++j) g.members.push_back(group_member(spec.mesh, part.mask, grp, j));
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace detail

/// The global tensor: each block from the ranks at coordinate 0 along Replicate dims,
/// Partial dims reduced over their group in group order. Ops: the reductions compiled
/// (partial_reduces of a spec known at compile time; kernels.hpp's reduce_set).
template <element T, reduce_set Ops = every_reduce_op>
std::vector<T> full_tensor(const local_set<T>& locals, const layout_spec& spec,
                           const shape_vec& global) {
  std::vector<T> out(static_cast<std::size_t>(shape_elems(global)));
  const reduce_op op = detail::partial_of(spec).op;
  std::vector<const T*> srcs;
  for (const detail::gather_block& b : detail::gather_blocks(spec, global)) {
    if (b.members.size() == 1) {
      detail::copy_region(out.data(), locals.data(b.members[0]), b.geo);
    } else {
      srcs.clear();
      for (index_t m : b.members) srcs.push_back(locals.data(m));
      if constexpr (Ops == 0) detail::reduce_op_not_compiled(op);
      else detail::reduce_region<T, Ops>(op, out.data(), srcs.data(), static_cast<index_t>(srcs.size()), b.geo);
    }
  }
  return out;
}

}  // namespace spmd::host
