// spmd/backends/mpi/execute.hpp — run a plan's steps on this process's rank, with MPI.
//
// Every step is lowered by the same constexpr function the simulation uses
// (spmd/plan/lower.hpp: build_schedule); this file only decides, for this process's mesh
// index, which of the step's box operations it takes part in, and moves their data:
//
//   chunk, partition, fill   local: the ops whose destination is this rank, host kernels;
//   all_gather, all_to_all   each copy op whose source and destination differ becomes one
//                            message on the group's communicator (MPI_Isend/MPI_Irecv, one
//                            per peer). A piece that is one contiguous run is sent from
//                            and received into the local buffers themselves; others are
//                            packed and unpacked with the host copy kernels. Exact boxes:
//                            uneven and empty pieces are no special case (an empty piece
//                            is no message);
//   reduce_scatter           every member sends its piece of each destination's block;
//                            the destination reduces the pieces in group order;
//   all_reduce               the block is cut into one chunk per member; member j
//                            receives chunk j of every member, reduces it in group order
//                            and MPI_Allgatherv shares the chunks (bandwidth of a ring:
//                            2 (n - 1) / n of the block per rank). max, min and integer
//                            sum/product give the same bits in any order, so those run
//                            as one MPI_Allreduce with spmd's own MPI_Op (NaN-propagating
//                            max/min, wrapping integers, bf16 through float).
//
// Reductions in group order with the simulation's kernels are why the results equal the
// simulation's bit for bit, on every element type and op.
#pragma once

#include "spmd/backends/mpi/mpi_c.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/backends/host/buffer.hpp"
#include "spmd/backends/host/element.hpp"
#include "spmd/backends/host/kernels.hpp"
#include "spmd/backends/host/local_set.hpp"
#include "spmd/backends/host/slot.hpp"
#include "spmd/backends/mpi/communicators.hpp"
#include "spmd/backends/mpi/environment.hpp"
#include "spmd/backends/mpi/names.hpp"
#include "spmd/plan/lower.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/runtime/comm_counter.hpp"

