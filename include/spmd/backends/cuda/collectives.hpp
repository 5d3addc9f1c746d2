// spmd/backends/cuda/collectives.hpp — collectives on every rank's local tensor with all
// ranks on one GPU: all_reduce, broadcast, all_gather, reduce_scatter, all_to_all over the
// groups of a set of mesh dims, as the simulation's (backends/sim/collectives.hpp) — the
// same results bit for bit, the same chunking, counted by comm_counter.
//
//   spmd::cuda::device_set<float> y = spmd::cuda::all_reduce<Mesh>(x, spmd::reduce_op::sum, mask);
//
// Each collective is one launch of the step kernel: its box operations are built on the host
// as a step table (collectives_table.hpp), finished and uploaded once per device, arguments
// and input shapes, and kept; a collective that has run once can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime_api.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
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

/// A collective's table as the kernel runs it (finish: 16-byte units, ops found directly), in
/// device memory, with every member's output shape and the bytes a member receives.
struct uploaded {
  step_view view{};
  bool wide = false;
  std::shared_ptr<const inline_table> small;  // the table inline, for a small collective
  std::vector<shape_vec> out;
  index_t received = 0;
  std::unique_ptr<void, void (*)(void*)> memory{nullptr, [](void* p) { (void)cudaFree(p); }};
};

/// The uploaded table of a collective over Mesh on locals of T: `key` names the collective
/// and its arguments; the device and the input shapes complete it. Built (build(), which
/// checks the input and throws), finished and uploaded on first use, then kept for the life
/// of the process like a plan's tables: a repeated collective builds and uploads nothing, so
/// it can be captured in a CUDA graph once it has run.
template <class Mesh, class T, class Build>
const uploaded& cached_table(std::string key, const std::vector<shape_vec>& shapes, Build&& build) {
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  key.append(reinterpret_cast<const char*>(&dev), sizeof(dev));
  for (const shape_vec& sh : shapes) {
    const int nd = sh.size();
    key.append(reinterpret_cast<const char*>(&nd), sizeof(nd));
    for (int d = 0; d < nd; ++d) key.append(reinterpret_cast<const char*>(&sh[d]), sizeof(index_t));
  }
  // Never destroyed: the CUDA runtime may be gone by the time static destructors run.
  static auto* cache = new std::map<std::string, uploaded>();
  static auto* mutex = new std::mutex();
  const std::lock_guard<std::mutex> lock(*mutex);
  if (auto it = cache->find(key); it != cache->end()) return it->second;
  table tb = build();
  if (static_cast<index_t>(shapes.size()) > max_launch_ranks)
    throw std::invalid_argument("spmd::cuda: a collective over " + std::to_string(shapes.size()) +
                                " ranks; one launch takes at most " + std::to_string(max_launch_ranks));
  uploaded u;
  u.wide = finish(tb.t, index_t{sizeof(T)});
  u.out = tb.out;
  u.received = tb.received;
  u.view = tb.t.view();
  if (fits_inline(tb.t)) u.small = std::make_shared<const inline_table>(make_inline(tb.t));
  if (tb.t.items > 0) {
    detail::refuse_in_capture("spmd::cuda: a collective");
    std::vector<unsigned char> staged(layout_of(tb.t).bytes);
    pack(tb.t, staged.data());
    void* mem = nullptr;
    check(cudaMalloc(&mem, staged.size()), "cudaMalloc (collective table)");
    u.memory.reset(mem);
    check(cudaMemcpy(mem, staged.data(), staged.size(), cudaMemcpyHostToDevice), "cudaMemcpy (collective table)");
    u.view = view_at(tb.t, static_cast<const unsigned char*>(mem));
  }
  return cache->emplace(std::move(key), std::move(u)).first->second;
}

/// Runs `u` from `in` into fresh locals (one allocation for every member) in one launch.
template <class T>
device_set<T> launch(const uploaded& u, const device_set<T>& in) {
  const index_t n = in.ranks();
  std::size_t bytes = 0;
  for (const shape_vec& sh : u.out) bytes += device_block::round_up(static_cast<std::size_t>(shape_elems(sh)) * sizeof(T));
  const device_block block(bytes);
  device_set<T> out(n);
  std::size_t at = 0;
  for (index_t r = 0; r < n; ++r) {
    const shape_vec& sh = u.out[static_cast<std::size_t>(r)];
    out.adopt(r, device_buffer<T>::slice(block, at, shape_elems(sh)), sh);
    at += device_block::round_up(static_cast<std::size_t>(shape_elems(sh)) * sizeof(T));
  }
  if (u.view.items == 0) return out;
  rank_ptrs<T> p{};
  for (index_t r = 0; r < n; ++r) {
    p.in[r] = in.data(r);
    p.out[r] = out.data(r);
  }
  launch_step<T>(u.view, u.wide, p, n, current_stream(), u.small.get());
  return out;
}

/// The key of a collective's table: its name and arguments, as bytes.
template <class... A>
std::string key_of(const char* who, const A&... a) {
  std::string k(who);
  (k.append(reinterpret_cast<const char*>(&a), sizeof(a)), ...);
  return k;
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
  const std::vector<shape_vec> shapes = coll_detail::shapes_of(x);
  const coll_detail::uploaded& tb = coll_detail::cached_table<Mesh, T>(
      coll_detail::key_of("all_reduce", op, group), shapes, [&] { return all_reduce_table<Mesh, T>(shapes, op, group); });
  device_set<T> out = coll_detail::launch(tb, x);
  coll_detail::record(step_kind::all_reduce, group, tb.received * index_t{sizeof(T)});
  return out;
}

/// Every member of each group gets a copy of the local of the member at `src_rank`'s position
/// in its group. Locals may differ in shape.
template <class Mesh, class T>
device_set<T> broadcast(const device_set<T>& x, index_t src_rank, dim_mask group = coll_detail::whole_mesh_mask<Mesh>()) {
  coll_detail::check_input<T, Mesh>(x, "broadcast");
  const std::vector<shape_vec> shapes = coll_detail::shapes_of(x);
  const coll_detail::uploaded& tb = coll_detail::cached_table<Mesh, T>(
      coll_detail::key_of("broadcast", src_rank, group), shapes, [&] { return broadcast_table<Mesh, T>(shapes, src_rank, group); });
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
  const std::vector<shape_vec> shapes = coll_detail::shapes_of(x);
  const coll_detail::uploaded& tb = coll_detail::cached_table<Mesh, T>(
      coll_detail::key_of("all_gather", dim, group), shapes, [&] { return all_gather_table<Mesh, T>(shapes, dim, group); });
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
  const std::vector<shape_vec> shapes = coll_detail::shapes_of(x);
  const coll_detail::uploaded& tb = coll_detail::cached_table<Mesh, T>(
      coll_detail::key_of("reduce_scatter", op, dim, group), shapes, [&] { return reduce_scatter_table<Mesh, T>(shapes, op, dim, group); });
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
  const std::vector<shape_vec> shapes = coll_detail::shapes_of(x);
  const coll_detail::uploaded& tb = coll_detail::cached_table<Mesh, T>(
      coll_detail::key_of("all_to_all", split_dim, concat_dim, group), shapes, [&] { return all_to_all_table<Mesh, T>(shapes, split_dim, concat_dim, group); });
  device_set<T> out = coll_detail::launch(tb, x);
  coll_detail::record(step_kind::all_to_all, group, tb.received * index_t{sizeof(T)});
  return out;
}

}  // namespace spmd::cuda
