// spmd/backends/sim/collectives.hpp — collectives on local tensors (PyTorch's c10d functions run under
// LocalTensorMode), over the whole mesh or the groups of some mesh dims.
//
//   using M = spmd::mesh<3>;
//   local_tensor<float, M> x({{0, {{1, 2}, {1, 2}}}, {1, {{1, 2}, {3, 4}}}, {2, {{1, 2}, {5, 6}}}});
//   all_gather(x, 0);                        // [[1,2],[3,4],[5,6]] on every rank
//   all_reduce(x, reduce_op::sum);           // [[9,12]] on every rank
//   broadcast(x, 0);                         // [[1,2]] on every rank
//   reduce_scatter(x, reduce_op::sum, 1);    // rank 0: [[9]], rank 1: [[12]], rank 2: [[]]
//   all_to_all(x, 1, 0);                     // split dim 1, concatenate along dim 0
//   using G = spmd::mesh<2, 2>;
//   all_reduce(y, reduce_op::max, 0b10);     // over mesh dim 1: ranks {0,1} and {2,3}
//
// `group` is a dim_mask (bit m = mesh dim m; default: every dim, the whole mesh). Ranks that
// agree on the coordinates outside the mask form one group; members are ordered row-major
// over the masked dims (spmd/core/mesh_groups.hpp: group_member / group_of). Results are
// deterministic: reductions combine members left to right in group order.
//
// One implementation with redistribute: the data moves through the simulation backend's own
// kernels (kernels.hpp), never through element loops written here:
//   - every piece copied (a shard into its slot of an all_gather, a torch.chunk piece into
//     an all_to_all's output, the broadcast source into each member) is a box copy:
//     make_geom(region, src box, dst box) + copy_region, as a redistribute step's copy ops;
//   - all_reduce is the reduction kernel (reduce_region: reduce_into, chunk by chunk) into
//     the group's first member, whose block the others share, as a P -> R step;
//   - all_gather's and broadcast's members share one block (local_set::share): the result
//     is written once per group, or not at all (broadcast shares the source's block);
//   - reduce_scatter is reduce_region over member j's torch.chunk box of the group's
//     shards, as a P -> S(dim) step.
// Uneven pieces are zero-size boxes (run = 0: the kernels do nothing).
//
// Each call is one collective for a live comm_counter (comm_counter.hpp): its kind, the
// group mask, and the bytes every rank receives from the other members, by the counter's
// formulas (ring all_reduce and reduce_scatter, as a redistribute step's are counted).
//
// Every bad input (a mask naming dims the mesh lacks, a dim out of range, a source rank not
// in the mesh, shapes that do not fit) throws, naming the value and the ranks.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/core/chunk.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/backends/sim/local_tensor.hpp"
#include "spmd/host/groups.hpp"
#include "spmd/plan/lower.hpp"

#include "spmd/backends/sim/names.hpp"

