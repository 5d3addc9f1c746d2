// spmd/backends/cuda/backend.hpp — every rank's local in one GPU's memory, as a backend.
//
// `spmd::cuda::backend` holds every mesh index (like the simulation) in device memory
// (device_set), runs a plan's steps as one launch each (execute.hpp, tables cached per plan
// type, device and shape), and the operators through their device kernels (ops/, one launch
// or one cuBLAS call for all ranks). The factories make the locals on the device
// (device_factories.hpp); distribute_tensor builds them on the host from host data and copies
// them up; to_local and full_tensor copy back and wait for the stream.
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <stdexcept>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/device_factories.hpp"
#include "spmd/backends/cuda/device_set.hpp"
#include "spmd/backends/cuda/execute.hpp"
#include "spmd/backends/cuda/graph.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/names.hpp"
#include "spmd/backends/cuda/ring.hpp"
#include "spmd/host/host_tensor.hpp"
#include "spmd/host/random.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::cuda {

/// The device kernel of an operator (specialised in backends/cuda/ops/): run(op, out, offsets,
/// in...) fills `out` (shaped) from `in` for every rank at once.
template <class Op>
struct device_op;

template <class Op, class = void>
inline constexpr bool has_device_op = false;
template <class Op>
inline constexpr bool has_device_op<Op, std::void_t<decltype(sizeof(device_op<Op>))>> = true;

namespace detail {

/// The device plan of Holder::value for `global` on the current device: made on first use,
/// then kept for the life of the process (a static plan's tables are its constants).
template <class Holder>
const device_plan& cached_device_plan(const shape_vec& global, index_t elem_bytes, const char* who) {
  struct key {
    int device;
    index_t elem_bytes;  // the tables' 16-byte units depend on it
    shape_vec shape;
    bool operator<(const key& o) const {
      if (device != o.device) return device < o.device;
      if (elem_bytes != o.elem_bytes) return elem_bytes < o.elem_bytes;
      return std::lexicographical_compare(shape.begin(), shape.end(), o.shape.begin(), o.shape.end());
    }
  };
  // Never destroyed: the CUDA runtime may be gone by the time static destructors run.
  static auto* cache = new std::map<key, device_plan>();
  static auto* mutex = new std::mutex();
  int dev = 0;
  check(cudaGetDevice(&dev), "cudaGetDevice");
  // This thread's last plan: a redistribute repeated in a loop takes no lock and no lookup.
  // (Entries are never erased, so the pointer stays valid.)
  thread_local const device_plan* last = nullptr;
  thread_local key last_key{-1, 0, {}};
  if (last != nullptr && last_key.device == dev && last_key.elem_bytes == elem_bytes && last_key.shape == global)
    return *last;
  const std::lock_guard<std::mutex> lock(*mutex);
  const key k{dev, elem_bytes, global};
  auto it = cache->find(k);
  if (it == cache->end()) {
    const std::vector<step_schedule>& scheds = cached_schedules<Holder>(global, who);
    it = cache->emplace(k, make_device_plan(Holder::value, scheds, global, elem_bytes, who)).first;
  }
  last = &it->second;
  last_key = k;
  return *last;
}

}  // namespace detail

struct backend {
  static constexpr const char* name = "cuda";
  /// A step captured once and replayed (graph.hpp): what spmd-train --graph uses.
  using graph_type = step_graph;
  /// Context parallelism's ring runs here (ring_forward, ring_backward, p2p_slot).
  static constexpr bool has_ring = true;

  template <class T>
  using storage = device_set<T>;

  /// Every mesh index.
  template <class M>
  static held_range held() {
    return {0, M::size};
  }

  template <class T, class Holder, class M, class Ext, class In>
  static device_set<T> run_plan(const Ext& ext, In&& in) {
    if constexpr (Holder::value.steps.size() == 0) {
      return device_set<T>(std::forward<In>(in));
    } else {
      const shape_vec global = ext.to_vec();
      return run_device_plan<T>(detail::cached_device_plan<Holder>(global, sizeof(T), "spmd::cuda::redistribute"),
                                std::forward<In>(in));
    }
  }

  /// The factories' locals (full, zeros, ones: every element `value`; arange: `index`)
  /// made on the device in one launch, host::generate's values (device_factories.hpp).
  template <class T>
  static device_set<T> generate(const layout_spec& spec, const shape_vec& global, held_range held, T value,
                                bool index) {
    return generate_on_device<T>(spec, global, held, index ? fill_kind::index : fill_kind::constant, value,
                                 index ? "spmd::cuda::arange" : "spmd::cuda::full");
  }

  /// Every local, copied to the host (waits for the stream).
  template <class T, class M>
  static host::local_set<T> gather_all(const device_set<T>& locals, const layout_spec&, const shape_vec&) {
    return download(locals);
  }

