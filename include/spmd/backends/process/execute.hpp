// spmd/backends/process/execute.hpp — run a plan's steps on this process's rank: the one
// executor of the backends with one process per rank (MPI on CPUs, NCCL on GPUs).
//
// Every step is lowered by the same constexpr function the simulation uses
// (spmd/plan/lower.hpp: build_schedule); this file decides, for this process's mesh index,
// which of the step's box operations it takes part in, and in which order. How bytes move
// and where memory lives is the transport's (`Tr`: backends/mpi/transport.hpp,
// backends/nccl/transport.hpp):
//
//   chunk, partition, fill   local: the ops whose destination is this rank (Tr's region
//                            kernels: copy, move, fill, scale);
//   all_gather, all_to_all   each copy op whose source and destination differ becomes one
//                            message in the group (Tr::send / Tr::recv, finished together by
//                            Tr::wait). A piece that is one contiguous run travels from and
//                            into the locals themselves; others are packed into staging
//                            buffers and unpacked (or, where the transport can, sent as a
//                            strided region: MPI's derived datatypes). Exact boxes: uneven
//                            and empty pieces are no special case (an empty piece is no
//                            message);
//   reduce_scatter           every member sends its piece of each destination's block;
//                            the destination reduces the pieces in group order;
//   all_reduce               the transport's own all-reduce where it gives the promised
//                            bits (Tr::all_reduce returns false otherwise); else the block
//                            is cut into one chunk per member, member j receives chunk j of
//                            every member, reduces it in group order, and Tr::all_gatherv
//                            shares the chunks (a ring's bandwidth: 2 (n - 1) / n of the
//                            block per rank).
//
// Reductions in group order with the simulation's arithmetic are why the results equal the
// simulation's bit for bit.
//
// A transport Tr has (T the element type, C its group communicator):
//   template <class T> using buffer = ...;        // owning memory: buffer(n), data(), capacity()
//   C group(const std::vector<int>& parent_ranks, const group_split&);  // made once, cached
//   copy(out, in, geo), move(out, in, geo), fill(out, geo, v), scale(out, in, geo, n),
//   reduce(op, out, srcs, n, geo)                  // region kernels on its memory
//   send(p, n, peer, C), recv(p, n, peer, C), wait()             // one step's messages
//   bool send_region(base, geo, peer, C), recv_region(...)       // strided, where it can
//   bool all_reduce(op, in, out, len, C)           // true when it ran it (order-free ops)
//   all_gatherv(out, counts, displs, C)            // in place: member j's chunk at displs[j]
#pragma once

#include <algorithm>
#include <cstddef>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/host/element.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/slot.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/plan/lower.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/observe/hooks.hpp"

