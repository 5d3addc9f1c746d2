// spmd/backends/cuda/collectives_table.hpp — the collectives on local tensors as step tables
// (step_table.hpp), built from the locals' shapes on the host: each output element written
// once, reductions in group order, the simulation's chunking and messages. collectives.hpp
// launches them; the CPU tests run them through the grid emulation.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/distribute.hpp"
#include "spmd/host/groups.hpp"

namespace spmd::cuda {

namespace coll_detail {

using host::group_members;
using host::whole_mesh_mask;

inline shape_vec zeros_like(const shape_vec& s) {
  shape_vec z{};
  for (int d = 0; d < s.size(); ++d) z.push_back(0);
  return z;
}

inline std::string shape_text(const shape_vec& s) { return host::detail::shape_text(s); }

template <class Mesh>
void check_group(dim_mask group, const char* who) {
  if ((group & ~whole_mesh_mask<Mesh>()) != 0)
    throw std::invalid_argument(std::string("spmd::cuda::") + who + ": group mask " + std::to_string(group) +
                                " names mesh dims the mesh lacks (it has " + std::to_string(Mesh::ndim) + " dims)");
}

inline int check_dim(int d, int n, const char* who, const char* what) {
  if (d < -n || d >= n)
    throw std::out_of_range(std::string("spmd::cuda::") + who + ": " + what + " " + std::to_string(d) +
                            " is out of range for " + std::to_string(n) + " dims");
  return d < 0 ? d + n : d;
}

template <class Mesh>
void check_same_shapes(const std::vector<shape_vec>& s, const std::vector<index_t>& m, const char* who) {
  for (std::size_t j = 1; j < m.size(); ++j)
    if (!(s[m[j]] == s[m[0]]))
      throw std::invalid_argument(std::string("spmd::cuda::") + who + ": rank " +
                                  std::to_string(Mesh::rank_at(m[j])) + "'s local " + shape_text(s[m[j]]) +
                                  " differs from rank " + std::to_string(Mesh::rank_at(m[0])) + "'s " +
                                  shape_text(s[m[0]]) + " in their group");
}

/// A collective as one step: its table, every member's output shape, and the bytes a
/// member receives (for comm_counter). Built from the input shapes only, so that the CPU
/// tests run it through the grid emulation.
struct table {
  step_table t;
  std::vector<shape_vec> out;
  index_t received = 0;
  void add(op_code code, index_t src, index_t dst, const run_geom& geo) {
    if (geo.count() == 0) return;
    t.ops.push_back(dev_op{code, src, dst, geo, t.items});
    t.items += geo.count();
  }
  /// region `ext` at `spos` of src (shape S) to `dpos` of dst (shape D), as sim's copy_box.
  void copy_box(index_t src, index_t dst, const shape_vec& D, const shape_vec& dpos, const shape_vec& S,
                const shape_vec& spos, const shape_vec& ext) {
    local_box region{ext, spos}, sbox{S, zeros_like(S)}, dbox{D, {}};
    for (int d = 0; d < D.size(); ++d) dbox.offset.push_back(spos[d] - dpos[d]);
    add(op_code::copy, src, dst, make_geom(region, sbox, dbox));
  }
};

inline run_geom flat_geom(index_t n) {
  run_geom g{};
  g.run = n;
  return g;
}

}  // namespace coll_detail

/// (The table of all_reduce: see coll_detail::table.)
template <class Mesh, class T>
coll_detail::table all_reduce_table(const std::vector<shape_vec>& x, reduce_op op, dim_mask group) {
  using namespace coll_detail;
  check_group<Mesh>(group, "all_reduce");
  host::check_reduce_op<T>(op, "spmd::cuda::all_reduce");
  table tb;
  tb.t.op = op;
  tb.t.group_size = Mesh::group_size(group);
  tb.out.assign(static_cast<std::size_t>(Mesh::size), shape_vec{});
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const std::vector<index_t> m = group_members<Mesh>(group, g);
    check_same_shapes<Mesh>(x, m, "all_reduce");
    for (index_t i : m) {
      tb.out[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(i)];
      tb.t.members.push_back(i);
    }
    const index_t len = host::shape_elems(x[static_cast<std::size_t>(m[0])]), n = static_cast<index_t>(m.size());
    tb.add(op_code::reduce_bcast, g, m[0], flat_geom(len));
    for (index_t j = 0; j < n; ++j) tb.received += 2 * (len - chunk(len, n, j).size);
  }
  merge_fanout(tb.t);  // a piece going to every member: read once
  return tb;
}