namespace spmd::sim {

namespace detail {

using host::whole_mesh_mask;
using host::group_members;

template <class Mesh>
void check_group(dim_mask group, const char* who) {
  if ((group & ~whole_mesh_mask<Mesh>()) != 0)
    throw std::invalid_argument(std::string("spmd::sim::") + who + ": group mask " +
                                std::to_string(group) + " names mesh dims the mesh lacks (it has " +
                                std::to_string(Mesh::ndim) + " dims)");
}

/// `d` (negative counts from the end) as a dim of an `n`-dim tensor; throws when out of range.
inline int check_dim(int d, int n, const char* who, const char* what) {
  if (d < -n || d >= n)
    throw std::out_of_range(std::string("spmd::sim::") + who + ": " + what + " " +
                            std::to_string(d) + " is out of range for " + std::to_string(n) +
                            " dims");
  return d < 0 ? d + n : d;
}

/// Every member's shape must equal the first member's.
template <class T, class Mesh>
void check_same_shapes(const local_set<T>& s, const std::vector<index_t>& members,
                       const char* who) {
  for (std::size_t j = 1; j < members.size(); ++j)
    if (!(s.shape(members[j]) == s.shape(members[0])))
      throw std::invalid_argument(
          std::string("spmd::sim::") + who + ": " + rank_text(Mesh::rank_at(members[j])) +
          "'s shard " + shape_text(s.shape(members[j])) + " differs from " +
          rank_text(Mesh::rank_at(members[0])) + "'s " + shape_text(s.shape(members[0])) +
          " in their group");
}

inline shape_vec zeros_like(const shape_vec& s) {
  shape_vec z{};
  for (int d = 0; d < s.size(); ++d) z.push_back(0);
  return z;
}

/// Box copy, as a redistribute copy op: the region of extents `ext` at `spos` of the source
/// array (shape `S`) goes to `dpos` of the destination array (shape `D`). The source array
/// is the box {S, 0} and the destination {D, spos - dpos}, so make_geom maps the region to
/// both; copy_region walks its runs.
template <class T>
void copy_box(T* dst, const shape_vec& D, const shape_vec& dpos, const T* src,
              const shape_vec& S, const shape_vec& spos, const shape_vec& ext) {
  local_box region{ext, spos}, sbox{S, zeros_like(S)}, dbox{D, {}};
  for (int d = 0; d < D.size(); ++d) dbox.offset.push_back(spos[d] - dpos[d]);
  const run_geom g = make_geom(region, sbox, dbox);
  if (g.run > 0) copy_region(dst, src, g);
}

template <class T, class Mesh>
local_tensor<T, Mesh> wrap(local_set<T> s) {
  return local_tensor<T, Mesh>(local_internal_t{}, std::move(s));
}

}  // namespace detail

/// Every member of each group gets op over its group's shards (equal shapes within a group),
/// combined left to right in group order (avg: the sum divided by the group size).
template <element T, class Mesh>
local_tensor<T, Mesh> all_reduce(const local_tensor<T, Mesh>& x, reduce_op op,
                                 dim_mask group = detail::whole_mesh_mask<Mesh>()) {
  detail::check_group<Mesh>(group, "all_reduce");
  check_reduce_op<T>(op, "spmd::sim::all_reduce");
  const local_set<T>& in = x.shards();
  local_set<T> out(Mesh::size);
  index_t received = 0;
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const std::vector<index_t> m = detail::group_members<Mesh>(group, g);
    detail::check_same_shapes<T, Mesh>(in, m, "all_reduce");
    std::vector<const T*> src;
    for (index_t i : m) src.push_back(in.data(i));
    const index_t len = in.size(m[0]);
    const index_t n = static_cast<index_t>(m.size());
    out.assign(m[0], in.shape(m[0]));
    if (len > 0)  // the backend's reduction (a P -> R step): one result, shared by the group
      detail::reduce_region(op, out.data(m[0]), src.data(), n, whole_geom(len));
    for (std::size_t j = 1; j < m.size(); ++j) out.share(m[j], m[0]);
    for (index_t j = 0; j < n; ++j) received += 2 * (len - chunk(len, n, j).size);
  }
  if (detail::counting())
    detail::record_collective(step_kind::all_reduce, group, received * index_t{sizeof(T)});
  return detail::wrap<T, Mesh>(std::move(out));
}

/// Every member of each group gets a copy of one member's shard: the member at the group
/// position that rank id `src_rank` holds in its own group (for the whole mesh, `src_rank`
/// itself; as DeviceMesh's group-local source). Shards may differ in shape.
template <element T, class Mesh>
local_tensor<T, Mesh> broadcast(const local_tensor<T, Mesh>& x, index_t src_rank,
                                dim_mask group = detail::whole_mesh_mask<Mesh>()) {
  detail::check_group<Mesh>(group, "broadcast");
  if (!Mesh::contains(src_rank))
    throw std::invalid_argument("spmd::sim::broadcast: source rank " + std::to_string(src_rank) +
                                " is not in the mesh");
  const index_t pos = Mesh::group_of_rank(group, src_rank).index;
  const local_set<T>& in = x.shards();
  local_set<T> out(Mesh::size);
  index_t received = 0;
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const index_t s = group_member(Mesh::shape_vec(), group, g, pos);
    const shape_vec& S = in.shape(s);
    for (index_t i : detail::group_members<Mesh>(group, g)) {
      out.share_from(i, in, s);  // the source's block itself (copied when written)
      if (i != s) received += shape_elems(S);
    }
  }
  if (detail::counting()) detail::record_broadcast(group, received * index_t{sizeof(T)});
  return detail::wrap<T, Mesh>(std::move(out));
}

