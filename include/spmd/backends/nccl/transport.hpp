// spmd/backends/nccl/transport.hpp — how the per-rank executor (backends/process/execute.hpp)
// moves data with NCCL: this rank's local in GPU memory, the CUDA backend's region kernels,
// NCCL on the current stream.
//
//   regions       copy (cudaMemcpyAsync when both sides are one run), move, fill, scale and
//                 the group-order reduction: kernels/region.cuh, one launch per box;
//   messages      send/recv are collected and issued by wait() as one ncclGroupStart ...
//                 ncclSend/ncclRecv ... ncclGroupEnd (bytes, ncclUint8) on the current stream,
//                 after the pack kernels and before the unpack kernels of the step: pack ->
//                 NCCL -> unpack in stream order, the host never waits. Uneven and empty
//                 pieces are exact boxes (an empty piece is no message), no padding;
//   all_reduce    NCCL's own (ncclAllReduce) where its order cannot change a bit: integer
//                 sum/product/max/min. Floating sums and products go in group order (the
//                 executor's reduce-scatter by send/recv and all-gather: the bytes of a ring,
//                 2 (n - 1) / n of the block per rank) unless the process chose NCCL's order
//                 with set_float_reductions(float_reductions::nccl), which is then not bit for
//                 bit the simulation's (docs/backends.md); floating max/min always in group
//                 order (NCCL's max does not promise that NaN wins).
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/nccl/communicator.hpp"
#include "spmd/backends/nccl/error.hpp"
#include "spmd/backends/process/execute.hpp"
#include "spmd/core/bfloat16.hpp"
#include "spmd/core/float16.hpp"

namespace spmd::nccl {

/// Whose order floating-point sums, products and averages take in an all-reduce.
enum class float_reductions {
  group,  // spmd's group order: the simulation's bits (default)
  nccl,   // NCCL's ring/tree order: faster for small blocks, not bit for bit
};

namespace detail {

inline float_reductions& float_order() {
  static float_reductions o = float_reductions::group;
  return o;
}

template <class T>
ncclDataType_t nccl_type() {
  if constexpr (std::is_same_v<T, float>) return ncclFloat32;
  else if constexpr (std::is_same_v<T, double>) return ncclFloat64;
  else if constexpr (std::is_same_v<T, bfloat16>) return ncclBfloat16;
  else if constexpr (std::is_same_v<T, float16>) return ncclFloat16;
  else if constexpr (std::is_same_v<T, std::int32_t>) return ncclInt32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return ncclInt64;
  else static_assert(sizeof(T) == 0, "spmd::nccl: no NCCL type for this element type");
}

inline ncclRedOp_t nccl_op(reduce_op op) {
  switch (op) {
    case reduce_op::product: return ncclProd;
    case reduce_op::max: return ncclMax;
    case reduce_op::min: return ncclMin;
    default: return ncclSum;  // avg: a sum, then / n (ncclAvg premultiplies floats by 1/n)
  }
}

/// The NCCL transport of the per-rank executor for one plan run.
struct transport {
  using comm_type = ncclComm_t;
  template <class T>
  using buffer = cuda::device_buffer<T>;

  ncclComm_t parent = nullptr;
  std::vector<long> mesh_key;  // the mesh's shape, then the parent rank of every mesh index
  cudaStream_t stream = cuda::current_stream();

  transport(ncclComm_t p, const mesh_shape_vec& mesh, const std::vector<int>& comm_rank) : parent(p) {
    for (index_t e : mesh) mesh_key.push_back(static_cast<long>(e));
    mesh_key.push_back(-1);
    for (int r : comm_rank) mesh_key.push_back(r);
  }
  transport(const transport&) = delete;
  transport& operator=(const transport&) = delete;

  ncclComm_t group(const std::vector<int>&, const process::group_split& s) {
    return group_comm(parent, mesh_key, static_cast<unsigned>(s.mask), s.group, s.index);
  }

