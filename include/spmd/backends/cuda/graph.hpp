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
// The graph works on a stream of its own, ordered after the caller's current stream before each
// launch and before it afterwards: a caller that refills inputs on its stream and reads
// outputs there sees the step in between, as with eager work.
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
  step_graph() {
    require_device("spmd::cuda::step_graph");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
    check(cudaEventCreateWithFlags(&order_, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  }
  ~step_graph() {
    (void)cudaStreamSynchronize(stream_);
    if (exec_) (void)cudaGraphExecDestroy(exec_);
    if (graph_) (void)cudaGraphDestroy(graph_);
    for (void* p : host_) (void)cudaFreeHost(p);
    (void)cudaEventDestroy(order_);
    (void)cudaStreamDestroy(stream_);
  }
  step_graph(const step_graph&) = delete;
  step_graph& operator=(const step_graph&) = delete;

  /// Records step() as this graph and launches it once (that launch is the step). Run the step
  /// eagerly once before: its plans' tables and the optimizer's state are then made. Every
  /// object the step uses must outlive the graph.
  template <class F>
  void capture(F&& step) {
    if (exec_) throw std::logic_error("spmd::cuda::step_graph: captured already (a step_graph holds one step)");
    if (capturing_graph())
      throw std::logic_error("spmd::cuda::step_graph: another step_graph is capturing on this thread; captures do not nest");
    after_caller();
    {
      stream_scope on(stream_);
      detail::capture_count count{detail::next_capture_id(), 0};
      detail::graph_slot() = this;
      detail::capture_slot() = &count;
      // Relaxed: the step may make memory the graph keeps (keep_host) while it is captured.
      const cudaError_t begun = cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed);
      if (begun != cudaSuccess) {
        end_of_capture();
        check(begun, "cudaStreamBeginCapture");
      }
      try {
        step();
      } catch (...) {
        abandon();
        throw;
      }
      cudaGraph_t g = nullptr;
      const cudaError_t ended = cudaStreamEndCapture(stream_, &g);
      const long live = count.live;
      end_of_capture();
      if (ended != cudaSuccess || g == nullptr) {
        if (g) (void)cudaGraphDestroy(g);
        (void)cudaGetLastError();
        forget_hooks();
        throw error(std::string("spmd::cuda::step_graph: the capture failed (") + cudaGetErrorString(ended) +
                        "): something in the step waited for the device or worked outside the captured stream "
                        "(a read of a tensor, spmd::cuda::synchronize); read results after wait(), from tensors "
                        "made before the capture",
                    ended);
      }
      graph_ = g;
      if (live != 0) {
        forget_hooks();
        throw std::logic_error("spmd::cuda::step_graph: " + std::to_string(live) +
                               " device buffers allocated during the capture outlive it (a tensor made in the step "
                               "and kept after it); the next launch would allocate them again. Copy such results "
                               "into tensors made before the capture (spmd::cuda::copy_into)");
      }
      check(cudaGraphInstantiate(&exec_, graph_, 0), "cudaGraphInstantiate");
    }
    launch();
  }

  /// One more step: the host work registered by before_replay (after the previous launch
  /// finished, whose host memory it rewrites), then one graph launch.
  void replay() {
    if (!exec_) throw std::logic_error("spmd::cuda::step_graph: replay() before capture()");
    if (!before_.empty()) wait();
    for (auto& f : before_) f();
    launch();
  }

  /// Waits for the last launch, then runs its after_launch checks (which may throw: a bad
  /// index, as the eager step reports it).
  void wait() {
    check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize (step_graph)");
    if (!pending_) return;
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
  cudaStream_t stream() const noexcept { return stream_; }

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
  void end_of_capture() noexcept {
    detail::graph_slot() = nullptr;
    detail::capture_slot() = nullptr;
  }
  void forget_hooks() noexcept {
    before_.clear();
    after_.clear();
  }
  /// Ends a capture the step left by throwing; the stream works eagerly again.
  void abandon() noexcept {
    cudaGraph_t g = nullptr;
    (void)cudaStreamEndCapture(stream_, &g);
    if (g) (void)cudaGraphDestroy(g);
    (void)cudaGetLastError();
    end_of_capture();
    forget_hooks();
  }
  /// This graph's stream waits for what the caller's stream has queued so far.
  void after_caller() {
    check(cudaEventRecord(order_, current_stream()), "cudaEventRecord (step_graph)");
    check(cudaStreamWaitEvent(stream_, order_, 0), "cudaStreamWaitEvent (step_graph)");
  }
  void launch() {
    after_caller();
    check(cudaGraphLaunch(exec_, stream_), "cudaGraphLaunch");
    ++launches_;
    pending_ = true;
    // The caller's later work sees the step.
    check(cudaEventRecord(order_, stream_), "cudaEventRecord (step_graph)");
    check(cudaStreamWaitEvent(current_stream(), order_, 0), "cudaStreamWaitEvent (step_graph)");
  }

  cudaStream_t stream_ = nullptr;
  cudaEvent_t order_ = nullptr;
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  std::vector<std::function<void()>> before_, after_;
  std::vector<void*> host_;
  long long launches_ = 0;
  bool pending_ = false;
};

}  // namespace spmd::cuda
