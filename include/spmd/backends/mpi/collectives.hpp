// spmd/backends/mpi/collectives.hpp — collectives on this process's tensor (torch.distributed's
// functional collectives), over the whole mesh or the groups of some mesh dims: the MPI
// counterparts of the simulation's collectives on local tensors (backends/sim/collectives.hpp),
// with the same semantics and the same bits.
//
//   using M = spmd::mesh<2, 2>;
//   host_tensor<float> x = ...;                                  // this process's tensor
//   auto s = spmd::mpi::all_reduce<M>(x, reduce_op::sum);         // every rank of the mesh
//   auto r = spmd::mpi::all_gather<M>(x, 0, 0b10);                // over mesh dim 1
//   auto b = spmd::mpi::broadcast<M>(x, 0);
//   auto c = spmd::mpi::reduce_scatter<M>(x, reduce_op::max, 1);
//   auto d = spmd::mpi::all_to_all<M>(x, 1, 0);
//
// `group` is a dim_mask as in the simulation (members row-major over the masked dims). Every
// member first learns every member's shape (one MPI_Allgather), so a shape that does not fit
// is refused on every member with the same message, before any data moves. A process whose
// rank the mesh does not name takes no part and gets its x back.
//
// Reductions: the simulation's kernels in group order (all_reduce: chunked as a redistribute's
// all_reduce, or MPI_Allreduce with spmd's MPI_Op for max, min and integer sum/product).
#pragma once

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/host/distribute.hpp"
#include "spmd/host/host_tensor.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/backends/mpi/backend.hpp"
#include "spmd/backends/mpi/transport.hpp"
#include "spmd/backends/mpi/mpi_c.hpp"
#include "spmd/core/chunk.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/runtime/comm_counter.hpp"

