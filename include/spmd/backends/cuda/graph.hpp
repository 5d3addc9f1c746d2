// spmd/backends/cuda/graph.hpp — a step of work on the CUDA backend captured once as a CUDA
// graph and replayed: one graph launch a step, no allocation from the driver, no per-launch
// cost on the host beyond the launch itself.
//
//   spmd::cuda::step_graph g;
//   train_step();                  // eager, once: plans' tables uploaded, optimizer state made
//   g.capture([&] { train_step(); });  // recorded, then launched once: this is a step
//   for (...) { refill inputs; g.replay(); g.wait(); read outputs; }
//
// What a captured step may do is what a CUDA graph holds: kernels, copies, stream-ordered
// allocations freed within the step. What it must not do, and what happens if it does:
// - wait for the device (a read of a tensor, spmd::cuda::synchronize): the capture fails with
//   CUDA's error, named; read results after wait() from tensors made before the capture;
// - upload a plan's tables (a plan and shape that has not run before): refused with a
//   sentence (execute.hpp); run the step eagerly once first;
// - leave a buffer it allocated alive past its end (a tensor made inside kept outside): the
//   next launch would allocate it again, so capture() refuses, naming the count; copy such
//   results into tensors made before the capture (copy_into).
//
// Host work that must change between replays registers itself during the capture:
// before_replay(f) runs f on the host before every launch after the first (the optimizers
// write the next step's coefficients into host memory the graph copies from: runtime/optim.hpp),
// after_launch(f) runs f once each launch has finished, from wait() (the index checks of
// embedding and one_hot report a bad index there, as the eager step would have). The graph's
// first launch is the captured step itself, whose host work ran during the capture.
//
// The graph is captured on, and launched on, this thread's current stream (cudaStreamPerThread
// or a stream_scope's), so inputs refilled and outputs read on that stream see the step in
// between, as with eager work. A buffer made before the capture that the step lets go is not
// freed in the graph (the graph frees only what it allocates): every launch may read it, so
// the step_graph keeps it and frees it when it goes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "spmd/backends/cuda/device.hpp"
#include "spmd/backends/cuda/device_buffer.hpp"
#include "spmd/backends/cuda/error.hpp"

namespace spmd::cuda {

class step_graph;

namespace detail {
inline step_graph*& graph_slot() noexcept {
  thread_local step_graph* g = nullptr;
  return g;
}
inline unsigned long long next_capture_id() noexcept {
  thread_local unsigned long long n = 0;
  return ++n;
}
}  // namespace detail

/// The step_graph whose capture this thread is inside, or null.
inline step_graph* capturing_graph() noexcept { return detail::graph_slot(); }

/// True while this thread's current stream is being captured, by a step_graph or otherwise.
inline bool capturing() {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  check(cudaStreamIsCapturing(current_stream(), &st), "cudaStreamIsCapturing");
  return st != cudaStreamCaptureStatusNone;
}

class step_graph {
 public:
  step_graph() { require_device("spmd::cuda::step_graph"); }
  ~step_graph() {
    if (stream_) (void)cudaStreamSynchronize(stream_);
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
    for (void* p : host_) (void)cudaFreeHost(p);
    for (const auto& [p, stream] : inputs_) detail::free_on(p, stream);
  }
  step_graph(const step_graph&) = delete;
  step_graph& operator=(const step_graph&) = delete;

