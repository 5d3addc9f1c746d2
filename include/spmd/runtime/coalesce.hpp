// spmd/runtime/coalesce.hpp — many tensors' redistributes in one collective (torch's
// coalescing manager; what DDP's buckets and FSDP's per-module all-gather and reduce-scatter
// are made of), on every backend.
//
//   using Gathered = spmd::placements<spmd::replicate, spmd::shard<1>>;
//   auto [w, b] = spmd::runtime::redistribute_coalesced<spmd::runtime::to<Gathered, RB>>(ws, bs);
//   static_assert(spmd::runtime::coalesced_plan<to<Gathered, RB>, LW, LB>::collectives() == 1);
//
// Every tensor's change must be the same one collective over the same mesh dims G:
//   all_gather       S(0) -> R on G     (FSDP's unshard)
//   reduce_scatter   P(op) -> S(0) on G (FSDP's gradient reduction)
//   all_reduce       P(op) -> R on G    (DDP's bucket)
// or nothing (a tensor already in its target comes back as it is). The pieces are packed,
// rank by rank, into one flat "bucket" tensor: its dims are the mesh's dims (each sharded by
// its own mesh dim) and a last dim, the segment, that holds every tensor's piece at a fixed
// offset, padded to the largest piece any rank has (uneven and empty shards are no special
// case: torch.chunk's pieces, padded with zeros that no rank reads back). The bucket is
// redistributed by the compiler's plan — one collective, checked at compile time — and
// unpacked into each tensor's target locals. A piece must be one contiguous run of the
// larger local: the split is on tensor dim 0, and G's mesh dims split it last (FSDP × TP on a
// column-parallel weight: shard<0, 1> on dp beside shard<0, 0> on tp, DTensor's
// _StridedShard). Anything else fails to compile with a sentence.
//
// The packing costs one copy in and one out per tensor, the price torch pays too
// (FSDP2's all-gather input and copy-out); the bits are those of the per-tensor redistributes,
// since every element is reduced over the same ranks in the same group order.
#pragma once

#include <algorithm>
#include <array>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/extents.hpp"
#include "spmd/core/layout.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/host/thread_pool.hpp"
#include "spmd/plan/dynamic_plan.hpp"
#include "spmd/plan/step.hpp"
#include "spmd/runtime/dtensor.hpp"

