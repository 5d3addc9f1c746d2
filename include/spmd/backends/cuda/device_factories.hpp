// spmd/backends/cuda/device_factories.hpp — tensors made in device memory, nothing through
// the host (issue 28, point 4):
//
//   generate_on_device(spec, global, held, kind, value)   full, zeros, ones, arange: every
//       held rank's block in one launch (block_body.hpp), host::generate's values and
//       Partial rule
//   distribute_on_device(data, n, spec, global, held)      a global tensor already in device
//       memory cut into every held rank's block by one step launch (block_jobs.hpp:
//       distribute_table), then, on a Partial layout, one launch of host::distribute's split
//
// Both queue on the current stream and return at once; the only host-to-device copy is the
// slicing step's table (a few hundred bytes per rank).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/cuda/block_jobs.hpp"
#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/device_set.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/execute.hpp"
#include "spmd/backends/cuda/launch.hpp"

namespace spmd::cuda {

namespace detail {

/// Fresh buffers for the held ranks' blocks, cut from one allocation.
template <class T>
std::vector<device_buffer<T>> block_buffers(const std::vector<block_place>& places, held_range held) {
  std::size_t bytes = 0;
  for (const index_t r : held.indices())
    bytes += device_block::round_up(static_cast<std::size_t>(places[static_cast<std::size_t>(r)].elems) * sizeof(T));
  const device_block block(bytes);
  std::vector<device_buffer<T>> out(places.size());
  std::size_t at = 0;
  for (const index_t r : held.indices()) {
    const index_t n = places[static_cast<std::size_t>(r)].elems;
    out[static_cast<std::size_t>(r)] = device_buffer<T>::slice(block, at, n);
    at += device_block::round_up(static_cast<std::size_t>(n) * sizeof(T));
  }
  return out;
}

/// The held ranks' buffers as a device_set of their blocks' shapes.
template <class T>
device_set<T> adopt_blocks(std::vector<device_buffer<T>>& bufs, const std::vector<block_place>& places,
                           index_t ranks, held_range held) {
  device_set<T> out(ranks, held);
  for (const index_t r : held.indices()) {
    const auto k = static_cast<std::size_t>(r);
    out.adopt(r, std::move(bufs[k]), places[k].shape);
  }
  return out;
}

}  // namespace detail

/// Throws std::invalid_argument, naming both counts, unless n is the element count of `global`.
inline void check_global_count(index_t n, const shape_vec& global, const char* who) {
  const index_t total = shape_elems(global);
  if (n != total)
    throw std::invalid_argument(std::string(who) + ": the global data has " + std::to_string(n) +
                                " elements, the shape " + host::detail::shape_text(global) + " needs " +
                                std::to_string(total));
}

/// The held ranks' blocks of a tensor whose every element is `value` (kind constant) or its
/// global row-major index (kind index), with the factories' rule on Partial placements
/// (host::generate): one launch.
template <class T>
device_set<T> generate_on_device(const layout_spec& spec, const shape_vec& global, held_range held, fill_kind kind,
                                 T value, const char* who) {
  require_device(who);
  const host::detail::partial_info part = host::detail::partial_of(spec);
  if (part.mask != 0) host::check_reduce_op<T>(part.op, who);
  const std::vector<block_place> places = block_places(spec, global);
  std::vector<device_buffer<T>> bufs = detail::block_buffers<T>(places, held);
  const T identity = host::identity<T>(part.op);
  const cudaStream_t stream = current_stream();
  auto jobs = make_job_launcher<block_job<T>, block_geom>(
      [&](const job_batch<block_job<T>, block_geom>& b) { kernels::generate<T>(b, kind, value, identity, stream); });
  add_blocks(jobs, places, held.indices(), [&](index_t r, const block_place& p) {
    return block_job<T>{bufs[static_cast<std::size_t>(r)].data(), p.elems, p.base, p.part, p.identity};
  });
  jobs.finish();
  return detail::adopt_blocks(bufs, places, spec.mesh_size(), held);
}

/// The held ranks' blocks of the row-major global tensor of `n` elements at `data` (device
/// memory on the current device), as host::distribute cuts and splits it. Throws
/// std::invalid_argument when n is not the shape's element count.
/// @pre spec.mesh_size() <= max_launch_ranks (the slicing launch's pointers).
template <class T>
device_set<T> distribute_on_device(const T* data, index_t n, const layout_spec& spec, const shape_vec& global,
                                   held_range held, const char* who) {
  require_device(who);
  check_global_count(n, global, who);
  const host::detail::partial_info part = host::detail::partial_of(spec);
  if (part.mask != 0) host::check_reduce_op<T>(part.op, who);
  const std::vector<block_place> places = block_places(spec, global);
  std::vector<device_buffer<T>> bufs = detail::block_buffers<T>(places, held);
  const cudaStream_t stream = current_stream();

  step_table t = distribute_table(spec, global, held);
  // 16-byte units need the input aligned too (the outputs are: block_buffers' slices).
  const bool wide = reinterpret_cast<std::uintptr_t>(data) % 16 == 0 && finish(t, sizeof(T));
  if (!wide) mark_uniform(t);
  if (t.items > 0) {
    rank_ptrs<T> ptrs{};
    ptrs.in[0] = data;
    for (const index_t r : held.indices()) ptrs.out[r] = bufs[static_cast<std::size_t>(r)].data();
    if (fits_inline(t)) {  // a small table goes as the launch's parameter: nothing uploaded
      const inline_table small = make_inline(t);
      launch_step<T>(t.view(), wide, ptrs, spec.mesh_size(), stream, &small);
    } else {
      const table_layout l = layout_of(t);
      std::vector<unsigned char> staged(l.bytes);
      pack(t, staged.data());
      const device_block table(l.bytes);  // freed on the stream after the launch
      // From pageable memory: returns once `staged` is copied out, so it may go.
      check(cudaMemcpyAsync(table.data(), staged.data(), l.bytes, cudaMemcpyHostToDevice, stream),
            "cudaMemcpyAsync (distribute table)");
      launch_step<T>(view_at(t, static_cast<const unsigned char*>(table.data())), wide, ptrs, spec.mesh_size(), stream);
    }
  }

  const index_t group = group_size(spec.mesh, part.mask);
  if (part.mask != 0 && group > 1) {
    auto jobs = make_job_launcher<block_job<T>, no_geom>(
        [&](const job_batch<block_job<T>>& b) { kernels::split_partial<T>(b, part.op, group, stream); });
    add_blocks(jobs, places, held.indices(), [&](index_t r, const block_place& p) {
      return block_job<T>{bufs[static_cast<std::size_t>(r)].data(), p.elems, p.base, p.part, false};
    });
    jobs.finish();
  }
  return detail::adopt_blocks(bufs, places, spec.mesh_size(), held);
}

}  // namespace spmd::cuda