/// (The table of broadcast: see coll_detail::table.)
template <class Mesh, class T>
coll_detail::table broadcast_table(const std::vector<shape_vec>& x, index_t src_rank, dim_mask group) {
  using namespace coll_detail;
  check_group<Mesh>(group, "broadcast");
  if (!Mesh::contains(src_rank))
    throw std::invalid_argument("spmd::cuda::broadcast: source rank " + std::to_string(src_rank) +
                                " is not in the mesh");
  const index_t pos = Mesh::group_of_rank(group, src_rank).index;
  table tb;
  tb.out.assign(static_cast<std::size_t>(Mesh::size), shape_vec{});
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const index_t s = group_member(Mesh::shape_vec(), group, g, pos);
    for (index_t i : group_members<Mesh>(group, g)) {
      tb.out[static_cast<std::size_t>(i)] = x[static_cast<std::size_t>(s)];
      tb.add(op_code::copy, s, i, flat_geom(host::shape_elems(x[static_cast<std::size_t>(s)])));
      if (i != s) tb.received += host::shape_elems(x[static_cast<std::size_t>(s)]);
    }
  }
  merge_fanout(tb.t);  // a piece going to every member: read once
  return tb;
}

/// (The table of all_gather: see coll_detail::table.)
template <class Mesh, class T>
coll_detail::table all_gather_table(const std::vector<shape_vec>& x, int dim, dim_mask group) {
  using namespace coll_detail;
  check_group<Mesh>(group, "all_gather");
  const int d = check_dim(dim, x[static_cast<std::size_t>(0)].size(), "all_gather", "dim");
  table tb;
  tb.out.assign(static_cast<std::size_t>(Mesh::size), shape_vec{});
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const std::vector<index_t> m = group_members<Mesh>(group, g);
    shape_vec O = x[static_cast<std::size_t>(m[0])];
    O[d] = 0;
    for (index_t i : m) {
      const shape_vec& s = x[static_cast<std::size_t>(i)];
      for (int e = 0; e < s.size(); ++e)
        if (e != d && s[e] != x[static_cast<std::size_t>(m[0])][e])
          throw std::invalid_argument("spmd::cuda::all_gather: rank " + std::to_string(Mesh::rank_at(i)) +
                                      "'s local " + shape_text(s) + " and rank " +
                                      std::to_string(Mesh::rank_at(m[0])) + "'s " + shape_text(x[static_cast<std::size_t>(m[0])]) +
                                      " differ in dim " + std::to_string(e) + " (gathering along dim " +
                                      std::to_string(d) + ")");
      O[d] += s[d];
    }
    for (index_t dst : m) {
      tb.out[static_cast<std::size_t>(dst)] = O;
      shape_vec pos = zeros_like(O);
      for (index_t src : m) {
        tb.copy_box(src, dst, O, pos, x[static_cast<std::size_t>(src)], zeros_like(O), x[static_cast<std::size_t>(src)]);
        pos[d] += x[static_cast<std::size_t>(src)][d];
      }
      tb.received += host::shape_elems(O) - host::shape_elems(x[static_cast<std::size_t>(dst)]);
    }
  }
  merge_fanout(tb.t);  // a piece going to every member: read once
  return tb;
}