  template <class T>
  static device_set<T> from_host(host::local_set<T>&& h) {
    require_device("spmd::cuda");
    return upload(h);
  }

  template <class T>
  static host::host_tensor<T> to_host(const device_set<T>& d, index_t i) {
    host::host_tensor<T> t;
    t.shape.assign(d.shape(i).begin(), d.shape(i).end());
    t.data.resize(static_cast<std::size_t>(d.size(i)));
    if (!t.data.empty()) {
      check(cudaMemcpyAsync(t.data.data(), d.data(i), t.data.size() * sizeof(T), cudaMemcpyDeviceToHost,
                            current_stream()),
            "cudaMemcpyAsync (device to host)");
      synchronize();
    }
    return t;
  }

  /// The optimizers' update of every block in `segments` (runtime/optim.hpp), each with its
  /// entry of `coeffs`, in one launch: the table and the coefficients go up (stream-ordered,
  /// freed after the kernel). Captured by a step_graph, both are copied from pinned memory the
  /// graph keeps, and `next` writes the next step's coefficients there before every replay.
  template <class T, class Coeffs, class Next>
  static void fused_update(const std::vector<optim_math::segment<T, Coeffs>>& segments, const std::vector<Coeffs>& coeffs,
                           Next&& next) {
    using S = optim_math::segment<T, Coeffs>;
    const index_t n = static_cast<index_t>(segments.size());
    index_t longest = 0;
    for (const auto& s : segments) longest = std::max(longest, s.n);
    device_buffer<S> table(n);
    device_buffer<Coeffs> c(static_cast<index_t>(coeffs.size()));
    const S* table_from = segments.data();
    const Coeffs* c_from = coeffs.data();
    if (step_graph* g = capturing_graph()) {
      // The graph's copies read host memory at every launch: pinned memory the graph keeps. The
      // table's addresses stay (the graph's allocations keep theirs); the coefficients move on.
      S* ht = static_cast<S*>(g->keep_host(segments.size() * sizeof(S)));
      Coeffs* hc = static_cast<Coeffs*>(g->keep_host(coeffs.size() * sizeof(Coeffs)));
      std::copy(segments.begin(), segments.end(), ht);
      std::copy(coeffs.begin(), coeffs.end(), hc);
      g->before_replay([hc, next = std::forward<Next>(next)] { next(hc); });
      table_from = ht;
      c_from = hc;
    } else if (capturing()) {
      throw std::logic_error(
          "spmd::cuda: an optimizer's step is captured only by a spmd::cuda::step_graph, which rewrites its "
          "coefficients (step counts, bias corrections) before every replay");
    }
    check(cudaMemcpyAsync(table.data(), table_from, segments.size() * sizeof(S), cudaMemcpyHostToDevice, current_stream()),
          "cudaMemcpyAsync (optimizer table)");
    check(cudaMemcpyAsync(c.data(), c_from, coeffs.size() * sizeof(Coeffs), cudaMemcpyHostToDevice, current_stream()),
          "cudaMemcpyAsync (optimizer coefficients)");
    kernels::fused_update<T, Coeffs>(table.data(), n, c.data(), longest, current_stream());
  }

  /// n elements of src's local i (from src_at) into dst's local j (at dst_at), on the stream:
  /// how redistribute_coalesced packs its bucket (runtime/coalesce.hpp).
  template <class T>
  static void copy_elements(device_set<T>& dst, index_t j, index_t dst_at, const device_set<T>& src, index_t i,
                            index_t src_at, index_t n) {
    check(cudaMemcpyAsync(dst.data(j) + dst_at, src.data(i) + src_at, static_cast<std::size_t>(n) * sizeof(T),
                          cudaMemcpyDeviceToDevice, current_stream()),
          "cudaMemcpyAsync (device to device)");
  }

  template <class U, class T>
  static device_set<U> cast(const device_set<T>& in) {
    device_set<U> out(in.ranks(), in.held_ranks());
    for (const index_t r : in.held()) {
      out.assign(r, in.shape(r));
      kernels::cast<U, T>(out.data(r), in.data(r), in.size(r), current_stream());
    }
    return out;
  }