/// Every member of each group gets its group's shards concatenated along `dim`, in group
/// order. Shards may differ in size along `dim` (zero-size included); the other dims must
/// agree within a group.
template <element T, class Mesh>
local_tensor<T, Mesh> all_gather(const local_tensor<T, Mesh>& x, int dim,
                                 dim_mask group = detail::whole_mesh_mask<Mesh>()) {
  detail::check_group<Mesh>(group, "all_gather");
  const int d = detail::check_dim(dim, x.dim(), "all_gather", "dim");
  const local_set<T>& in = x.shards();
  local_set<T> out(Mesh::size);
  index_t received = 0;  // each member lacks every shard but its own
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const std::vector<index_t> m = detail::group_members<Mesh>(group, g);
    shape_vec O = in.shape(m[0]);
    O[d] = 0;
    for (index_t i : m) {
      const shape_vec& s = in.shape(i);
      for (int e = 0; e < s.size(); ++e)
        if (e != d && s[e] != in.shape(m[0])[e])
          throw std::invalid_argument(
              "spmd::sim::all_gather: " + detail::rank_text(Mesh::rank_at(i)) + "'s shard " +
              detail::shape_text(s) + " and " + detail::rank_text(Mesh::rank_at(m[0])) + "'s " +
              detail::shape_text(in.shape(m[0])) + " differ in dim " + std::to_string(e) +
              " (gathering along dim " + std::to_string(d) + ")");
      O[d] += s[d];
    }
    // Assemble on the first member: each shard is a box copy into its slot along d ...
    const index_t first = m[0];
    out.assign(first, O);
    shape_vec pos = detail::zeros_like(O);
    const shape_vec z = pos;
    for (index_t i : m) {
      detail::copy_box(out.data(first), O, pos, in.data(i), in.shape(i), z, in.shape(i));
      pos[d] += in.shape(i)[d];
    }
    // ... then the whole result is copied to the other members.
    for (std::size_t j = 1; j < m.size(); ++j) out.share(m[j], first);  // one block, shared
    for (index_t i : m) received += shape_elems(O) - in.size(i);
  }
  if (detail::counting())
    detail::record_collective(step_kind::all_gather, group, received * index_t{sizeof(T)});
  return detail::wrap<T, Mesh>(std::move(out));
}

/// op over each group's shards (equal shapes within a group), then member j keeps
/// torch.chunk piece j of the result along `dim` (zero-size pieces for trailing members).
template <element T, class Mesh>
local_tensor<T, Mesh> reduce_scatter(const local_tensor<T, Mesh>& x, reduce_op op, int dim,
                                     dim_mask group = detail::whole_mesh_mask<Mesh>()) {
  detail::check_group<Mesh>(group, "reduce_scatter");
  check_reduce_op<T>(op, "spmd::sim::reduce_scatter");
  const int d = detail::check_dim(dim, x.dim(), "reduce_scatter", "dim");
  const local_set<T>& in = x.shards();
  local_set<T> out(Mesh::size);
  index_t received = 0;  // ring: every chunk but the member's own
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const std::vector<index_t> m = detail::group_members<Mesh>(group, g);
    detail::check_same_shapes<T, Mesh>(in, m, "reduce_scatter");
    const shape_vec& S = in.shape(m[0]);
    const index_t n = static_cast<index_t>(m.size());
    std::vector<const T*> src;
    for (index_t i : m) src.push_back(in.data(i));
    for (index_t j = 0; j < n; ++j) {
      const chunk_piece p = chunk(S[d], n, j);
      local_box piece{S, detail::zeros_like(S)};
      piece.shape[d] = p.size;
      piece.offset[d] = p.start;
      const index_t i = m[static_cast<std::size_t>(j)];
      out.assign(i, piece.shape);
      // The backend's reduce kernel over member j's box of every shard (a P -> S(d) step).
      const run_geom geo = make_geom(piece, local_box{S, detail::zeros_like(S)}, piece);
      if (geo.run > 0) detail::reduce_region(op, out.data(i), src.data(), n, geo);
      received += shape_elems(S) - shape_elems(piece.shape);
    }
  }
  if (detail::counting())
    detail::record_collective(step_kind::reduce_scatter, group, received * index_t{sizeof(T)});
  return detail::wrap<T, Mesh>(std::move(out));
}