namespace spmd::mpi::detail {

// --- reductions MPI may run in any order --------------------------------------------------

template <class T>
constexpr bool order_free(reduce_op op) {
  return op == reduce_op::max || op == reduce_op::min ||
         (std::is_integral_v<T> && (op == reduce_op::sum || op == reduce_op::product));
}

template <class T, reduce_op Op>
void combine_fn(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = combine<Op>(a[i], b[i]);  // commutative: any order
}

/// spmd's MPI_Op for (T, op), made once.
template <class T>
MPI_Op mpi_op(reduce_op op) {
  auto make = [](MPI_User_function* f) {
    MPI_Op o;
    check(MPI_Op_create(f, 1, &o), "MPI_Op_create");
    return o;
  };
  switch (op) {
    case reduce_op::max: {
      static const MPI_Op o = make(&combine_fn<T, reduce_op::max>);
      return o;
    }
    case reduce_op::min: {
      static const MPI_Op o = make(&combine_fn<T, reduce_op::min>);
      return o;
    }
    case reduce_op::product: {
      static const MPI_Op o = make(&combine_fn<T, reduce_op::product>);
      return o;
    }
    default: {
      static const MPI_Op o = make(&combine_fn<T, reduce_op::sum>);
      return o;
    }
  }
}

// --- one step -------------------------------------------------------------------------------

/// Where this process's rank sits: its mesh index and the communicator rank of every mesh
/// index.
struct place {
  MPI_Comm parent = MPI_COMM_NULL;
  index_t me = 0;
  std::vector<int> comm_rank;  // by mesh index
};

/// The members of this rank's group in step s (mesh indices, group order) and its position.
struct my_group {
  std::vector<index_t> members;
  index_t pos = 0;
  MPI_Comm comm = MPI_COMM_NULL;
};

inline my_group group_of_me(const step_schedule& s, const layout_spec& from, const place& w) {
  my_group g;
  const group_position gp = group_of(from.mesh, s.mask, w.me);
  g.pos = gp.index;
  std::vector<int> ranks;
  for (index_t j = 0; j < s.group_size; ++j) {
    const index_t m = s.members[static_cast<std::size_t>(gp.group * s.group_size + j)];
    g.members.push_back(m);
    ranks.push_back(w.comm_rank[static_cast<std::size_t>(m)]);
  }
  if (s.group_size > 1) g.comm = group_comm(w.parent, ranks);
  return g;
}

/// Posted messages of one step, finished together.
struct messages {
  std::vector<MPI_Request> reqs;
  std::vector<MPI_Datatype> types;  // derived datatypes of posted messages, freed by wait()
  void recv(void* p, index_t n, MPI_Datatype t, int peer, MPI_Comm c) {
    reqs.emplace_back();
    check(MPI_Irecv(p, count_of(n, "a message"), t, peer, 0, c, &reqs.back()), "MPI_Irecv");
  }
  void send(const void* p, index_t n, MPI_Datatype t, int peer, MPI_Comm c) {
    reqs.emplace_back();
    check(MPI_Isend(p, count_of(n, "a message"), t, peer, 0, c, &reqs.back()), "MPI_Isend");
  }
  void wait() {
    if (!reqs.empty())
      check(MPI_Waitall(static_cast<int>(reqs.size()), reqs.data(), MPI_STATUSES_IGNORE),
            "MPI_Waitall");
    reqs.clear();
    for (MPI_Datatype& t : types) MPI_Type_free(&t);
    types.clear();
  }
  ~messages() {
    for (MPI_Datatype& t : types) MPI_Type_free(&t);
  }
};


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

/// Pieces of at least this many bytes that are not one run travel as MPI derived datatypes
/// (the runs where they lie, no packing by spmd); smaller ones are packed, which costs less
/// than making a datatype (bench/RESULTS.md).
#ifndef SPMD_MPI_DATATYPE_MIN_BYTES
#define SPMD_MPI_DATATYPE_MIN_BYTES (64 * 1024)
#endif
inline constexpr index_t datatype_min_bytes = SPMD_MPI_DATATYPE_MIN_BYTES;

/// An MPI datatype for one side of a piece: runs of `run` contiguous elements at the outer
/// strides of that side, element type `elem`. Freed by the caller after the message.
inline MPI_Datatype region_type(const run_geom& g, bool source, MPI_Datatype elem,
                                std::size_t elem_bytes) {
  MPI_Datatype t;
  check(MPI_Type_contiguous(count_of(g.run, "a run"), elem, &t), "MPI_Type_contiguous");
  for (int d = g.nd - 1; d >= 0; --d) {
    MPI_Datatype outer;
    const index_t stride = source ? g.sstr[d] : g.dstr[d];
    check(MPI_Type_create_hvector(count_of(g.ext[d], "a region"), 1,
                                  static_cast<MPI_Aint>(stride) * static_cast<MPI_Aint>(elem_bytes),
                                  t, &outer),
          "MPI_Type_create_hvector");
    MPI_Type_free(&t);
    t = outer;
  }
  check(MPI_Type_commit(&t), "MPI_Type_commit");
  return t;
}

/// True when a piece should travel as derived datatypes.
template <class T>
bool as_datatype(const run_geom& g) {
  return g.contiguous() && g.nd > 0 &&
         static_cast<std::size_t>(g.count()) * sizeof(T) >= static_cast<std::size_t>(datatype_min_bytes);
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

/// all_gather / all_to_all: copies between ranks (and the replicate ops, which give a rank
/// the block its group's first member ends with: the same pieces the first receives, or
/// the first's whole block when it keeps the one it had).
template <class T>
void run_gather(const step_schedule& s, const my_group& g, const place& w, const T* in, T* out) {
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

  const MPI_Datatype t = element_type(sizeof(T));
  messages msg;
  std::vector<buffer<T>> staged;                       // packed pieces (sent or received)
  std::vector<std::pair<T*, run_geom>> unpack;          // received packed: where, how
  const index_t my_first = replica_of[static_cast<std::size_t>(me)];
  auto keeps = [&](index_t r) {
    return s.ranks[static_cast<std::size_t>(r)].how == disposition::keep;
  };
  // A first member whose block does not change (it already held it: an uneven split left
  // the others empty) sends it whole to its replicas.
  if (my_first >= 0 && keeps(my_first))
    msg.recv(out, s.ranks[static_cast<std::size_t>(me)].elems, t,
             static_cast<int>(pos_of[my_first]), g.comm);
  if (has_replicas[static_cast<std::size_t>(me)] && keeps(me))
    for (index_t r : g.members)
      if (replica_of[static_cast<std::size_t>(r)] == me)
        msg.send(in, s.ranks[static_cast<std::size_t>(me)].elems, t,
                 static_cast<int>(pos_of[r]), g.comm);
  for (const sched_op& o : s.ops) {
    if (o.code != op_code::copy) continue;
    // Receive: pieces of my block, or of my first member's when I replicate it.
    if (o.dst == me || (my_first >= 0 && o.dst == my_first)) {
      if (o.src == me) {
        copy_region(out, in, o.geo);
      } else if (side_contiguous(o.geo, false)) {
        msg.recv(out + o.geo.doff, o.geo.count(), t, static_cast<int>(pos_of[o.src]), g.comm);
      } else if (as_datatype<T>(o.geo)) {
        msg.types.push_back(region_type(o.geo, false, t, sizeof(T)));
        msg.recv(out + o.geo.doff, 1, msg.types.back(), static_cast<int>(pos_of[o.src]), g.comm);
      } else {
        staged.emplace_back(o.geo.count());
        msg.recv(staged.back().data(), o.geo.count(), t, static_cast<int>(pos_of[o.src]),
                 g.comm);
        unpack.emplace_back(staged.back().data(), o.geo);
      }
    }
    // Send: my pieces of others' blocks, and to the replicas of their owners.
    if (o.src == me) {
      auto send_to = [&](index_t dst) {
        if (dst == me) return;
        if (side_contiguous(o.geo, true)) {
          msg.send(in + o.geo.soff, o.geo.count(), t, static_cast<int>(pos_of[dst]), g.comm);
        } else if (as_datatype<T>(o.geo)) {
          msg.types.push_back(region_type(o.geo, true, t, sizeof(T)));
          msg.send(in + o.geo.soff, 1, msg.types.back(), static_cast<int>(pos_of[dst]), g.comm);
        } else {
          staged.emplace_back(o.geo.count());
          copy_region(staged.back().data(), in, packed(o.geo, false));
          msg.send(staged.back().data(), o.geo.count(), t, static_cast<int>(pos_of[dst]),
                   g.comm);
        }
      };
      send_to(o.dst);
      if (has_replicas[static_cast<std::size_t>(o.dst)])
        for (index_t r : g.members)
          if (replica_of[static_cast<std::size_t>(r)] == o.dst) send_to(r);
    }
  }
  msg.wait();
  for (const auto& [p, geo] : unpack) copy_region(out, static_cast<const T*>(p), packed(geo, true));
}

/// reduce_scatter: out[box_B(me)] = op over the group, in group order, of in_m[box_B(me)].
template <class T>
void run_reduce_scatter(const step_schedule& s, const my_group& g, const place& w, const T* in,
                        T* out) {
  const index_t me = w.me;
  const MPI_Datatype t = element_type(sizeof(T));
  const index_t n = s.group_size;
  messages msg;
  std::vector<buffer<T>> staged;
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
            copy_region(staged.back().data(), in, packed(o.geo, false));
            srcs[static_cast<std::size_t>(j)] = staged.back().data();
          }
        } else {
          staged.emplace_back(k);
          msg.recv(staged.back().data(), k, t, static_cast<int>(j), g.comm);
          srcs[static_cast<std::size_t>(j)] = staged.back().data();
        }
      }
    } else if (k > 0) {  // send mine to dst
      if (side_contiguous(o.geo, true)) {
        msg.send(in + o.geo.soff, k, t, static_cast<int>(dpos), g.comm);
      } else {
        staged.emplace_back(k);
        copy_region(staged.back().data(), in, packed(o.geo, false));
        msg.send(staged.back().data(), k, t, static_cast<int>(dpos), g.comm);
      }
    }
  }
  msg.wait();
  if (my_count > 0) reduce_region(s.op, out, srcs.data(), n, whole_geom(my_count));
}