  /// The held locals of a random draw (runtime/random.hpp): each rank's block by global
  /// index, or the identity on a Partial group's other members; one launch.
  template <class T>
  static void fill_random(device_set<T>& out, const layout_spec& spec, const shape_vec& global,
                          const random::draw& d) {
    const T identity = host::identity<T>(host::detail::partial_of(spec).op);
    const std::vector<block_place> places = block_places(spec, global);
    auto jobs = make_job_launcher<block_job<T>, block_geom>([&](const job_batch<block_job<T>, block_geom>& b) {
      kernels::random_fill<T>(b, d, identity, current_stream());
    });
    add_blocks<random_item_elems>(jobs, places, out.held(), [&](index_t r, const block_place& p) {
      return block_job<T>{out.data(r), p.elems, p.base, p.part, p.identity};
    });
    jobs.finish();
  }
  /// out = dropout of in (out shaped as in); one launch.
  template <class T>
  static void dropout(device_set<T>& out, const device_set<T>& in, const layout_spec& spec,
                      const shape_vec& global, const random::draw& d) {
    const std::vector<block_place> places = block_places(spec, global);
    auto jobs = make_job_launcher<block_io_job<T>, block_geom>([&](const job_batch<block_io_job<T>, block_geom>& b) {
      kernels::random_dropout<T>(b, d, current_stream());
    });
    add_blocks<random_item_elems>(jobs, places, out.held(), [&](index_t r, const block_place& p) {
      return block_io_job<T>{out.data(r), in.data(r), p.elems, p.base};
    });
    jobs.finish();
  }

  template <class Op, class U, class Offsets, class... T>
  static void run_op(const Op& op, device_set<U>& out, Offsets&& offsets, const device_set<T>&... in) {
    static_assert(has_device_op<Op>,
                  "spmd::cuda: this operator has no device kernel: a user's op (with a host "
                  "`local` member) runs on the host backends; on the GPU, wrap a CUDA kernel "
                  "in local_map.");
    device_op<Op>::run(op, out, offsets, in...);
  }

  /// One slot of a point-to-point schedule over mesh dim `dim` (plan/p2p_schedule.hpp):
  /// action(n, j) is what group position j of n does; each rank's block becomes the one it
  /// receives (one that receives none keeps its own). Every rank is on this GPU: the buffers
  /// change hands, and a block two ranks take is copied once on the current stream. The blocks
  /// of a group are of one shape.
  template <class T, class M, class Action>
  static void p2p_slot(device_set<T>& x, int dim, Action&& action) {
    const mesh_shape_vec shape = M::shape_vec();
    const index_t n = shape[dim];
    if (n <= 1) return;
    std::vector<index_t> from(static_cast<std::size_t>(x.ranks()), -1);
    std::vector<int> takers(static_cast<std::size_t>(x.ranks()), 0);
    std::int64_t bytes = 0;
    for (const index_t i : x.held()) {
      coord_vec c = unravel(shape, i);
      const p2p::action a = action(static_cast<int>(n), static_cast<int>(c[dim]));
      index_t f = i;
      if (a.recv_from >= 0) {
        c[dim] = a.recv_from;
        f = ravel(shape, c);
        if (x.shape(f) != x.shape(i))
          throw std::logic_error("spmd::cuda: a point-to-point slot's blocks differ in shape (rank " +
                                 std::to_string(f) + " to rank " + std::to_string(i) + ")");
        bytes += x.size(f) * static_cast<std::int64_t>(sizeof(T));
      }
      from[static_cast<std::size_t>(i)] = f;
      ++takers[static_cast<std::size_t>(f)];
    }
    device_set<T> y(x.ranks(), x.held_ranks());
    for (const index_t i : x.held()) {
      const index_t f = from[static_cast<std::size_t>(i)];
      const shape_vec s = x.shape(f);
      if (--takers[static_cast<std::size_t>(f)] == 0) {  // the last to take it: the buffer itself
        y.adopt(i, x.release(f), s);
      } else {
        y.assign(i, s);
        if (const index_t k = x.size(f); k > 0)
          check(cudaMemcpyAsync(y.data(i), x.data(f), static_cast<std::size_t>(k) * sizeof(T), cudaMemcpyDeviceToDevice,
                                current_stream()),
                "cudaMemcpyAsync (point-to-point slot)");
      }
    }
    x = std::move(y);
    runtime::detail::record_p2p(dim_mask{1} << dim, bytes);
  }

  /// Context parallelism's ring on this backend (ring.hpp), B the backend whose p2p_slot
  /// passes the blocks on (this one, or NCCL's).
  template <class B, index_t D, bool Causal, int Dim, class M, class T>
  static auto ring_forward(const device_set<T>& q, const device_set<T>& k, const device_set<T>& v,
                           const std::vector<runtime::ring_detail::place>& places, double scale) {
    return cuda::ring_forward<B, D, Causal, Dim, M>(q, k, v, places, scale);
  }
  template <class B, index_t D, bool Causal, int Dim, class M, class T>
  static auto ring_backward(const device_set<T>& g, const device_set<T>& q, const device_set<T>& k,
                            const device_set<T>& v, const device_set<T>& y, const device_set<T>& lse,
                            const std::vector<runtime::ring_detail::place>& places, double scale) {
    return cuda::ring_backward<B, D, Causal, Dim, M>(g, q, k, v, y, lse, places, scale);
  }
};

}  // namespace spmd::cuda