/// Each member's shard is split torch.chunk-style along `split_dim` into group-size pieces;
/// member j gets piece j of every member, concatenated along `concat_dim` in group order.
/// The pieces member j gets must agree on every dim but `concat_dim`.
template <element T, class Mesh>
local_tensor<T, Mesh> all_to_all(const local_tensor<T, Mesh>& x, int split_dim, int concat_dim,
                                 dim_mask group = detail::whole_mesh_mask<Mesh>()) {
  detail::check_group<Mesh>(group, "all_to_all");
  const int sd = detail::check_dim(split_dim, x.dim(), "all_to_all", "split dim");
  const int cd = detail::check_dim(concat_dim, x.dim(), "all_to_all", "concat dim");
  const local_set<T>& in = x.shards();
  local_set<T> out(Mesh::size);
  index_t received = 0;  // every piece but the member's own
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const std::vector<index_t> m = detail::group_members<Mesh>(group, g);
    const index_t n = static_cast<index_t>(m.size());
    for (index_t j = 0; j < n; ++j) {
      // Piece j of every member k: a box of member k's shard.
      std::vector<local_box> pieces;
      for (index_t k : m) {
        const shape_vec& S = in.shape(k);
        const chunk_piece p = chunk(S[sd], n, j);
        local_box b{S, detail::zeros_like(S)};
        b.shape[sd] = p.size;
        b.offset[sd] = p.start;
        pieces.push_back(b);
      }
      shape_vec O = pieces[0].shape;
      O[cd] = 0;
      for (std::size_t k = 0; k < pieces.size(); ++k) {
        for (int e = 0; e < O.size(); ++e)
          if (e != cd && pieces[k].shape[e] != pieces[0].shape[e])
            throw std::invalid_argument(
                "spmd::sim::all_to_all: piece " + std::to_string(j) + " of " +
                detail::rank_text(Mesh::rank_at(m[k])) + "'s shard " +
                detail::shape_text(in.shape(m[k])) + " is " +
                detail::shape_text(pieces[k].shape) + ", piece " + std::to_string(j) + " of " +
                detail::rank_text(Mesh::rank_at(m[0])) + "'s " +
                detail::shape_text(in.shape(m[0])) + " is " +
                detail::shape_text(pieces[0].shape) + ": they differ in dim " +
                std::to_string(e) + " (concatenating along dim " + std::to_string(cd) + ")");
        O[cd] += pieces[k].shape[cd];
      }
      const index_t i = m[static_cast<std::size_t>(j)];
      out.assign(i, O);
      shape_vec pos = detail::zeros_like(O);
      for (std::size_t k = 0; k < pieces.size(); ++k) {
        detail::copy_box(out.data(i), O, pos, in.data(m[k]), in.shape(m[k]), pieces[k].offset,
                         pieces[k].shape);
        pos[cd] += pieces[k].shape[cd];
      }
      received += shape_elems(O) - shape_elems(pieces[static_cast<std::size_t>(j)].shape);
    }
  }
  if (detail::counting())
    detail::record_collective(step_kind::all_to_all, group, received * index_t{sizeof(T)});
  return detail::wrap<T, Mesh>(std::move(out));
}

}  // namespace spmd::sim