namespace spmd::process {

using host::held_range;

/// Where this process's rank sits: its mesh index and the parent communicator's rank of
/// every mesh index.
struct place {
  index_t me = 0;
  std::vector<int> comm_rank;  // by mesh index
  mesh_shape_vec mesh{};
};

/// How a step's mask cuts the mesh into groups, the same on every rank: a transport that
/// makes the groups' communicators in one call over all ranks (ncclCommSplit) keys its
/// cache by it and splits with color `group`, key `index`.
struct group_split {
  dim_mask mask = 0;
  index_t group = 0;  // this rank's group
  index_t index = 0;  // its position in the group
};

/// The members of this rank's group in step s (mesh indices, group order) and its position.
template <class Comm>
struct my_group {
  std::vector<index_t> members;
  index_t pos = 0;
  Comm comm{};
};

template <class Tr>
auto group_of_me(Tr& tr, const step_schedule& s, const layout_spec& from, const place& w) {
  my_group<typename Tr::comm_type> g;
  const group_position gp = group_of(from.mesh, s.mask, w.me);
  g.pos = gp.index;
  std::vector<int> ranks;
  for (index_t j = 0; j < s.group_size; ++j) {
    const index_t m = s.members[static_cast<std::size_t>(gp.group * s.group_size + j)];
    g.members.push_back(m);
    ranks.push_back(w.comm_rank[static_cast<std::size_t>(m)]);
  }
  if (s.group_size > 1) g.comm = tr.group(ranks, group_split{s.mask, gp.group, gp.index});
  return g;
}

/// True when the region is contiguous on one side (the source's or the destination's): a
/// message carries the region's elements in row-major order, so that side can send or
/// receive it in place whatever the other side's layout.
inline bool side_contiguous(const run_geom& g, bool source) {
  if ((source ? g.s_inner : g.d_inner) != 1) return false;
  index_t span = g.run;
  for (int d = g.nd - 1; d >= 0; --d) {
    if ((source ? g.sstr[d] : g.dstr[d]) != span) return false;
    span *= g.ext[d];
  }
  return true;
}

/// The geometry with one side (the source's, or the destination's) replaced by the packed
/// region: its runs back to back in row-major order, as a message carries them.
inline run_geom packed(const run_geom& g, bool source_side) {
  run_geom p = g;
  (source_side ? p.soff : p.doff) = 0;
  (source_side ? p.s_inner : p.d_inner) = 1;
  index_t stride = g.run;
  for (int d = g.nd - 1; d >= 0; --d) {
    (source_side ? p.sstr[d] : p.dstr[d]) = stride;
    stride *= g.ext[d];
  }
  return p;
}

/// tr.copy(out, in, geo) in slices of about 64 KiB along the outermost dim, with the
/// transport's progress() between them where it has one: MPI moves a posted message of a
/// derived datatype in fragments only inside MPI calls, so a peer waiting for this rank's
/// pieces would otherwise wait for the whole copy.
template <class T, class Tr>
void copy_progressing(Tr& tr, T* out, const T* in, const run_geom& geo) {
  constexpr index_t slice_bytes = index_t{64} << 10;
  if constexpr (requires { tr.progress(); }) {
    if (geo.nd >= 1 && geo.count() * static_cast<index_t>(sizeof(T)) > 2 * slice_bytes) {
      const index_t per_outer = geo.count() / geo.ext[0];
      const index_t step = std::max<index_t>(1, slice_bytes / (per_outer * static_cast<index_t>(sizeof(T))));
      for (index_t k = 0; k < geo.ext[0]; k += step) {
        run_geom g = geo;
        g.ext[0] = std::min(step, geo.ext[0] - k);
        g.soff += k * geo.sstr[0];
        g.doff += k * geo.dstr[0];
        tr.copy(out, in, g);
        tr.progress();
      }
      return;
    }
  }
  tr.copy(out, in, geo);
}

/// all_gather / all_to_all: copies between ranks (and the replicate ops, which give a rank
/// the block its group's first member ends with: the same pieces the first receives, or
/// the first's whole block when it keeps the one it had).
template <class T, class Tr, class G>
void run_gather(Tr& tr, const step_schedule& s, const G& g, const place& w, const T* in, T* out) {
  using buf = typename Tr::template buffer<T>;
  const index_t me = w.me;
  const std::size_t n_ranks = s.ranks.size();
  std::vector<index_t> replica_of(n_ranks, -1);  // replica_of[r]: the first member r copies
  std::vector<char> has_replicas(n_ranks, 0);
  for (const sched_op& o : s.ops)
    if (o.code == op_code::replicate) {
      replica_of[static_cast<std::size_t>(o.dst)] = o.src;
      has_replicas[static_cast<std::size_t>(o.src)] = 1;
    }
  std::vector<index_t> pos_of(n_ranks, -1);
  for (std::size_t j = 0; j < g.members.size(); ++j)
    pos_of[static_cast<std::size_t>(g.members[j])] = static_cast<index_t>(j);
  auto peer = [&](index_t r) { return static_cast<int>(pos_of[static_cast<std::size_t>(r)]); };

  std::vector<buf> staged;                        // packed pieces (sent or received)
  std::vector<std::pair<T*, run_geom>> unpack;    // received packed: where, how
  const index_t my_first = replica_of[static_cast<std::size_t>(me)];
  auto keeps = [&](index_t r) {
    return s.ranks[static_cast<std::size_t>(r)].how == disposition::keep;
  };
  // A first member whose block does not change (it already held it: an uneven split left
  // the others empty) sends it whole to its replicas.
  if (my_first >= 0 && keeps(my_first))
    tr.recv(out, s.ranks[static_cast<std::size_t>(me)].elems, peer(my_first), g.comm);
  if (has_replicas[static_cast<std::size_t>(me)] && keeps(me))
    for (index_t r : g.members)
      if (replica_of[static_cast<std::size_t>(r)] == me)
        tr.send(in, s.ranks[static_cast<std::size_t>(me)].elems, peer(r), g.comm);
  // This rank's own pieces are copied after every message is posted, so that the peers can
  // take what this rank sends while it copies (in op order, a large own piece of S(0)->S(1)
  // held back every send behind it).
  std::vector<run_geom> own;
  for (const sched_op& o : s.ops) {
    if (o.code != op_code::copy) continue;
    // Receive: pieces of my block, or of my first member's when I replicate it.
    if (o.dst == me || (my_first >= 0 && o.dst == my_first)) {
      if (o.src == me) {
        own.push_back(o.geo);
      } else if (side_contiguous(o.geo, false)) {
        tr.recv(out + o.geo.doff, o.geo.count(), peer(o.src), g.comm);
      } else if (!tr.recv_region(out, o.geo, peer(o.src), g.comm)) {
        staged.emplace_back(o.geo.count());
        tr.recv(staged.back().data(), o.geo.count(), peer(o.src), g.comm);
        unpack.emplace_back(staged.back().data(), o.geo);
      }
    }
    // Send: my pieces of others' blocks, and to the replicas of their owners. A piece that
    // goes to several ranks is packed once.
    if (o.src == me) {
      const T* packed_piece = nullptr;
      auto send_to = [&](index_t dst) {
        if (dst == me) return;
        if (side_contiguous(o.geo, true)) {
          tr.send(in + o.geo.soff, o.geo.count(), peer(dst), g.comm);
        } else if (!tr.send_region(in, o.geo, peer(dst), g.comm)) {
          if (packed_piece == nullptr) {
            staged.emplace_back(o.geo.count());
            tr.copy(staged.back().data(), in, packed(o.geo, false));
            packed_piece = staged.back().data();
          }
          tr.send(packed_piece, o.geo.count(), peer(dst), g.comm);
        }
      };
      send_to(o.dst);
      if (has_replicas[static_cast<std::size_t>(o.dst)])
        for (index_t r : g.members)
          if (replica_of[static_cast<std::size_t>(r)] == o.dst) send_to(r);
    }
  }
  for (const run_geom& geo : own) copy_progressing(tr, out, in, geo);
  tr.wait();
  for (const auto& [p, geo] : unpack) tr.copy(out, static_cast<const T*>(p), packed(geo, true));
}

/// reduce_scatter: out[box_B(me)] = op over the group, in group order, of in_m[box_B(me)].
template <class T, class Tr, class G>
void run_reduce_scatter(Tr& tr, const step_schedule& s, const G& g, const place& w, const T* in,
                        T* out) {
  using buf = typename Tr::template buffer<T>;
  const index_t me = w.me;
  const index_t n = s.group_size;
  std::vector<buf> staged;
  std::vector<const T*> srcs(static_cast<std::size_t>(n), nullptr);
  index_t my_count = 0;
  for (const sched_op& o : s.ops) {
    if (o.code != op_code::reduce) continue;
    const index_t dst = o.dst;
    index_t dpos = -1;
    for (index_t j = 0; j < n; ++j)
      if (g.members[static_cast<std::size_t>(j)] == dst) dpos = j;
    if (dpos < 0) continue;  // another group's
    const index_t k = o.geo.count();
    if (dst == me) {  // receive every other member's piece
      my_count = k;
      for (index_t j = 0; j < n; ++j) {
        if (j == g.pos) {
          if (side_contiguous(o.geo, true)) {
            srcs[static_cast<std::size_t>(j)] = in + o.geo.soff;
          } else {
            staged.emplace_back(k);
            tr.copy(staged.back().data(), in, packed(o.geo, false));
            srcs[static_cast<std::size_t>(j)] = staged.back().data();
          }
        } else {
          staged.emplace_back(k);
          if (k > 0) tr.recv(staged.back().data(), k, static_cast<int>(j), g.comm);
          srcs[static_cast<std::size_t>(j)] = staged.back().data();
        }
      }
    } else if (k > 0) {  // send mine to dst
      if (side_contiguous(o.geo, true)) {
        tr.send(in + o.geo.soff, k, static_cast<int>(dpos), g.comm);
      } else {
        staged.emplace_back(k);
        tr.copy(staged.back().data(), in, packed(o.geo, false));
        tr.send(staged.back().data(), k, static_cast<int>(dpos), g.comm);
      }
    }
  }
  tr.wait();
  if (my_count > 0) tr.reduce(s.op, out, srcs.data(), n, whole_geom(my_count));
}

/// out = op over the group (n members, this one at `pos`) of every member's `in`, len elements
/// each, in group order; out may be in.
template <class T, class Tr, class C>
void all_reduce_chunks(Tr& tr, reduce_op op, index_t n, index_t pos, C comm, const T* in, T* out,
                       index_t len) {
  using buf = typename Tr::template buffer<T>;
  if (tr.all_reduce(op, in, out, len, comm)) return;
  // Chunk j of every member goes to member j, which reduces it in group order.
  std::vector<index_t> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  for (index_t j = 0; j < n; ++j) {
    const index_t lo = len * j / n, hi = len * (j + 1) / n;
    displs[static_cast<std::size_t>(j)] = lo;
    counts[static_cast<std::size_t>(j)] = hi - lo;
  }
  const index_t mine = counts[static_cast<std::size_t>(pos)];
  const index_t off = displs[static_cast<std::size_t>(pos)];
  buf staged(mine * (n - 1));
  std::vector<const T*> srcs(static_cast<std::size_t>(n));
  index_t slot_k = 0;
  for (index_t j = 0; j < n; ++j) {
    if (j == pos) {
      srcs[static_cast<std::size_t>(j)] = in + off;
      continue;
    }
    T* p = staged.data() + slot_k++ * mine;
    srcs[static_cast<std::size_t>(j)] = p;
    if (mine > 0) tr.recv(p, mine, static_cast<int>(j), comm);
    const index_t c = counts[static_cast<std::size_t>(j)];
    if (c > 0) tr.send(in + displs[static_cast<std::size_t>(j)], c, static_cast<int>(j), comm);
  }
  tr.wait();
  if (mine > 0) tr.reduce(op, out + off, srcs.data(), n, whole_geom(mine));
  tr.all_gatherv(out, counts, displs, pos, comm);
}

/// The local ops of a step whose destination is this rank.
template <class T, class Tr>
void run_local(Tr& tr, const step_schedule& s, index_t me, const T* in, T* out) {
  for (const sched_op& o : s.ops) {
    if (o.dst != me) continue;
    switch (o.code) {
      case op_code::copy: tr.copy(out, in, o.geo); break;
      case op_code::move:
        if (out == in) tr.move(out, in, o.geo);
        else tr.copy(out, in, o.geo);
        break;
      case op_code::fill: tr.fill(out, o.geo, host::identity<T>(s.op)); break;
      case op_code::scale: tr.scale(out, in, o.geo, s.group_size); break;
      default:
        throw std::logic_error("spmd: a local step holds a communicating op");
    }
  }
}

template <class T, class Tr, class Buf>
void run_step(Tr& tr, const plan_step& step, const step_schedule& s, const place& w,
              host::detail::slot<T, Buf>& a, host::detail::slot<T, Buf>& b) {
  const rank_plan& p = s.ranks[static_cast<std::size_t>(w.me)];
  host::detail::dispose(p, a, b);
  const T* in = a.data;
  T* out = b.data;
  switch (s.kind) {
    case step_kind::chunk:
    case step_kind::partition:
    case step_kind::fill: run_local(tr, s, w.me, in, out); break;
    case step_kind::all_gather:
    case step_kind::all_to_all: run_gather(tr, s, group_of_me(tr, s, step.from, w), w, in, out); break;
    case step_kind::reduce_scatter:
      run_reduce_scatter(tr, s, group_of_me(tr, s, step.from, w), w, in, out);
      break;
    case step_kind::all_reduce: {
      if (s.group_size == 1 || p.elems == 0) break;  // kept
      const auto g = group_of_me(tr, s, step.from, w);
      all_reduce_chunks(tr, s.op, s.group_size, g.pos, g.comm, in, out, p.elems);
      break;
    }
  }
}

/// Run checked schedules (build_schedules(p, global)) on this process's local in `in` (a
/// local set of the transport's memory: local_set, device_set), with `tr` moving the data.
/// comm_rank: the parent communicator's rank of every mesh index.
template <class T, class Set, class Tr, class In>
Set run_schedules(Tr& tr, const plan& p, const std::vector<step_schedule>& scheds,
                  const shape_vec& global, std::vector<int> comm_rank, In&& in) {
  using Buf = typename Tr::template buffer<T>;
  const held_range held = in.held_ranks();
  if (held.count() == 0 || scheds.empty()) {  // outside the mesh, or nothing to do
    if constexpr (std::is_const_v<std::remove_reference_t<In>>)
      return Set(in);
    else
      return Set(std::move(in));
  }
  if (held.count() != 1) throw std::logic_error("spmd: a process holds one rank");
  place w;
  w.me = held.lo;
  w.comm_rank = std::move(comm_rank);
  w.mesh = p.steps[0].from.mesh;

  host::detail::slot<T, Buf> a;
  a.shape = in.shape(w.me);
  if constexpr (std::is_const_v<std::remove_reference_t<In>> &&
                requires { Buf(in[w.me].buf.share()); }) {
    a.own = in[w.me].buf.share();  // shared with the input: never written, never copied
    a.data = a.own.data();
  } else if constexpr (std::is_const_v<std::remove_reference_t<In>>) {
    a.data = const_cast<T*>(in.data(w.me));  // borrowed: never written
  } else {
    a.own = in.release(w.me);
    a.data = a.own.data();
  }
  for (std::size_t i = 0; i < scheds.size(); ++i) {
    host::detail::slot<T, Buf> b;
    const plan_step& step = p.steps[static_cast<int>(i)];
    // (On NCCL a step is queued on a stream: its span is the time to queue it.)
    observe::around([&] { run_step<T>(tr, step, scheds[i], w, a, b); },
                    [&] {
                      return observe::on_step(step, static_cast<int>(i), static_cast<int>(scheds.size()), global,
                                              index_t{sizeof(T)}, w.me, 1);
                    });
    if (is_collective(step.kind) && runtime::detail::counting())
      runtime::detail::record_collective(
          step.kind, step.mesh_dims, traffic(step, global, static_cast<index_t>(sizeof(T))).total_bytes);
    a = std::move(b);
  }
  const index_t elems = host::shape_elems(a.shape);
  if (!a.own && elems > 0) {  // still borrowed: copy once
    Buf c(elems);
    tr.copy(c.data(), a.data, whole_geom(elems));
    a.own = std::move(c);
  }
  Set out(in.ranks(), held);
  out.adopt(w.me, std::move(a.own), a.shape);
  return out;
}

}  // namespace spmd::process
