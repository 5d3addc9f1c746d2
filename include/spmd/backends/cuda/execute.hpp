// spmd/backends/cuda/execute.hpp — a plan's steps on the GPU: one kernel launch per step.
//
// A plan and a global shape give, once, a device_plan: every step's table (step_table.hpp)
// in one block of device memory, and on the host what each rank's buffer does in the step
// (keep it, or take a fresh one). Running it is then, per step, one allocation from the
// stream-ordered pool cut into every rank's fresh buffer, one launch with the ranks' pointers
// as parameters, and the old buffers freed on the stream. Nothing waits for the GPU, nothing is copied to it, so a
// warmed-up redistribute can be captured in a CUDA graph.
//
// The tables of a compile-time plan are cached per plan type, device and global shape
// (run_plan); a value-level execute() builds them for the call.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/device_set.hpp"
#include "spmd/backends/cuda/error.hpp"
#include "spmd/backends/cuda/launch.hpp"
#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/host/slot.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/traffic.hpp"
#include "spmd/runtime/comm_counter.hpp"
#include "spmd/runtime/observe/hooks.hpp"

namespace spmd::cuda {

/// One step as the executor runs it.
struct device_step {
  step_view table{};                  // members and ops in device memory
  bool wide = false;                  // the table is in 16-byte units (widen)
  std::shared_ptr<const inline_table> small;  // the same table inline, for a small step
  std::vector<rank_plan> ranks;       // per mesh index: keep, or a fresh buffer of shape
  step_kind kind = step_kind::chunk;
  dim_mask mask = 0;
  std::int64_t comm_bytes_per_elem = 0;  // the step's traffic for 1-byte elements
  plan_step step{};                   // for the log and the timeline (observe/hooks.hpp)
  shape_vec global{};
};

/// A plan's steps for one global shape, their tables uploaded (device memory kept until the
/// device_plan goes).
struct device_plan {
  std::vector<device_step> steps;
  index_t ranks = 0;
  std::unique_ptr<void, void (*)(void*)> memory{nullptr, [](void* p) { (void)cudaFree(p); }};
};

namespace detail {

/// Throws where a table upload would break a stream capture.
inline void refuse_in_capture(const char* who) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(current_stream(), &st), "cudaStreamIsCapturing");
  if (st != cudaStreamCaptureStatusNone)
    throw std::logic_error(std::string(who) +
                           ": this plan and shape have not run before, and their step tables "
                           "cannot be uploaded during a stream capture; run it once before "
                           "capturing it in a CUDA graph");
}

}  // namespace detail

/// Launches the step of `table` (in 16-byte units when `wide`: the same buffers seen as
/// units, aligned as widen requires) on every rank's buffers, on `stream`; from `small`
/// where given (make_inline of the same table).
template <class T>
void launch_step(const step_view& table, bool wide, const rank_ptrs<T>& ptrs, index_t ranks, cudaStream_t stream,
                 const inline_table* small = nullptr) {
  if (!wide) return kernels::step<T>(table, ptrs, stream, small);
  rank_ptrs<wide16> w{};
  for (index_t r = 0; r < ranks; ++r) {
    w.in[r] = reinterpret_cast<const wide16*>(ptrs.in[r]);
    w.out[r] = reinterpret_cast<wide16*>(ptrs.out[r]);
  }
  kernels::step_wide<T>(table, w, stream, small);
}