namespace spmd::runtime {

/// The target placements of redistribute_coalesced, one per tensor.
template <class... P>
struct to {};

namespace coalesce_detail {

/// Why tensors cannot share one collective.
enum class refusal : unsigned char {
  none,
  not_one_collective,  // a change is not S(0) -> R, P -> R or P -> S(0) on each dim it changes
  mixed_dims,          // one tensor changes two mesh dims in different ways
  dim0_not_last,       // the coalesced dims do not split tensor dim 0 last: pieces not contiguous
  tensors_differ,      // the tensors' collectives differ (kind, mesh dims or reduction)
};

/// The sentence for a refusal.
constexpr const char* refusal_text(refusal r) {
  switch (r) {
    case refusal::none: return "";
    case refusal::not_one_collective:
      return "a tensor's change is not S(0) -> R (all_gather), P -> R (all_reduce) or P -> S(0) "
             "(reduce_scatter) on every mesh dim it changes";
    case refusal::mixed_dims: return "a tensor changes two mesh dims in different ways";
    case refusal::dim0_not_last:
      return "the coalesced mesh dims must split tensor dim 0 last (a piece must be contiguous): "
             "give them the last positions in dim 0's shard order, e.g. shard<0, 1> on dp beside "
             "shard<0, 0> on tp";
    case refusal::tensors_differ:
      return "the tensors' changes differ (every tensor must make the same collective over the "
             "same mesh dims, with the same reduction)";
  }
  return "";
}

/// What one tensor's change is (a structural type: it is a template argument).
struct change {
  bool none = true;  // already in the target
  bool ok = true;
  refusal why = refusal::none;
  step_kind kind = step_kind::all_gather;
  dim_mask mesh_dims = 0;
  reduce_op op = reduce_op::sum;
};

/// True when the mesh dims of `g` split tensor dim 0 last in spec s (so a piece is contiguous).
constexpr bool splits_dim0_last(const layout_spec& s, dim_mask g) {
  const auto order = s.shard_order(0);
  bool seen_g = false;
  for (int k = 0; k < order.size(); ++k) {
    if (in_mask(g, order[k])) seen_g = true;
    else if (seen_g) return false;
  }
  return true;
}

constexpr change classify(const layout_spec& a, const layout_spec& b) {
  change c;
  for (int m = 0; m < a.placements.size(); ++m) {
    const placement& pa = a.placements[m];
    const placement& pb = b.placements[m];
    if (a.mesh[m] == 1) continue;  // a dim of one rank: nothing moves
    // The same shard in another position of its dim's order (the gathered dims gone) is
    // no change of this mesh dim; contiguity is checked below.
    if (pa == pb || (pa.is_shard() && pb.is_shard(pa.dim))) continue;
    step_kind k{};
    reduce_op op = reduce_op::sum;
    if (pa.is_shard(0) && pb.is_replicate()) {
      k = step_kind::all_gather;
    } else if (pa.is_partial() && pb.is_replicate()) {
      k = step_kind::all_reduce;
      op = pa.op;
    } else if (pa.is_partial() && pb.is_shard(0)) {
      k = step_kind::reduce_scatter;
      op = pa.op;
    } else {
      return {false, false, refusal::not_one_collective};
    }
    if (!c.none && (k != c.kind || op != c.op))
      return {false, false, refusal::mixed_dims};
    c.none = false;
    c.kind = k;
    c.op = op;
    c.mesh_dims |= dim_mask{1} << m;
  }
  if (c.none) return c;
  const layout_spec& sharded = c.kind == step_kind::all_gather ? a : b;
  if (c.kind != step_kind::all_reduce && !splits_dim0_last(sharded, c.mesh_dims))
    return {false, false, refusal::dim0_not_last};
  return c;
}

/// The common change of a list of tensors (the first that is not `none`); `ok` false with the
/// reason when two differ.
template <std::size_t N>
constexpr change common(const std::array<change, N>& cs) {
  change out;
  for (const change& c : cs) {
    if (!c.ok) return c;
    if (c.none) continue;
    if (out.none) {
      out = c;
    } else if (c.kind != out.kind || c.mesh_dims != out.mesh_dims || c.op != out.op) {
      return {false, false, refusal::tensors_differ};
    }
  }
  return out;
}

/// The bucket's placements on mesh dim m: before (Src) and after (Dst) the collective.
template <class Mesh, int M, change C, bool Src>
struct bucket_placement {
  static constexpr bool in_g = in_mask(C.mesh_dims, M);
  using partial_t = partial<C.op>;
  using type = std::conditional_t<
      !in_g, shard<M>,
      std::conditional_t<C.kind == step_kind::all_gather, std::conditional_t<Src, shard<M>, replicate>,
                         std::conditional_t<Src, partial_t,
                                            std::conditional_t<C.kind == step_kind::reduce_scatter,
                                                               shard<M>, replicate>>>>;
};

/// The bucket: one dim per mesh dim (an all_reduce's dims of extent 1), then the segment.
/// Over a dynamic mesh size the bucket's dim is dynamic too (make() gives the bound size).
template <class Mesh, change C, class = std::make_index_sequence<Mesh::ndim>>
struct bucket;
template <class Mesh, change C, std::size_t... M>
struct bucket<Mesh, C, std::index_sequence<M...>> {
  static constexpr bool reduced(int m) { return in_mask(C.mesh_dims, m) && C.kind == step_kind::all_reduce; }
  static constexpr index_t static_extent(int m) { return reduced(m) ? 1 : Mesh::static_shape()[m]; }
  static index_t extent(int m) { return reduced(m) ? 1 : Mesh::shape_vec()[m]; }
  using extents_type = extents<static_extent(static_cast<int>(M))..., dyn>;
  using src = layout<Mesh, placements<typename bucket_placement<Mesh, static_cast<int>(M), C, true>::type...>,
                     extents_type>;
  using dst = layout<Mesh, placements<typename bucket_placement<Mesh, static_cast<int>(M), C, false>::type...>,
                     extents_type>;
  static extents_type make(index_t segment) {
    dims<Mesh::ndim + 1> all{};
    for (int m = 0; m < Mesh::ndim; ++m) all[static_cast<std::size_t>(m)] = extent(m);
    all[Mesh::ndim] = segment;
    return extents_type::from_values(all);
  }
};

/// Elements of a box.
inline index_t elems(const local_box& b) { return shape_elems(b.shape); }

/// Element offset of box `part` inside box `whole` (part is a run of whole's dim-0 rows).
inline index_t row_offset(const local_box& whole, const local_box& part) {
  if (elems(part) == 0) return 0;
  index_t row = 1;
  for (int d = 1; d < whole.shape.size(); ++d) row *= whole.shape[d];
  return (part.offset[0] - whole.offset[0]) * row;
}

}  // namespace coalesce_detail

/// Copies n elements from src's local i (from element `src_at`) into dst's local j (at
/// `dst_at`): memcpy for host locals, the backend's device copy (B::copy_elements) otherwise.
template <class B, class T>
void copy_elements(storage_t<B, T>& dst, index_t j, index_t dst_at, const storage_t<B, T>& src, index_t i,
                   index_t src_at, index_t n) {
  if (n <= 0) return;
  if constexpr (host_memory<B>)
    std::memcpy(dst.data(j) + dst_at, src.cdata(i) + src_at, static_cast<std::size_t>(n) * sizeof(T));
  else
    B::copy_elements(dst, j, dst_at, src, i, src_at, n);
}

/// The plan of the one collective that redistribute_coalesced<To> runs on tensors of layouts
/// L...: its `change()` (kind, mesh dims, op; `none` when nothing moves) and the bucket's
/// plan (collectives(), trace(), ...).
template <class To, class... L>
struct coalesced_plan;
template <class... P, class... L>
struct coalesced_plan<to<P...>, L...> {
  static_assert(sizeof...(P) == sizeof...(L),
                "spmd::redistribute_coalesced: give one target placement list per tensor.");
  static_assert(sizeof...(L) >= 1, "spmd::redistribute_coalesced: give at least one tensor.");
  using mesh_type = typename std::tuple_element_t<0, std::tuple<L...>>::mesh_type;
  static_assert((std::is_same_v<typename L::mesh_type, mesh_type> && ...),
                "spmd::redistribute_coalesced: every tensor must be on the same mesh.");
  static_assert(((P::size == mesh_type::ndim) && ...),
                "spmd::redistribute_coalesced: give one placement per mesh dim in every target.");
  // Decided over the nominal sizes (a dynamic size as larger than 1): the same change for
  // every size a dynamic dim is bound to; a dim bound to 1 then moves nothing (run() below).
  static constexpr coalesce_detail::change value = coalesce_detail::common(std::array<coalesce_detail::change, sizeof...(L)>{
      coalesce_detail::classify(L::nominal_spec(), layout<mesh_type, P, typename L::extents_type>::nominal_spec())...});
  static constexpr coalesce_detail::change change() { return value; }
  /// The collectives redistribute_coalesced runs: 1, or 0 when no tensor moves (over a
  /// dynamic mesh: on its bound sizes, read at run time, and 0 when the group has one rank).
  static constexpr int collectives() {
    if constexpr (!value.ok || value.none) {
      return 0;
    } else {
      using Bucket = coalesce_detail::bucket<mesh_type, value>;
      if constexpr (mesh_type::is_static) return plan_of<typename Bucket::src, typename Bucket::dst, float>::collectives();
      else return dynamic_plan_of<typename Bucket::src, typename Bucket::dst, float>::collectives();
    }
  }
};

namespace coalesce_detail {

/// Where each tensor's piece sits in the segment, and the segment's length.
struct segment_map {
  std::vector<index_t> offset, cap;  // each tensor's piece: where, and its room (the largest piece)
  index_t length = 0;
};

template <change C, class Mesh, class... L, class... D>
segment_map make_segments(const std::tuple<const L&...>& from, const std::tuple<const D&...>& target) {
  segment_map s;
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (
        [&] {
          const auto& a = std::get<I>(from);
          const auto& b = std::get<I>(target);
          index_t cap = 0;
          using LA = std::remove_cvref_t<decltype(a)>;
          using LB = std::remove_cvref_t<decltype(b)>;
          constexpr bool moves = !classify(LA::nominal_spec(), LB::nominal_spec()).none;
          for (index_t r = 0; moves && r < Mesh::size; ++r) {
            const coord_vec c = unravel(Mesh::shape_vec(), r);
            const local_box box = C.kind == step_kind::reduce_scatter ? box_at(LB::spec(), b.extents().to_vec(), c)
                                                                      : box_at(LA::spec(), a.extents().to_vec(), c);
            cap = std::max(cap, elems(box));
          }
          s.offset.push_back(s.length);
          s.cap.push_back(cap);
          s.length += cap;
        }(),
        ...);
  }(std::index_sequence_for<L...>{});
  return s;
}

/// For an all_gather of x (layout LA to LB over the group dims g, n members), held ranks in
/// order: the earlier held rank whose gathered tensor equals this rank's, or the rank itself.
/// Equal: the same target box, built from the same members' boxes holding the same values
/// (the same buffers, or equal bits: tensor-parallel ranks each hold a replicated parameter's
/// shard). Ranks that share it then compute once what depends only on it (ops/apply.hpp's
/// twins): a replicated activation of a 2x4 FSDP x TP step is computed once per dp rank, not
/// once per rank (bench/RESULTS.md, issue 54). Empty when this backend holds one rank.
template <class T, class LA, class LB, class X>
std::vector<index_t> gathered_twins(const X& x, const mesh_shape_vec& mesh, dim_mask g, index_t n) {
  const auto& src = x.locals();
  const auto h = src.held();
  std::vector<index_t> rep;
  if (h.hi - h.lo < 2) return rep;
  const shape_vec global = x.layout().extents().to_vec();
  const auto same_piece = [&](index_t a, index_t b) {  // members a and b hold equal pieces
    if (a == b) return true;
    const local_box pa = box_at(LA::spec(), global, unravel(mesh, a));
    if (!(pa == box_at(LA::spec(), global, unravel(mesh, b)))) return false;
    if (a < h.lo || a >= h.hi || b < h.lo || b >= h.hi) return false;
    const T *da = src.cdata(a), *db = src.cdata(b);
    const std::size_t len = static_cast<std::size_t>(elems(pa)) * sizeof(T);
    return da == db || len == 0 || std::memcmp(da, db, len) == 0;
  };
  for (index_t i = h.lo; i < h.hi; ++i) {
    index_t f = i;
    const index_t gi = group_of(mesh, g, i).group;
    const local_box bi = box_at(LB::spec(), global, unravel(mesh, i));
    for (index_t j = h.lo; j < i && f == i; ++j) {
      if (rep[static_cast<std::size_t>(j - h.lo)] != j || !(box_at(LB::spec(), global, unravel(mesh, j)) == bi))
        continue;
      const index_t gj = group_of(mesh, g, j).group;
      bool same = true;
      for (index_t k = 0; k < n && same; ++k) same = same_piece(group_member(mesh, g, gi, k), group_member(mesh, g, gj, k));
      if (same) f = j;
    }
    rep.push_back(f);
  }
  return rep;
}

/// The bucket's round trip: pack every tensor's pieces, one redistribute, unpack.
template <change C, class Mesh, class B, class T, std::size_t... I, class Xs, class Targets>
auto run(std::index_sequence<I...>, const Xs& xs, const Targets& targets) {
  using Bucket = bucket<Mesh, C>;
  static_assert(plan_of<typename Bucket::src, typename Bucket::dst, T>::collectives() == 1,
                "spmd::redistribute_coalesced: the bucket's plan is not one collective (a change "
                "over several mesh dims that the planner splits); coalesce one mesh dim at a time.");
  if constexpr (!Mesh::is_static)
    if (dynamic_plan_of<typename Bucket::src, typename Bucket::dst, T>::collectives() != 1)
      throw std::logic_error("spmd::redistribute_coalesced: over mesh<" + Mesh::text() +
                             ">'s bound sizes the bucket's plan is not one collective; coalesce one mesh dim at a time.");
  using F = factories<B>;
  const mesh_shape_vec mesh = Mesh::shape_vec();
  const dim_mask g = C.mesh_dims;
  const index_t n = group_size(mesh, g);
  const segment_map seg = make_segments<C, Mesh>(
      std::tuple<decltype(std::get<I>(xs).layout())...>(std::get<I>(xs).layout()...),
      std::tuple<const std::tuple_element_t<I, Targets>&...>(std::get<I>(targets)...));
  // The padding is reduced (reduce_scatter, all_reduce) but never read back: zeros. In host
  // memory the bucket starts uninitialised and each rank zeroes its own padding as it packs
  // (a bucket of zeros would be one buffer shared by every rank, copied by each on its first
  // write: bench/RESULTS.md, issue 54); a device backend fills it first.
  constexpr bool host = host_memory<B>;
  auto bucket = [&] {
    if constexpr (host)
      return F::template empty<T>(typename Bucket::src{Bucket::make(seg.length)});
    else
      return F::template full<T>(T(0), typename Bucket::src{Bucket::make(seg.length)});
  }();
  // (the pieces' runs, copied in and out by each rank's own thread where the simulation
  // holds many and they are worth it: every run lands in a local of its own)
  const auto each_rank = [&](const auto& held, index_t elems_per_rank, auto&& f) {
    if constexpr (host) {
      const index_t count = held.hi - held.lo;
      if (count > 1 && elems_per_rank * count >= (index_t{1} << 16) && host::threads_free()) {
        host::parallel_for(count, [&](index_t r) { f(held.lo + r); });
        return;
      }
    }
    for (const index_t i : held) f(i);
  };
  const index_t rows = C.kind == step_kind::reduce_scatter ? n : 1;  // the bucket's rows per rank
  const auto zero_rest = [&](auto& locals, index_t i, index_t at, index_t used, index_t cap) {
    if constexpr (host)
      if (cap > used) std::memset(locals.data(i) + at + used, 0, static_cast<std::size_t>(cap - used) * sizeof(T));
  };
  {
    auto& packed = bucket.locals(detail::internal_t{});
    each_rank(packed.held(), rows * seg.length, [&](index_t i) {
      const coord_vec ci = unravel(mesh, i);
      const group_position gp = group_of(mesh, g, i);
      (
          [&] {
            const auto& x = std::get<I>(xs);
            using LA = typename std::remove_cvref_t<decltype(x)>::layout_type;
            using LB = std::tuple_element_t<I, Targets>;
            const shape_vec global = x.layout().extents().to_vec();
            if constexpr (classify(LA::nominal_spec(), LB::nominal_spec()).none) {
              // Already in its target: not in the bucket.
            } else if constexpr (C.kind == step_kind::reduce_scatter) {
              // Row k of the group's dims: the piece member k keeps.
              const local_box a = box_at(LA::spec(), global, ci);
              for (index_t k = 0; k < n; ++k) {
                const index_t s = group_member(mesh, g, gp.group, k);
                const local_box piece = box_at(LB::spec(), global, unravel(mesh, s));
                const index_t at = k * seg.length + seg.offset[I];
                copy_elements<B, T>(packed, i, at, x.locals(), i, row_offset(a, piece), elems(piece));
                zero_rest(packed, i, at, elems(piece), seg.cap[I]);
              }
            } else {
              const index_t len = elems(box_at(LA::spec(), global, ci));
              copy_elements<B, T>(packed, i, seg.offset[I], x.locals(), i, 0, len);
              zero_rest(packed, i, seg.offset[I], len, seg.cap[I]);
            }
          }(),
          ...);
    });
  }
  const auto moved = runtime::redistribute<typename Bucket::dst::placements_type>(std::move(bucket));
  // A tensor already in its target is itself (shared where the backend shares); the others
  // get fresh locals that the unpacking fills.
  const auto output = [&]<std::size_t J>(std::integral_constant<std::size_t, J>) {
    using LA = typename std::remove_cvref_t<decltype(std::get<J>(xs))>::layout_type;
    using LB = std::tuple_element_t<J, Targets>;
    if constexpr (classify(LA::nominal_spec(), LB::nominal_spec()).none)
      return runtime::redistribute<typename LB::placements_type>(std::get<J>(xs));
    else
      return F::template empty<T>(std::get<J>(targets));
  };
  std::tuple<dtensor<T, std::tuple_element_t<I, Targets>, B>...> out{
      output(std::integral_constant<std::size_t, I>{})...};
  const auto& got = moved.locals();
  // Which rank's tensor each rank's equals (all_gather in host memory; empty: every rank
  // unpacks its own): those ranks share that block rather than unpack a copy of it.
  std::array<std::vector<index_t>, sizeof...(I)> same_as;
  if constexpr (host && C.kind == step_kind::all_gather)
    (
        [&] {
          using LA = typename std::remove_cvref_t<decltype(std::get<I>(xs))>::layout_type;
          using LB = std::tuple_element_t<I, Targets>;
          if constexpr (!classify(LA::nominal_spec(), LB::nominal_spec()).none)
            same_as[I] = gathered_twins<T, LA, LB>(std::get<I>(xs), mesh, g, n);
        }(),
        ...);
  const auto shares = [&](std::size_t t, index_t i) {
    return !same_as[t].empty() && same_as[t][static_cast<std::size_t>(i - got.held().lo)] != i;
  };
  each_rank(got.held(), seg.length, [&](index_t i) {
    const coord_vec ci = unravel(mesh, i);
    const group_position gp = group_of(mesh, g, i);
    (
        [&] {
          const auto& x = std::get<I>(xs);
          using LA = typename std::remove_cvref_t<decltype(x)>::layout_type;
          using LB = std::tuple_element_t<I, Targets>;
          const shape_vec global = x.layout().extents().to_vec();
          auto& dst = std::get<I>(out).locals(detail::internal_t{});
          const local_box b = box_at(LB::spec(), global, ci);
          if constexpr (classify(LA::nominal_spec(), LB::nominal_spec()).none) {
            (void)dst;
          } else if (shares(I, i)) {
            // another rank's block, shared below
          } else if constexpr (C.kind == step_kind::all_gather) {
            // Member k's piece, from row k, to its rows of the gathered local.
            for (index_t k = 0; k < n; ++k) {
              const index_t s = group_member(mesh, g, gp.group, k);
              const local_box piece = box_at(LA::spec(), global, unravel(mesh, s));
              copy_elements<B, T>(dst, i, row_offset(b, piece), got, i, k * seg.length + seg.offset[I],
                                  elems(piece));
            }
          } else {
            copy_elements<B, T>(dst, i, 0, got, i, seg.offset[I], elems(b));
          }
        }(),
        ...);
  });
  if constexpr (host && C.kind == step_kind::all_gather)
    (
        [&] {
          if (same_as[I].empty()) return;
          auto& dst = std::get<I>(out).locals(detail::internal_t{});
          for (const index_t i : got.held())
            if (shares(I, i)) dst.share(i, same_as[I][static_cast<std::size_t>(i - got.held().lo)]);
        }(),
        ...);
  return out;
}

}  // namespace coalesce_detail