  /// Records step() on this thread's current stream as this graph and launches it once (that
  /// launch is the step). Run the step eagerly once before: its plans' tables and the
  /// optimizer's state are then made. Every object the step uses must outlive the graph.
  template <class F>
  void capture(F&& step) {
    if (exec_) throw std::logic_error("spmd::cuda::step_graph: captured already (a step_graph holds one step)");
    if (capturing_graph())
      throw std::logic_error("spmd::cuda::step_graph: another step_graph is capturing on this thread; captures do not nest");
    const cudaStream_t s = current_stream();
    if (s == cudaStreamLegacy || s == nullptr)
      throw std::logic_error("spmd::cuda::step_graph: the legacy default stream cannot be captured; work on "
                             "cudaStreamPerThread (the default) or a stream_scope's stream");
    detail::capture_count count{detail::next_capture_id(), 0, {}};
    detail::graph_slot() = this;
    detail::capture_slot() = &count;
    // Relaxed: the step may make memory the graph keeps (keep_host) while it is captured.
    const cudaError_t begun = cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed);
    if (begun != cudaSuccess) {
      end_of_capture(count, true);
      check(begun, "cudaStreamBeginCapture");
    }
    try {
      step();
    } catch (...) {
      cudaGraph_t g = nullptr;
      (void)cudaStreamEndCapture(s, &g);
      if (g) (void)cudaGraphDestroy(g);
      (void)cudaGetLastError();
      end_of_capture(count, true);
      throw;
    }
    cudaGraph_t g = nullptr;
    const cudaError_t ended = cudaStreamEndCapture(s, &g);
    const long live = count.live;
    end_of_capture(count, ended != cudaSuccess || g == nullptr || live != 0);
    if (ended != cudaSuccess || g == nullptr) {
      if (g) (void)cudaGraphDestroy(g);
      (void)cudaGetLastError();
      throw error(std::string("spmd::cuda::step_graph: the capture failed (") + cudaGetErrorString(ended) +
                      "): something in the step waited for the device or worked outside the captured stream "
                      "(a read of a tensor, spmd::cuda::synchronize); read results after wait(), from tensors "
                      "made before the capture",
                  ended);
    }
    if (live != 0) {
      (void)cudaGraphDestroy(g);
      throw std::logic_error("spmd::cuda::step_graph: " + std::to_string(live) +
                             " device buffers allocated during the capture outlive it (a tensor made in the step "
                             "and kept after it); the next launch would allocate them again. Copy such results "
                             "into tensors made before the capture (spmd::runtime::copy_into)");
    }
    graph_ = g;
    check(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
    launch();
  }

  /// One more step on this thread's current stream: the host work registered by
  /// before_replay (after the previous launch finished: it rewrites the host memory that launch
  /// read), then one graph launch.
  void replay() {
    if (!exec_) throw std::logic_error("spmd::cuda::step_graph: replay() before capture()");
    if (!before_.empty()) wait();
    for (auto& f : before_) f();
    launch();
  }

  /// Waits for the last launch, then runs its after_launch checks (which may throw: a bad
  /// index, as the eager step reports it).
  void wait() {
    if (!pending_) return;
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (step_graph)");
    pending_ = false;
    for (auto& f : after_) f();
  }

  bool captured() const noexcept { return exec_ != nullptr; }
  /// Launches so far (the capture's own included).
  long long launches() const noexcept { return launches_; }
  /// The graph's nodes (kernels, copies, allocations, frees): what one launch runs.
  std::size_t nodes() const {
    std::size_t n = 0;
    if (graph_) check(cudaGraphGetNodes(graph_, nullptr, &n), "cudaGraphGetNodes");
    return n;
  }

  // ---- for the library's code that runs inside capture() ----

  /// f runs on the host before every launch after the first.
  void before_replay(std::function<void()> f) {
    require_capturing("before_replay");
    before_.push_back(std::move(f));
  }
  /// f runs on the host after every launch has finished (wait()).
  void after_launch(std::function<void()> f) {
    require_capturing("after_launch");
    after_.push_back(std::move(f));
  }
  /// `bytes` of pinned host memory that lives as long as the graph: the source of a copy the
  /// graph makes at every launch (rewritten by a before_replay function), or its destination.
  void* keep_host(std::size_t bytes) {
    require_capturing("keep_host");
    void* p = nullptr;
    check(cudaMallocHost(&p, bytes == 0 ? 1 : bytes), "cudaMallocHost (step_graph)");
    host_.push_back(p);
    return p;
  }

 private:
  void require_capturing(const char* what) const {
    if (capturing_graph() != this)
      throw std::logic_error(std::string("spmd::cuda::step_graph::") + what + ": only during this graph's capture");
  }
  /// Leaves the capture's state. The buffers made before the capture that the step let go
  /// become the graph's: every launch may read them, so they are freed with it. On a failed
  /// capture (`failed`) they are freed now, and its host work is forgotten.
  void end_of_capture(detail::capture_count& count, bool failed) noexcept {
    detail::graph_slot() = nullptr;
    detail::capture_slot() = nullptr;
    if (failed) {
      for (const auto& [p, stream] : count.deferred) detail::free_on(p, stream);
      before_.clear();
      after_.clear();
    } else {
      for (const auto& d : count.deferred) {
        try {
          inputs_.push_back(d);
        } catch (...) {
          detail::free_on(d.first, d.second);  // (no memory to keep the note: freed now)
        }
      }
    }
  }
  void launch() {
    stream_ = current_stream();
    check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
    ++launches_;
    pending_ = true;
  }

  cudaStream_t stream_ = nullptr;  // the last launch's
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<std::function<void()>> before_, after_;
  std::vector<void*> host_;
  std::vector<std::pair<void*, cudaStream_t>> inputs_;  // buffers made before the capture, let go in it
  long long launches_ = 0;
  bool pending_ = false;
};

}  // namespace spmd::cuda