namespace spmd::mpi {

namespace detail {

/// Every dim of Mesh (the whole mesh as one group).
template <class Mesh>
constexpr dim_mask whole_mask() {
  return Mesh::ndim >= 32 ? ~dim_mask{0} : static_cast<dim_mask>((dim_mask{1} << Mesh::ndim) - 1);
}

/// This process's group of `group` on Mesh.
struct mesh_group {
  bool member = false;
  index_t pos = 0;  // position in the group
  index_t n = 1;
  std::vector<index_t> ranks;  // the members' rank ids, group order
  MPI_Comm comm = MPI_COMM_NULL;
};

template <class Mesh>
mesh_group group_for(dim_mask group, const char* who) {
  const dim_mask all = Mesh::ndim >= 32 ? ~dim_mask{0} : (dim_mask{1} << Mesh::ndim) - 1;
  if ((group & ~all) != 0)
    throw std::invalid_argument(std::string("spmd::mpi::") + who + ": group mask " +
                                std::to_string(group) + " names mesh dims the mesh lacks (it has " +
                                std::to_string(Mesh::ndim) + " dims)");
  mesh_group g;
  const held_range h = backend::held<Mesh>();
  if (h.count() == 0) return g;
  g.member = true;
  const group_position gp = group_of(Mesh::shape_vec(), group, h.lo);
  g.pos = gp.index;
  g.n = group_size(Mesh::shape_vec(), group);
  std::vector<int> comm_ranks;
  for (index_t j = 0; j < g.n; ++j) {
    g.ranks.push_back(Mesh::rank_at(group_member(Mesh::shape_vec(), group, gp.group, j)));
    comm_ranks.push_back(static_cast<int>(g.ranks.back()));
  }
  if (g.n > 1) g.comm = group_comm(communicator(), comm_ranks);
  return g;
}

/// Every member's shape, group order (one MPI_Allgather).
inline std::vector<shape_vec> shapes_of(const mesh_group& g, const std::vector<index_t>& mine) {
  constexpr int w = max_tensor_dims + 1;
  long long send[w] = {};
  send[0] = static_cast<long long>(mine.size());
  for (std::size_t d = 0; d < mine.size() && d < static_cast<std::size_t>(max_tensor_dims); ++d)
    send[d + 1] = mine[d];
  std::vector<long long> all(static_cast<std::size_t>(w * g.n));
  if (g.n > 1)
    check(MPI_Allgather(send, w, MPI_LONG_LONG, all.data(), w, MPI_LONG_LONG, g.comm),
          "MPI_Allgather");
  else
    for (int k = 0; k < w; ++k) all[static_cast<std::size_t>(k)] = send[k];
  std::vector<shape_vec> out;
  for (index_t j = 0; j < g.n; ++j) {
    shape_vec s{};
    const long long* p = all.data() + j * w;
    for (long long d = 0; d < p[0] && d < max_tensor_dims; ++d) s.push_back(p[d + 1]);
    out.push_back(s);
  }
  return out;
}

inline std::string who_text(const char* fn, const mesh_group& g, index_t j) {
  return std::string("spmd::mpi::") + fn + ": rank " + std::to_string(g.ranks[static_cast<std::size_t>(j)]);
}

/// Every member's shape must equal the first member's (the same check on every member).
inline void require_equal_shapes(const mesh_group& g, const std::vector<shape_vec>& shapes,
                                 const char* fn) {
  for (index_t j = 1; j < g.n; ++j)
    if (!(shapes[static_cast<std::size_t>(j)] == shapes[0]))
      throw std::invalid_argument(who_text(fn, g, j) + "'s tensor " +
                                  shape_text(shapes[static_cast<std::size_t>(j)]) +
                                  " differs from rank " + std::to_string(g.ranks[0]) + "'s " +
                                  shape_text(shapes[0]) + " in their group");
}

inline int dim_of(int d, int n, const char* who, const char* what) {
  if (d < -n || d >= n)
    throw std::out_of_range(std::string("spmd::mpi::") + who + ": " + what + " " +
                            std::to_string(d) + " is out of range for " + std::to_string(n) +
                            " dims");
  return d < 0 ? d + n : d;
}

inline shape_vec zeros(int n) {
  shape_vec z{};
  for (int d = 0; d < n; ++d) z.push_back(0);
  return z;
}

/// The region `ext` at `spos` of an array of shape S, to `dpos` of an array of shape D.
template <class T>
void copy_box(T* dst, const shape_vec& D, const shape_vec& dpos, const T* src, const shape_vec& S,
              const shape_vec& spos, const shape_vec& ext) {
  local_box region{ext, spos}, sbox{S, zeros(S.size())}, dbox{D, {}};
  for (int d = 0; d < D.size(); ++d) dbox.offset.push_back(spos[d] - dpos[d]);
  const run_geom geo = make_geom(region, sbox, dbox);
  if (geo.run > 0) copy_region(dst, src, geo);
}

template <class T>
host_tensor<T> tensor_of(const shape_vec& s) {
  host_tensor<T> t;
  t.shape.assign(s.begin(), s.end());
  t.data.resize(static_cast<std::size_t>(shape_elems(s)));
  return t;
}

inline shape_vec shape_of(const std::vector<index_t>& v) {
  shape_vec s{};
  for (index_t e : v) s.push_back(e);
  return s;
}

}  // namespace detail

/// op over the group's tensors (equal shapes), left to right in group order.
template <class Mesh, element T>
host_tensor<T> all_reduce(const host_tensor<T>& x, reduce_op op,
                          dim_mask group = detail::whole_mask<Mesh>()) {
  check_reduce_op<T>(op, "spmd::mpi::all_reduce");
  const detail::mesh_group g = detail::group_for<Mesh>(group, "all_reduce");
  if (!g.member) return x;
  const std::vector<shape_vec> shapes = detail::shapes_of(g, x.shape);
  detail::require_equal_shapes(g, shapes, "all_reduce");
  host_tensor<T> out = x;
  const index_t len = static_cast<index_t>(x.data.size());
  if (g.n > 1 && len > 0)
    detail::all_reduce_chunks(op, g.n, g.pos, g.comm, x.data.data(), out.data.data(), len);
  if (detail::counting()) {
    index_t received = 0;
    for (index_t j = 0; j < g.n; ++j) received += 2 * (len - chunk(len, g.n, j).size);
    detail::record_collective(step_kind::all_reduce, group, received * index_t{sizeof(T)});
  }
  return out;
}

/// The tensor of the member at the group position `src_rank` holds in its own group.
template <class Mesh, element T>
host_tensor<T> broadcast(const host_tensor<T>& x, index_t src_rank,
                         dim_mask group = detail::whole_mask<Mesh>()) {
  if (!Mesh::contains(src_rank))
    throw std::invalid_argument("spmd::mpi::broadcast: source rank " + std::to_string(src_rank) +
                                " is not in the mesh");
  const detail::mesh_group g = detail::group_for<Mesh>(group, "broadcast");
  if (!g.member || g.n == 1) return x;
  const index_t pos = Mesh::group_of_rank(group, src_rank).index;
  const std::vector<shape_vec> shapes = detail::shapes_of(g, x.shape);
  const shape_vec& S = shapes[static_cast<std::size_t>(pos)];
  host_tensor<T> out = g.pos == pos ? x : detail::tensor_of<T>(S);
  detail::check(MPI_Bcast(out.data.data(), detail::count_of(shape_elems(S), "a broadcast"),
                          detail::element_type(sizeof(T)), static_cast<int>(pos), g.comm),
                "MPI_Bcast");
  if (detail::counting()) detail::record_broadcast(group, (g.n - 1) * shape_elems(S) * index_t{sizeof(T)});
  return out;
}

/// The group's tensors concatenated along `dim` in group order (sizes along dim may differ;
/// the other dims must agree).
template <class Mesh, element T>
host_tensor<T> all_gather(const host_tensor<T>& x, int dim,
                          dim_mask group = detail::whole_mask<Mesh>()) {
  const detail::mesh_group g = detail::group_for<Mesh>(group, "all_gather");
  if (!g.member) return x;
  const int d = detail::dim_of(dim, static_cast<int>(x.shape.size()), "all_gather", "dim");
  const std::vector<shape_vec> shapes = detail::shapes_of(g, x.shape);
  shape_vec O = shapes[0];
  O[d] = 0;
  std::vector<int> counts, displs;
  index_t total = 0;
  for (index_t j = 0; j < g.n; ++j) {
    const shape_vec& s = shapes[static_cast<std::size_t>(j)];
    for (int e = 0; e < s.size(); ++e)
      if (e != d && s[e] != shapes[0][e])
        throw std::invalid_argument(
            detail::who_text("all_gather", g, j) + "'s tensor " + detail::shape_text(s) + " and rank " +
            std::to_string(g.ranks[0]) + "'s " + detail::shape_text(shapes[0]) + " differ in dim " +
            std::to_string(e) + " (gathering along dim " + std::to_string(d) + ")");
    O[d] += s[d];
    displs.push_back(detail::count_of(total, "an all_gather"));
    counts.push_back(detail::count_of(shape_elems(s), "an all_gather"));
    total += shape_elems(s);
  }
  buffer<T> all(total);
  const MPI_Datatype t = detail::element_type(sizeof(T));
  if (g.n > 1)
    detail::check(MPI_Allgatherv(x.data.data(), counts[static_cast<std::size_t>(g.pos)], t,
                                 all.data(), counts.data(), displs.data(), t, g.comm),
                  "MPI_Allgatherv");
  else if (total > 0)
    detail::copy_bytes(all.data(), x.data.data(), static_cast<std::size_t>(total) * sizeof(T));
  host_tensor<T> out = detail::tensor_of<T>(O);
  shape_vec at = detail::zeros(O.size());
  for (index_t j = 0; j < g.n; ++j) {
    const shape_vec& s = shapes[static_cast<std::size_t>(j)];
    detail::copy_box(out.data.data(), O, at, static_cast<const T*>(all.data()) + displs[static_cast<std::size_t>(j)],
                     s, detail::zeros(s.size()), s);
    at[d] += s[d];
  }
  if (detail::counting())
    detail::record_collective(step_kind::all_gather, group,
                      (g.n * shape_elems(O) - total) * index_t{sizeof(T)});
  return out;
}

/// op over the group's tensors (equal shapes), then member j keeps torch.chunk piece j of
/// the result along `dim`.
template <class Mesh, element T>
host_tensor<T> reduce_scatter(const host_tensor<T>& x, reduce_op op, int dim,
                              dim_mask group = detail::whole_mask<Mesh>()) {
  check_reduce_op<T>(op, "spmd::mpi::reduce_scatter");
  const detail::mesh_group g = detail::group_for<Mesh>(group, "reduce_scatter");
  if (!g.member) return x;
  const int d = detail::dim_of(dim, static_cast<int>(x.shape.size()), "reduce_scatter", "dim");
  const std::vector<shape_vec> shapes = detail::shapes_of(g, x.shape);
  detail::require_equal_shapes(g, shapes, "reduce_scatter");
  const shape_vec S = shapes[0];
  auto piece = [&](index_t j, shape_vec& ext, shape_vec& at) {
    const chunk_piece p = chunk(S[d], g.n, j);
    ext = S;
    ext[d] = p.size;
    at = detail::zeros(S.size());
    at[d] = p.start;
  };
  detail::transport msg(g.comm);
  std::vector<buffer<T>> packed;  // my piece of each member's block, and theirs of mine
  shape_vec ext, at;
  for (index_t j = 0; j < g.n; ++j) {
    if (j == g.pos) continue;
    piece(j, ext, at);
    if (shape_elems(ext) == 0) continue;
    packed.emplace_back(shape_elems(ext));
    detail::copy_box(packed.back().data(), ext, detail::zeros(S.size()), x.data.data(), S, at, ext);
    msg.send(packed.back().data(), shape_elems(ext), static_cast<int>(j), g.comm);
  }
  piece(g.pos, ext, at);
  const index_t mine = shape_elems(ext);
  std::vector<const T*> srcs(static_cast<std::size_t>(g.n));
  for (index_t j = 0; j < g.n; ++j) {
    packed.emplace_back(mine);
    srcs[static_cast<std::size_t>(j)] = packed.back().data();
    if (j == g.pos)
      detail::copy_box(packed.back().data(), ext, detail::zeros(S.size()), x.data.data(), S, at, ext);
    else if (mine > 0)
      msg.recv(packed.back().data(), mine, static_cast<int>(j), g.comm);
  }
  msg.wait();
  host_tensor<T> out = detail::tensor_of<T>(ext);
  if (mine > 0) detail::reduce_region(op, out.data.data(), srcs.data(), g.n, whole_geom(mine));
  if (detail::counting())
    detail::record_collective(step_kind::reduce_scatter, group,
                      (g.n - 1) * shape_elems(S) * index_t{sizeof(T)});
  return out;
}

/// Each member's tensor split torch.chunk-style along `split_dim` into group-size pieces;
/// member j gets piece j of every member, concatenated along `concat_dim` in group order.
template <class Mesh, element T>
host_tensor<T> all_to_all(const host_tensor<T>& x, int split_dim, int concat_dim,
                          dim_mask group = detail::whole_mask<Mesh>()) {
  const detail::mesh_group g = detail::group_for<Mesh>(group, "all_to_all");
  if (!g.member) return x;
  const int r = static_cast<int>(x.shape.size());
  const int sd = detail::dim_of(split_dim, r, "all_to_all", "split dim");
  const int cd = detail::dim_of(concat_dim, r, "all_to_all", "concat dim");
  const std::vector<shape_vec> shapes = detail::shapes_of(g, x.shape);
  auto piece_ext = [&](index_t i, index_t j) {  // member i's piece for member j
    shape_vec e = shapes[static_cast<std::size_t>(i)];
    e[sd] = chunk(e[sd], g.n, j).size;
    return e;
  };
  // Every member checks every receiver, so all refuse together.
  for (index_t j = 0; j < g.n; ++j)
    for (index_t i = 1; i < g.n; ++i) {
      const shape_vec a = piece_ext(i, j), b = piece_ext(0, j);
      for (int e = 0; e < r; ++e)
        if (e != cd && a[e] != b[e])
          throw std::invalid_argument(
              "spmd::mpi::all_to_all: the pieces rank " + std::to_string(g.ranks[static_cast<std::size_t>(j)]) +
              " gets from rank " + std::to_string(g.ranks[static_cast<std::size_t>(i)]) + " " +
              detail::shape_text(a) + " and from rank " + std::to_string(g.ranks[0]) + " " + detail::shape_text(b) +
              ": they differ in dim " + std::to_string(e) + " (concatenating along dim " +
              std::to_string(cd) + ")");
    }
  const shape_vec S = shapes[static_cast<std::size_t>(g.pos)];
  detail::transport msg(g.comm);
  std::vector<buffer<T>> packed;
  std::vector<const T*> got(static_cast<std::size_t>(g.n));
  for (index_t j = 0; j < g.n; ++j) {  // my piece j, packed
    const shape_vec e = piece_ext(g.pos, j);
    shape_vec at = detail::zeros(r);
    at[sd] = chunk(S[sd], g.n, j).start;
    packed.emplace_back(shape_elems(e));
    detail::copy_box(packed.back().data(), e, detail::zeros(r), x.data.data(), S, at, e);
    if (j == g.pos) got[static_cast<std::size_t>(j)] = packed.back().data();
    else if (shape_elems(e) > 0) msg.send(packed.back().data(), shape_elems(e), static_cast<int>(j), g.comm);
  }
  shape_vec O = piece_ext(0, g.pos);
  O[cd] = 0;
  for (index_t i = 0; i < g.n; ++i) {
    const shape_vec e = piece_ext(i, g.pos);
    O[cd] += e[cd];
    if (i == g.pos) continue;
    packed.emplace_back(shape_elems(e));
    got[static_cast<std::size_t>(i)] = packed.back().data();
    if (shape_elems(e) > 0) msg.recv(packed.back().data(), shape_elems(e), static_cast<int>(i), g.comm);
  }
  msg.wait();
  host_tensor<T> out = detail::tensor_of<T>(O);
  shape_vec at = detail::zeros(r);
  index_t received = 0;
  for (index_t i = 0; i < g.n; ++i) {
    const shape_vec e = piece_ext(i, g.pos);
    detail::copy_box(out.data.data(), O, at, got[static_cast<std::size_t>(i)], e, detail::zeros(r), e);
    at[cd] += e[cd];
    if (i != g.pos) received += shape_elems(e);
  }
  if (detail::counting()) detail::record_collective(step_kind::all_to_all, group, received * index_t{sizeof(T)});
  return out;
}

}  // namespace spmd::mpi