/// The device plan of `p` on `global` (schedules from build_schedules; checked by the caller).
inline device_plan make_device_plan(const plan& p, const std::vector<step_schedule>& scheds,
                                    const shape_vec& global, index_t elem_bytes, const char* who) {
  device_plan dp;
  dp.ranks = p.steps.size() > 0 ? p.steps[0].from.mesh_size() : 0;
  if (dp.ranks > max_launch_ranks)
    throw std::invalid_argument(std::string(who) + ": the mesh has " + std::to_string(dp.ranks) +
                                " ranks; a step launch takes at most " +
                                std::to_string(max_launch_ranks));
  std::vector<step_table> tables;
  std::vector<bool> wide;
  std::vector<std::size_t> at;  // each table's offset in the block
  std::size_t bytes = 0;
  for (int i = 0; i < p.steps.size(); ++i) {
    tables.push_back(build_step_table(p.steps[i], scheds[static_cast<std::size_t>(i)], global));
    wide.push_back(finish(tables.back(), elem_bytes));
    at.push_back(bytes);
    bytes += layout_of(tables.back()).bytes;
  }
  std::vector<unsigned char> staged(bytes);
  if (bytes > 0) {
    detail::refuse_in_capture(who);
    void* mem = nullptr;
    check(cudaMalloc(&mem, bytes), "cudaMalloc (step tables)");
    dp.memory.reset(mem);
  }
  auto* base = static_cast<unsigned char*>(dp.memory.get());
  for (int i = 0; i < p.steps.size(); ++i) {
    const auto k = static_cast<std::size_t>(i);
    const step_schedule& s = scheds[k];
    pack(tables[k], staged.data() + at[k]);
    device_step ds;
    ds.table = view_at(tables[k], base + at[k]);
    ds.wide = wide[k];
    if (fits_inline(tables[k])) ds.small = std::make_shared<const inline_table>(make_inline(tables[k]));
    ds.ranks = s.ranks;
    ds.kind = s.kind;
    ds.mask = s.mask;
    ds.comm_bytes_per_elem = traffic(p.steps[i], global, 1).total_bytes;
    ds.step = p.steps[i];
    ds.global = global;
    dp.steps.push_back(std::move(ds));
  }
  if (bytes > 0) check(cudaMemcpy(base, staged.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy (step tables)");
  return dp;
}

/// Runs `dp` on `in` (every mesh index held; reused when an rvalue) on the current stream.
template <class T, class In>
device_set<T> run_device_plan(const device_plan& dp, In&& in) {
  constexpr bool owned = !std::is_const_v<std::remove_reference_t<In>>;
  const index_t n = in.ranks();
  if (dp.steps.empty()) return device_set<T>(std::forward<In>(in));
  std::vector<device_buffer<T>> own(static_cast<std::size_t>(n)), next(static_cast<std::size_t>(n));
  std::vector<T*> cur(static_cast<std::size_t>(n));
  for (index_t r = 0; r < n; ++r) {
    if constexpr (owned) {
      own[static_cast<std::size_t>(r)] = in.release(r);
      cur[static_cast<std::size_t>(r)] = own[static_cast<std::size_t>(r)].data();
    } else {  // borrowed: read, never written (a kept buffer is not written either)
      cur[static_cast<std::size_t>(r)] = const_cast<T*>(in.data(r));
    }
  }
  const cudaStream_t stream = current_stream();
  rank_ptrs<T> ptrs{};
  for (const device_step& s : dp.steps) {
    // Every rank's fresh output of the step in one allocation (kept ranks keep theirs).
    std::size_t bytes = 0;
    for (const rank_plan& rp : s.ranks)
      if (rp.how != disposition::keep) bytes += device_block::round_up(static_cast<std::size_t>(rp.elems) * sizeof(T));
    const device_block block(bytes);
    std::size_t offset = 0;
    for (index_t r = 0; r < n; ++r) {
      const auto k = static_cast<std::size_t>(r);
      ptrs.in[k] = cur[k];
      if (s.ranks[k].how == disposition::keep) {
        next[k] = std::move(own[k]);
      } else {  // the table writes a fresh buffer (modify too: items run in any order)
        next[k] = device_buffer<T>::slice(block, offset, s.ranks[k].elems);
        offset += device_block::round_up(static_cast<std::size_t>(s.ranks[k].elems) * sizeof(T));
        cur[k] = next[k].data();
      }
      ptrs.out[k] = cur[k];
    }
    auto launch = [&] { launch_step<T>(s.table, s.wide, ptrs, n, stream, s.small.get()); };
    // Watched, a step's span is its time on the device: the stream is synchronised before
    // the span opens and before it closes (which serialises the work a trace watches).
    const int at = static_cast<int>(&s - dp.steps.data());
    observe::around_synced(launch,
                           [&] {
                             return observe::on_step(s.step, at, static_cast<int>(dp.steps.size()), s.global,
                                                     index_t{sizeof(T)}, 0, n);
                           },
                           [&] { check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (trace)"); });
    for (auto& b : own) b.reset();  // freed on the stream, after the launch
    std::swap(own, next);
    if (is_collective(s.kind) && runtime::detail::comm_counter_top() != nullptr)
      runtime::detail::record_collective(s.kind, s.mask,
                                         s.comm_bytes_per_elem * static_cast<std::int64_t>(sizeof(T)));
  }
  device_set<T> out(n);
  const std::vector<rank_plan>& last = dp.steps.back().ranks;
  for (index_t r = 0; r < n; ++r) {
    const auto k = static_cast<std::size_t>(r);
    if (own[k] || last[k].elems == 0) {
      out.adopt(r, std::move(own[k]), last[k].shape);
    } else {  // kept through every step from a borrowed input: copy it
      out.assign(r, last[k].shape);
      check(cudaMemcpyAsync(out.data(r), cur[k], static_cast<std::size_t>(last[k].elems) * sizeof(T),
                            cudaMemcpyDeviceToDevice, stream),
            "cudaMemcpyAsync (device to device)");
    }
  }
  return out;
}

/// Run plan `p` on a tensor of global shape `global` whose locals are on the GPU (the
/// value-level path). Checks the plan and the input first (std::invalid_argument).
template <class T>
device_set<T> execute(const plan& p, const shape_vec& global, const device_set<T>& in) {
  require_device("spmd::cuda::execute");
  const std::vector<step_schedule> scheds =
      host::detail::checked_schedules<T>(p, global, in, "spmd::cuda::execute");
  if (!in.holds_all())
    throw std::invalid_argument("spmd::cuda::execute: the input must hold every rank's local");
  return run_device_plan<T>(make_device_plan(p, scheds, global, sizeof(T), "spmd::cuda::execute"), in);
}

}  // namespace spmd::cuda
