// spmd/backends/cuda/collectives.hpp — collectives on every rank's local tensor with all
// ranks on one GPU: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all over the
// groups of a set of mesh dims, as the simulation's (backends/sim/collectives.hpp) — the
// same results bit for bit, the same chunking, counted by comm_counter.
//
//   spmd::cuda::device_set<float> y = spmd::cuda::all_reduce<Mesh>(x, spmd::reduce_op::sum, mask);
//
// Each collective is one launch of the step kernel: its box operations are built on the host
// as a step table (collectives_table.hpp), uploaded, and run. The table upload makes these unsuitable for graph capture;
// redistribute (whose tables are cached) is the capturable path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/cuda/device_set.hpp"
#include "spmd/backends/cuda/execute.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/host/element.hpp"
#include "spmd/backends/cuda/collectives_table.hpp"

namespace spmd::cuda {

namespace coll_detail {

template <class T, class Mesh>
void check_input(const device_set<T>& x, const char* who) {
  if (x.ranks() != Mesh::size || !x.holds_all())
    throw std::invalid_argument(std::string("spmd::cuda::") + who + ": the input holds " +
                                std::to_string(x.held_ranks().count()) + " of " + std::to_string(x.ranks()) +
                                " locals; the mesh has " + std::to_string(Mesh::size) + " ranks, all needed");
}

/// Runs `tb` from `in` into `out` (shaped) in one launch; the table travels to the device
/// with the launch's stream order.
template <class T>
device_set<T> launch(const table& tb, const device_set<T>& in) {
  device_set<T> out(in.ranks());
  for (index_t r = 0; r < in.ranks(); ++r) out.assign(r, tb.out[static_cast<std::size_t>(r)]);
  if (tb.t.items == 0) return out;
  std::vector<unsigned char> staged(layout_of(tb.t).bytes);
  pack(tb.t, staged.data());
  device_buffer<unsigned char> dev(static_cast<index_t>(staged.size()));
  check(cudaMemcpyAsync(dev.data(), staged.data(), staged.size(), cudaMemcpyHostToDevice, current_stream()),
        "cudaMemcpyAsync (collective table)");
  const step_view v = view_at(tb.t, dev.data());
  if (in.ranks() > max_launch_ranks)
    throw std::invalid_argument("spmd::cuda: a collective over " + std::to_string(in.ranks()) +
                                " ranks; one launch takes at most " + std::to_string(max_launch_ranks));
  rank_ptrs<T> p{};
  for (index_t r = 0; r < in.ranks(); ++r) {
    p.in[r] = in.data(r);
    p.out[r] = out.data(r);
  }
  kernels::step<T>(v, p, current_stream());
  return out;
}

template <class T>
std::vector<shape_vec> shapes_of(const device_set<T>& x) {
  std::vector<shape_vec> s;
  for (index_t r = 0; r < x.ranks(); ++r) s.push_back(x.shape(r));
  return s;
}

inline void record(step_kind k, dim_mask group, index_t bytes) {
  if (runtime::detail::comm_counter_top() != nullptr) runtime::detail::record_collective(k, group, bytes);
}

}  // namespace coll_detail

/// Every member of each group gets op over its group's locals (equal shapes within a
/// group), combined in group order (avg: the sum divided by the group size).
template <class Mesh, class T>
device_set<T> all_reduce(const device_set<T>& x, reduce_op op, dim_mask group = coll_detail::whole_mesh_mask<Mesh>()) {
  coll_detail::check_input<T, Mesh>(x, "all_reduce");
  const coll_detail::table tb = all_reduce_table<Mesh, T>(coll_detail::shapes_of(x), op, group);
  device_set<T> out = coll_detail::launch(tb, x);
  coll_detail::record(step_kind::all_reduce, group, tb.received * index_t{sizeof(T)});
  return out;
}

/// Every member of each group gets a copy of the local of the member at `src_rank`'s position
/// in its group. Locals may differ in shape.
template <class Mesh, class T>
device_set<T> broadcast(const device_set<T>& x, index_t src_rank, dim_mask group = coll_detail::whole_mesh_mask<Mesh>()) {
  coll_detail::check_input<T, Mesh>(x, "broadcast");
  const coll_detail::table tb = broadcast_table<Mesh, T>(coll_detail::shapes_of(x), src_rank, group);
  device_set<T> out = coll_detail::launch(tb, x);
  if (runtime::detail::comm_counter_top() != nullptr)
    runtime::detail::record_broadcast(group, tb.received * index_t{sizeof(T)});
  return out;
}

/// Every member of each group gets its group's locals concatenated along `dim` in group
/// order (sizes along `dim` may differ; the other dims must agree).
template <class Mesh, class T>
device_set<T> all_gather(const device_set<T>& x, int dim, dim_mask group = coll_detail::whole_mesh_mask<Mesh>()) {
  coll_detail::check_input<T, Mesh>(x, "all_gather");
  const coll_detail::table tb = all_gather_table<Mesh, T>(coll_detail::shapes_of(x), dim, group);
  device_set<T> out = coll_detail::launch(tb, x);
  coll_detail::record(step_kind::all_gather, group, tb.received * index_t{sizeof(T)});
  return out;
}

/// op over each group's locals (equal shapes), then member j keeps torch.chunk piece j of the
/// result along `dim`.
template <class Mesh, class T>
device_set<T> reduce_scatter(const device_set<T>& x, reduce_op op, int dim,
                             dim_mask group = coll_detail::whole_mesh_mask<Mesh>()) {
  coll_detail::check_input<T, Mesh>(x, "reduce_scatter");
  const coll_detail::table tb = reduce_scatter_table<Mesh, T>(coll_detail::shapes_of(x), op, dim, group);
  device_set<T> out = coll_detail::launch(tb, x);
  coll_detail::record(step_kind::reduce_scatter, group, tb.received * index_t{sizeof(T)});
  return out;
}

/// Each member's local is split torch.chunk-style along `split_dim`; member j gets piece j of
/// every member, concatenated along `concat_dim` in group order.
template <class Mesh, class T>
device_set<T> all_to_all(const device_set<T>& x, int split_dim, int concat_dim,
                         dim_mask group = coll_detail::whole_mesh_mask<Mesh>()) {
  coll_detail::check_input<T, Mesh>(x, "all_to_all");
  const coll_detail::table tb = all_to_all_table<Mesh, T>(coll_detail::shapes_of(x), split_dim, concat_dim, group);
  device_set<T> out = coll_detail::launch(tb, x);
  coll_detail::record(step_kind::all_to_all, group, tb.received * index_t{sizeof(T)});
  return out;
}

}  // namespace spmd::cuda