/// out = op over the group (n members, this one at `pos`) of every member's `in`, len elements
/// each, in group order; out may be in.
template <class T>
void all_reduce_chunks(reduce_op op, index_t n, index_t pos, MPI_Comm comm, const T* in, T* out,
                       index_t len) {
  const MPI_Datatype t = element_type(sizeof(T));
  if (order_free<T>(op)) {
    check(MPI_Allreduce(in == out ? MPI_IN_PLACE : in, out, count_of(len, "an all_reduce"), t,
                        mpi_op<T>(op), comm),
          "MPI_Allreduce");
    return;
  }
  // Chunk j of every member goes to member j, which reduces it in group order.
  std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  for (index_t j = 0; j < n; ++j) {
    const index_t lo = len * j / n, hi = len * (j + 1) / n;
    displs[static_cast<std::size_t>(j)] = count_of(lo, "an all_reduce");
    counts[static_cast<std::size_t>(j)] = count_of(hi - lo, "an all_reduce");
  }
  const index_t mine = counts[static_cast<std::size_t>(pos)];
  const index_t off = displs[static_cast<std::size_t>(pos)];
  buffer<T> staged(mine * (n - 1));
  std::vector<const T*> srcs(static_cast<std::size_t>(n));
  messages msg;
  index_t slot_k = 0;
  for (index_t j = 0; j < n; ++j) {
    if (j == pos) {
      srcs[static_cast<std::size_t>(j)] = in + off;
      continue;
    }
    T* p = staged.data() + slot_k++ * mine;
    srcs[static_cast<std::size_t>(j)] = p;
    if (mine > 0) msg.recv(p, mine, t, static_cast<int>(j), comm);
    const int c = counts[static_cast<std::size_t>(j)];
    if (c > 0) msg.send(in + displs[static_cast<std::size_t>(j)], c, t, static_cast<int>(j), comm);
  }
  msg.wait();
  if (mine > 0) reduce_region(op, out + off, srcs.data(), n, whole_geom(mine));
  check(MPI_Allgatherv(MPI_IN_PLACE, 0, t, out, counts.data(), displs.data(), t, comm),
        "MPI_Allgatherv");
}