  // ---- region kernels ----
  template <class T>
  void copy(T* out, const T* in, const run_geom& g) {
    if (g.count() == 0) return;
    if (g.nd == 0 && g.contiguous()) {
      cuda::check(cudaMemcpyAsync(out + g.doff, in + g.soff, static_cast<std::size_t>(g.run) * sizeof(T),
                                  cudaMemcpyDeviceToDevice, stream),
                  "cudaMemcpyAsync (a contiguous piece)");
      return;
    }
    cuda::kernels::region_copy<T>(out, in, g, stream);
  }
  template <class T>
  void move(T* out, const T* in, const run_geom& g) {
    if (out != in) return copy(out, in, g);
    // In place, towards the front: through a packed copy (threads of one launch cannot
    // order overlapping reads and writes).
    buffer<T> tmp(g.count());
    copy(tmp.data(), in, process::packed(g, false));
    copy(out, static_cast<const T*>(tmp.data()), process::packed(g, true));
  }
  template <class T>
  void fill(T* out, const run_geom& g, T v) {
    cuda::kernels::region_fill<T>(out, g, v, stream);
  }
  template <class T>
  void scale(T* out, const T* in, const run_geom& g, index_t n) {
    cuda::kernels::region_scale<T>(out, in, g, n, stream);
  }
  template <class T>
  void reduce(reduce_op op, T* out, const T* const* in, index_t n, const run_geom& g) {
    if (n > cuda::max_launch_ranks)
      throw std::invalid_argument("spmd::nccl: a reduction over " + std::to_string(n) +
                                  " ranks; at most " + std::to_string(cuda::max_launch_ranks) + " in one group");
    cuda::kernels::region_sources<T> src{};
    for (index_t j = 0; j < n; ++j) src.p[j] = in[j];
    cuda::kernels::region_reduce<T>(op, out, src, n, g, stream);
  }

  // ---- messages of one step ----
  template <class T>
  void send(const T* p, index_t n, int peer, ncclComm_t c) {
    if (n > 0) pending.push_back({true, const_cast<T*>(p), static_cast<std::size_t>(n) * sizeof(T), peer, c});
  }
  template <class T>
  void recv(T* p, index_t n, int peer, ncclComm_t c) {
    if (n > 0) pending.push_back({false, p, static_cast<std::size_t>(n) * sizeof(T), peer, c});
  }
  template <class T>
  bool send_region(const T*, const run_geom&, int, ncclComm_t) {
    return false;  // NCCL sends contiguous bytes: the executor packs
  }
  template <class T>
  bool recv_region(T*, const run_geom&, int, ncclComm_t) {
    return false;
  }
  void wait() {
    if (pending.empty()) return;
    check(ncclGroupStart(), "ncclGroupStart", parent);
    for (const message& m : pending) {
      if (m.send) check(ncclSend(m.p, m.bytes, ncclUint8, m.peer, m.comm, stream), "ncclSend", m.comm);
      else check(ncclRecv(m.p, m.bytes, ncclUint8, m.peer, m.comm, stream), "ncclRecv", m.comm);
    }
    pending.clear();
    check(ncclGroupEnd(), "ncclGroupEnd (grouped ncclSend/ncclRecv)", parent);
  }

  template <class T>
  bool all_reduce(reduce_op op, const T* in, T* out, index_t len, ncclComm_t c) {
    const bool integer_any_order = std::is_integral_v<T> && op != reduce_op::avg;
    const bool float_sum = !std::is_integral_v<T> &&
                           (op == reduce_op::sum || op == reduce_op::avg || op == reduce_op::product) &&
                           float_order() == float_reductions::nccl;
    if (!integer_any_order && !float_sum) return false;
    check(ncclAllReduce(in, out, static_cast<std::size_t>(len), nccl_type<T>(), nccl_op(op), c, stream),
          "ncclAllReduce", c);
    if (op == reduce_op::avg) {
      int n = 1;
      check(ncclCommCount(c, &n), "ncclCommCount", c);
      cuda::kernels::region_divide<T>(out, len, n, stream);
    }
    return true;
  }
  template <class T>
  void all_gatherv(T* out, const std::vector<index_t>& counts, const std::vector<index_t>& displs, index_t pos,
                   ncclComm_t c) {
    const std::size_t me = static_cast<std::size_t>(pos);
    for (std::size_t j = 0; j < counts.size(); ++j) {
      if (j == me) continue;
      send(out + displs[me], counts[me], static_cast<int>(j), c);
      recv(out + displs[j], counts[j], static_cast<int>(j), c);
    }
    wait();
  }

 private:
  struct message {
    bool send;
    void* p;
    std::size_t bytes;
    int peer;
    ncclComm_t comm;
  };
  std::vector<message> pending;
};

}  // namespace detail

/// Whose order floating-point sums take in this process's all-reduces (every rank must
/// choose the same; group order by default).
inline void set_float_reductions(float_reductions o) { detail::float_order() = o; }
inline float_reductions get_float_reductions() { return detail::float_order(); }

}  // namespace spmd::nccl