/// (The table of reduce_scatter: see coll_detail::table.)
template <class Mesh, class T>
coll_detail::table reduce_scatter_table(const std::vector<shape_vec>& x, reduce_op op, int dim,
                             dim_mask group) {
  using namespace coll_detail;
  check_group<Mesh>(group, "reduce_scatter");
  host::check_reduce_op<T>(op, "spmd::cuda::reduce_scatter");
  const int d = check_dim(dim, x[static_cast<std::size_t>(0)].size(), "reduce_scatter", "dim");
  table tb;
  tb.t.op = op;
  tb.t.group_size = Mesh::group_size(group);
  tb.out.assign(static_cast<std::size_t>(Mesh::size), shape_vec{});
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const std::vector<index_t> m = group_members<Mesh>(group, g);
    check_same_shapes<Mesh>(x, m, "reduce_scatter");
    for (index_t i : m) tb.t.members.push_back(i);
    const shape_vec& S = x[static_cast<std::size_t>(m[0])];
    const index_t n = static_cast<index_t>(m.size());
    for (index_t j = 0; j < n; ++j) {
      const chunk_piece p = chunk(S[d], n, j);
      local_box piece{S, zeros_like(S)};
      piece.shape[d] = p.size;
      piece.offset[d] = p.start;
      const index_t i = m[static_cast<std::size_t>(j)];
      tb.out[static_cast<std::size_t>(i)] = piece.shape;
      tb.add(op_code::reduce, g, i, make_geom(piece, local_box{S, zeros_like(S)}, piece));
      tb.received += host::shape_elems(S) - host::shape_elems(piece.shape);
    }
  }
  merge_fanout(tb.t);  // a piece going to every member: read once
  return tb;
}

/// (The table of all_to_all: see coll_detail::table.)
template <class Mesh, class T>
coll_detail::table all_to_all_table(const std::vector<shape_vec>& x, int split_dim, int concat_dim,
                         dim_mask group) {
  using namespace coll_detail;
  check_group<Mesh>(group, "all_to_all");
  const int nd = x[static_cast<std::size_t>(0)].size();
  const int sd = check_dim(split_dim, nd, "all_to_all", "split dim");
  const int cd = check_dim(concat_dim, nd, "all_to_all", "concat dim");
  table tb;
  tb.out.assign(static_cast<std::size_t>(Mesh::size), shape_vec{});
  for (index_t g = 0; g < Mesh::group_count(group); ++g) {
    const std::vector<index_t> m = group_members<Mesh>(group, g);
    const index_t n = static_cast<index_t>(m.size());
    for (index_t j = 0; j < n; ++j) {
      std::vector<local_box> pieces;
      for (index_t k : m) {
        const shape_vec& S = x[static_cast<std::size_t>(k)];
        const chunk_piece p = chunk(S[sd], n, j);
        local_box b{S, zeros_like(S)};
        b.shape[sd] = p.size;
        b.offset[sd] = p.start;
        pieces.push_back(b);
      }
      shape_vec O = pieces[0].shape;
      O[cd] = 0;
      for (std::size_t k = 0; k < pieces.size(); ++k) {
        for (int e = 0; e < O.size(); ++e)
          if (e != cd && pieces[k].shape[e] != pieces[0].shape[e])
            throw std::invalid_argument("spmd::cuda::all_to_all: piece " + std::to_string(j) + " of rank " +
                                        std::to_string(Mesh::rank_at(m[k])) + "'s local is " +
                                        shape_text(pieces[k].shape) + ", of rank " +
                                        std::to_string(Mesh::rank_at(m[0])) + "'s " + shape_text(pieces[0].shape) +
                                        ": they differ in dim " + std::to_string(e) + " (concatenating along dim " +
                                        std::to_string(cd) + ")");
        O[cd] += pieces[k].shape[cd];
      }
      const index_t i = m[static_cast<std::size_t>(j)];
      tb.out[static_cast<std::size_t>(i)] = O;
      shape_vec pos = zeros_like(O);
      for (std::size_t k = 0; k < pieces.size(); ++k) {
        tb.copy_box(m[k], i, O, pos, x[static_cast<std::size_t>(m[k])], pieces[k].offset, pieces[k].shape);
        pos[cd] += pieces[k].shape[cd];
      }
      tb.received += host::shape_elems(O) - host::shape_elems(pieces[static_cast<std::size_t>(j)].shape);
    }
  }
  merge_fanout(tb.t);  // a piece going to every member: read once
  return tb;
}

}  // namespace spmd::cuda