/// The local ops of a step whose destination is this rank.
template <class T>
void run_local(const step_schedule& s, index_t me, const T* in, T* out) {
  for (const sched_op& o : s.ops) {
    if (o.dst != me) continue;
    switch (o.code) {
      case op_code::copy: copy_region(out, in, o.geo); break;
      case op_code::move:
        if (out == in) move_region(out, in, o.geo);
        else copy_region(out, in, o.geo);
        break;
      case op_code::fill: fill_region(out, o.geo, identity<T>(s.op)); break;
      case op_code::scale: scale_region(out, in, o.geo, s.group_size); break;
      default:
        throw std::logic_error("spmd::mpi: a local step holds a communicating op");
    }
  }
}

template <class T>
void run_step(const plan_step& step, const step_schedule& s, const place& w, slot<T>& a,
              slot<T>& b) {
  const rank_plan& p = s.ranks[static_cast<std::size_t>(w.me)];
  dispose(p, a, b);
  const T* in = a.data;
  T* out = b.data;
  switch (s.kind) {
    case step_kind::chunk:
    case step_kind::partition:
    case step_kind::fill: run_local(s, w.me, in, out); break;
    case step_kind::all_gather:
    case step_kind::all_to_all: {
      const my_group g = group_of_me(s, step.from, w);
      run_gather(s, g, w, in, out);
      break;
    }
    case step_kind::reduce_scatter: {
      const my_group g = group_of_me(s, step.from, w);
      run_reduce_scatter(s, g, w, in, out);
      break;
    }
    case step_kind::all_reduce: {
      if (s.group_size == 1 || p.elems == 0) break;  // kept
      const my_group g = group_of_me(s, step.from, w);
      all_reduce_chunks(s.op, s.group_size, g.pos, g.comm, in, out, p.elems);
      break;
    }
  }
}

/// Run checked schedules (build_schedules(p, global)) on this process's locals.
/// comm_rank: the communicator rank of every mesh index.
template <class T, class In>
local_set<T> run_schedules(const plan& p, const std::vector<step_schedule>& scheds,
                           const shape_vec& global, std::vector<int> comm_rank, In&& in) {
  const held_range held = in.held_ranks();
  if (held.count() == 0 || scheds.empty()) {  // outside the mesh, or nothing to do
    if constexpr (std::is_const_v<std::remove_reference_t<In>>)
      return local_set<T>(in);
    else
      return local_set<T>(std::move(in));
  }
  if (held.count() != 1) throw std::logic_error("spmd::mpi: a process holds one rank");
  place w;
  w.parent = communicator();
  w.me = held.lo;
  w.comm_rank = std::move(comm_rank);

  slot<T> a;
  a.shape = in.shape(w.me);
  if constexpr (std::is_const_v<std::remove_reference_t<In>>) {
    a.data = const_cast<T*>(in.data(w.me));  // borrowed: never written
  } else {
    a.own = std::move(in[w.me].buf);
    a.data = a.own.data();
  }
  for (std::size_t i = 0; i < scheds.size(); ++i) {
    slot<T> b;
    const plan_step& step = p.steps[static_cast<int>(i)];
    run_step<T>(step, scheds[i], w, a, b);
    if (is_collective(step.kind) && counting())
      record_collective(step.kind, step.mesh_dims,
                        traffic(step, global, static_cast<index_t>(sizeof(T))).total_bytes);
    a = std::move(b);
  }
  const index_t elems = shape_elems(a.shape);
  if (!a.own && elems > 0) {  // still borrowed: copy once
    buffer<T> c(elems);
    copy_bytes(c.data(), a.data, static_cast<std::size_t>(elems) * sizeof(T));
    a.own = std::move(c);
  }
  local_set<T> out(in.ranks(), held);
  out.adopt(w.me, std::move(a.own), a.shape);
  return out;
}

}  // namespace spmd::mpi::detail