/// Every x_i redistributed to placements P_i (To = to<P...>) with one collective: see the
/// header comment. Returns a std::tuple of the dtensors.
template <class To, element T, class... L, class B>
auto redistribute_coalesced(const dtensor<T, L, B>&... x) {
  using Plan = coalesced_plan<To, L...>;
  using Mesh = typename Plan::mesh_type;
  constexpr coalesce_detail::change C = Plan::value;
  using coalesce_detail::refusal;
  static_assert(C.why != refusal::not_one_collective,
                "spmd::redistribute_coalesced: a tensor's change is not S(0) -> R (all_gather), "
                "P -> R (all_reduce) or P -> S(0) (reduce_scatter) on every mesh dim it changes.");
  static_assert(C.why != refusal::mixed_dims,
                "spmd::redistribute_coalesced: a tensor changes two mesh dims in different ways.");
  static_assert(C.why != refusal::dim0_not_last,
                "spmd::redistribute_coalesced: the coalesced mesh dims must split tensor dim 0 last, "
                "so that a piece is contiguous: give them the last positions in dim 0's shard order "
                "(shard<0, 1> on dp beside shard<0, 0> on tp).");
  static_assert(C.why != refusal::tensors_differ,
                "spmd::redistribute_coalesced: the tensors' collectives differ; every tensor must make "
                "the same one (kind, mesh dims, reduction) or none.");
  if constexpr (!C.ok) {
    return std::tuple<>{};  // refused above
  } else {
    return [&]<class... P>(to<P...>) {
      using Out = std::tuple<dtensor<T, layout<Mesh, P, typename L::extents_type>, B>...>;
      if constexpr (C.none) {
        return Out(runtime::redistribute<P>(x)...);
      } else {
        // A dynamic dim bound to 1: the change moves nothing (a static mesh of these sizes
        // classifies it as none, above), so nothing is packed either.
        if constexpr (!Mesh::is_static)
          if (group_size(Mesh::shape_vec(), C.mesh_dims) == 1) return Out(runtime::redistribute<P>(x)...);
        return coalesce_detail::run<C, Mesh, B, T>(
            std::index_sequence_for<L...>{}, std::tuple<const dtensor<T, L, B>&...>(x...),
            std::tuple<layout<Mesh, P, typename L::extents_type>...>(
                layout<Mesh, P, typename L::extents_type>(x.layout().extents())...));
      }
    }(To{});
  }
}

}  // namespace spmd::runtime
