// tests/cuda/backend.cpp — what the CUDA backend promises beyond the typed suite: a clear
// error without a GPU (checked on every machine), and, on a GPU, work on a stream the user
// passes, a redistribute captured in a CUDA graph and replayed, local_map with a function
// that launches its own kernel, a bad embedding index reported by name, and CUDA errors as
// exceptions naming the call, one kernel launch per operator for all ranks, the factories
// and distribute_device_tensor made on the device, and a transposing redistribute large
// enough for the tile kernel, and a step captured by spmd::cuda::step_graph (replays with fresh
// inputs, a bad index reported after a replay, the refusals). Without a GPU the GPU checks are
// skipped with a message (77).
#include <cuda_runtime_api.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "spmd/backends/cuda/cuda.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/copy_into.hpp"
#include "spmd/runtime/ops/local_map.hpp"

namespace {

int failures = 0, checks = 0;
void check(bool ok, const std::string& what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::fprintf(stderr, "FAILED: %s\n", what.c_str());
  }
}

template <class T>
bool same(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

using M = spmd::mesh<2, 4>;
using L = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::partial<spmd::reduce_op::sum>>, spmd::extents<64, 48>>;
using To = spmd::placements<spmd::replicate, spmd::shard<1>>;

std::vector<float> global() {
  std::vector<float> g(64 * 48);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((i * 37) % 101) * 0.25f - 12.f;
  return g;
}

void without_gpu() {
  try {
    (void)spmd::cuda::distribute_tensor<L>(global());
    check(false, "distribute_tensor without a GPU throws");
  } catch (const spmd::cuda::no_device& e) {
    check(std::string(e.what()).find("no CUDA device") != std::string::npos,
          std::string("the message says there is no CUDA device: ") + e.what());
  }
}

void on_stream_and_graph() {
  const auto want = spmd::sim::redistribute<To>(spmd::sim::distribute_tensor<L>(global())).full_tensor();
  cudaStream_t s = nullptr;
  spmd::cuda::check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  {
    spmd::cuda::stream_scope scope(s);
    const auto x = spmd::cuda::distribute_tensor<L>(global());
    check(same(spmd::cuda::redistribute<To>(x).full_tensor(), want), "redistribute on a user's stream");
    // Capture: the plan ran once above, so its tables are on the device; the capture holds
    // the allocations, the step launches and the frees.
    cudaGraph_t graph = nullptr;
    spmd::cuda::check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
    spmd::cuda::device_set<float> held;
    {
      auto y = spmd::cuda::redistribute<To>(x);
      held = std::move(y).locals();  // kept past the capture; freed (stream-ordered) later
    }
    spmd::cuda::check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    spmd::cuda::check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    spmd::cuda::check(cudaGraphLaunch(exec, s), "cudaGraphLaunch");
    spmd::cuda::synchronize();
    // The graph wrote `held`'s buffers (the capture recorded them): read them back.
    const spmd::host::local_set<float> got = spmd::cuda::download(held);
    const auto ref = spmd::sim::redistribute<To>(spmd::sim::distribute_tensor<L>(global()));
    bool ok = true;
    for (spmd::index_t i = 0; i < M::size; ++i)
      ok = ok && got.size(i) == ref.locals().size(i) &&
           std::memcmp(got.data(i), ref.locals().data(i), static_cast<std::size_t>(got.size(i)) * sizeof(float)) == 0;
    check(ok, "a redistribute captured in a CUDA graph and replayed gives the simulation's locals");
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  }
  spmd::cuda::check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
  cudaStreamDestroy(s);
}

void local_map_and_errors() {
  using LO = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::replicate>, spmd::extents<64, 48>>;
  using In = spmd::runtime::in_placements<spmd::placements<spmd::shard<0>, spmd::replicate>>;
  const std::vector<float> g = global();
  // A function that launches its own kernel (the library's scalar kernel) on the backend's stream.
  auto scale = [](spmd::index_t rank, spmd::cuda::device_view<float> out, spmd::cuda::device_view<const float> in) {
    spmd::cuda::kernels::scalar<spmd::binary_fn::mul, false, float>(out.data(), in.data(), float(rank + 1), out.size(),
                                                                    spmd::cuda::current_stream());
  };
  auto host_scale = [](spmd::index_t rank, spmd::host::strided_view<float> out, spmd::host::strided_view<const float> in) {
    for (spmd::index_t k = 0; k < out.size(); ++k) out.data()[k] = in.data()[k] * float(rank + 1);
  };
  const auto y = spmd::runtime::local_map<LO, In>(scale, spmd::cuda::distribute_tensor<LO>(g));
  const auto yS = spmd::runtime::local_map<LO, In>(host_scale, spmd::sim::distribute_tensor<LO>(g));
  check(same(y.full_tensor(), yS.full_tensor()), "local_map with a device kernel");
  try {
    (void)y.to_local();  // every rank is in this process: the rank must be named
    check(false, "to_local() without a rank throws on a backend holding every rank");
  } catch (const std::logic_error& e) {
    check(std::string(e.what()).find("name the rank") != std::string::npos, e.what());
  }

  using LI = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::replicate>, spmd::extents<4>>;
  using LT = spmd::layout<M, spmd::placements<spmd::replicate, spmd::shard<0>>, spmd::extents<8, 4>>;
  const std::vector<std::int64_t> bad = {1, 2, 8, 3};
  const std::vector<float> table(32, 1.f);
  try {
    (void)spmd::runtime::embedding(spmd::cuda::distribute_tensor<LI>(bad), spmd::cuda::distribute_tensor<LT>(table));
    check(false, "a bad embedding index throws");
  } catch (const std::out_of_range& e) {
    check(std::string(e.what()).find("index 8") != std::string::npos, std::string("names the index: ") + e.what());
  }
  try {
    spmd::cuda::check(cudaMemcpy(nullptr, reinterpret_cast<void*>(16), 4, cudaMemcpyDeviceToDevice), "cudaMemcpy");
    check(false, "a failing CUDA call throws");
  } catch (const spmd::cuda::error& e) {
    check(std::string(e.what()).find("cudaMemcpy failed") != std::string::npos, std::string("names the call: ") + e.what());
  }
}

/// spmd::cuda::step_graph: a step captured once and replayed with fresh inputs gives the eager
/// step's locals; a bad index in a replay is reported by wait(), naming it; a step that waits
/// for the device or keeps a buffer it made is refused, and the stream works eagerly after.
void step_graph_checks() {
  namespace rt = spmd::runtime;
  using LI = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::replicate>, spmd::extents<8>>;
  using LT = spmd::layout<M, spmd::placements<spmd::replicate, spmd::shard<0>>, spmd::extents<8, 4>>;
  std::vector<float> table(32);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>(i) * 0.5f - 3.f;
  const auto w = spmd::cuda::distribute_tensor<LT>(table);
  auto step_of = [&](const auto& idx) { return rt::redistribute<spmd::placements<spmd::replicate, spmd::replicate>>(rt::embedding(idx, w)); };
  const std::vector<std::vector<std::int64_t>> batches = {{0, 1, 2, 3, 4, 5, 6, 7}, {7, 7, 1, 0, 3, 2, 5, 4}, {2, 4, 6, 0, 1, 3, 5, 7}};
  {
    spmd::cuda::step_graph g;
    try {
      g.replay();
      check(false, "replay() before capture() throws");
    } catch (const std::logic_error& e) {
      check(std::string(e.what()).find("before capture") != std::string::npos, e.what());
    }
    auto idx = spmd::cuda::distribute_tensor<LI>(batches[0]);
    auto out = step_of(idx);  // eager: the plans' tables go up; `out` is made outside the capture
    g.capture([&] { rt::copy_into(out, step_of(idx)); });
    g.wait();
    bool ok = true;
    for (std::size_t b = 0; b < batches.size(); ++b) {
      rt::copy_into(idx, spmd::cuda::distribute_tensor<LI>(batches[b]));
      g.replay();
      g.wait();
      const auto want = spmd::sim::redistribute<spmd::placements<spmd::replicate, spmd::replicate>>(
          rt::embedding(spmd::sim::distribute_tensor<LI>(batches[b]), spmd::sim::distribute_tensor<LT>(table)));
      ok = ok && same(out.full_tensor(), want.full_tensor());
    }
    check(ok, "a captured embedding and redistribute, replayed on three batches, gives the simulation's values");
    check(g.launches() == 1 + static_cast<long long>(batches.size()), "one graph launch per step");
    std::vector<std::int64_t> bad = batches[1];
    bad[5] = 9;
    rt::copy_into(idx, spmd::cuda::distribute_tensor<LI>(bad));
    g.replay();
    try {
      g.wait();
      check(false, "a bad index in a replay is reported by wait()");
    } catch (const std::out_of_range& e) {
      check(std::string(e.what()).find("index 9") != std::string::npos, std::string("names the index: ") + e.what());
    }
  }
  {
    spmd::cuda::step_graph g;
    const auto idx = spmd::cuda::distribute_tensor<LI>(batches[0]);
    (void)step_of(idx).full_tensor();
    try {
      g.capture([&] { (void)step_of(idx).full_tensor(); });  // a read of the device inside the step
      check(false, "a step that reads a tensor is refused");
    } catch (const spmd::cuda::error& e) {
      check(true, e.what());
    }
    std::optional<std::decay_t<decltype(step_of(idx))>> kept;
    spmd::cuda::step_graph h;
    try {
      h.capture([&] { kept.emplace(step_of(idx)); });  // a buffer made in the step, kept after it
      check(false, "a step that keeps a buffer it made is refused");
    } catch (const std::logic_error& e) {
      check(std::string(e.what()).find("outlive") != std::string::npos, std::string("says so: ") + e.what());
    }
    kept.reset();
    check(same(step_of(idx).full_tensor(), step_of(idx).full_tensor()) && !spmd::cuda::capturing(),
          "after a refused capture the stream works eagerly");
  }
}

/// Launches of the operators' kernels while f runs.
template <class F>
long launches_of(F&& f) {
  const long before = spmd::cuda::op_launches().load();
  f();
  return spmd::cuda::op_launches().load() - before;
}

/// Every operator runs all ranks of the mesh in one launch, with even shards (one local
/// shape) and uneven ones (four), and gives the simulation's locals.
template <class LX>
void one_launch_per_operator(const char* what, std::size_t elems) {
  namespace rt = spmd::runtime;
  std::vector<float> g(elems);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>((i * 37) % 101) * 0.25f - 12.f;
  const auto x = spmd::cuda::distribute_tensor<LX>(g);
  const auto xS = spmd::sim::distribute_tensor<LX>(g);
  auto one = [&](const char* op, auto&& f, auto&& fS) {
    spmd::cuda::synchronize();
    std::optional<decltype(f())> y;
    const long n = launches_of([&] { y.emplace(f()); });
    check(n == 1, std::string(what) + ": " + op + " takes one launch for " + std::to_string(M::size) +
                      " ranks (took " + std::to_string(n) + ")");
    const auto yS = fS();
    bool ok = true;
    for (spmd::index_t r = 0; r < M::size; ++r) {
      const auto a = y->to_local(r), b = yS.to_local(r);
      ok = ok && a.shape == b.shape && a.data.size() == b.data.size();
      for (std::size_t k = 0; ok && k < a.data.size(); ++k)
        ok = std::fabs(a.data[k] - b.data[k]) <= 1e-5f * (1.f + std::fabs(b.data[k]));
    }
    check(ok, std::string(what) + ": " + op + " gives the simulation's locals");
  };
  one("x * x", [&] { return x * x; }, [&] { return xS * xS; });
  one("exp", [&] { return rt::exp(x); }, [&] { return rt::exp(xS); });
  one("x * 2", [&] { return x * 2.0f; }, [&] { return xS * 2.0f; });
  one("sum<1>", [&] { return rt::sum<1>(x); }, [&] { return rt::sum<1>(xS); });
  one("softmax<1>", [&] { return rt::softmax<1>(x); }, [&] { return rt::softmax<1>(xS); });
  one("layer_norm<1>", [&] { return rt::layer_norm<1>(x); }, [&] { return rt::layer_norm<1>(xS); });
  one("transpose<0, 1>", [&] { return rt::transpose<0, 1>(x); }, [&] { return rt::transpose<0, 1>(xS); });
  one("cat<1>", [&] { return rt::cat<1>(x, x); }, [&] { return rt::cat<1>(xS, xS); });
}

/// Every rank's local of a (device) dtensor and of a simulated one have the same bits.
template <class A, class B>
bool same_locals(const A& a, const B& b) {
  for (spmd::index_t r = 0; r < A::layout_type::mesh_type::size; ++r) {
    const auto x = a.to_local(r), y = b.to_local(r);
    if (!(x.shape == y.shape) || !same(x.data, y.data)) return false;
  }
  return true;
}

/// The factories make the locals on the device in one launch, and distribute_device_tensor
/// slices device memory (one step launch, one more for a Partial split): the simulation's bits
/// in both, the input aligned or not.
template <class T, class LX>
void on_device(const char* what) {
  const spmd::index_t count = spmd::host::shape_elems(LX{}.extents().to_vec());
  std::vector<T> g(static_cast<std::size_t>(count) + 1);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<T>(static_cast<float>((i * 37) % 101) * 0.25f - 12.f);
  void* mem = nullptr;
  spmd::cuda::check(cudaMalloc(&mem, g.size() * sizeof(T)), "cudaMalloc");
  T* const dev = static_cast<T*>(mem);
  spmd::cuda::check(cudaMemcpy(dev, g.data(), g.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  const std::vector<T> exact(g.begin(), g.end() - 1), shifted(g.begin() + 1, g.end());
  long n = launches_of([&] {
    check(same_locals(spmd::cuda::full<T, LX>(T(3)), spmd::sim::full<T, LX>(T(3))), std::string(what) + ": full");
  });
  check(n == 1, std::string(what) + ": full is one launch (took " + std::to_string(n) + ")");
  n = launches_of([&] {
    check(same_locals(spmd::cuda::arange<T, LX>(), spmd::sim::arange<T, LX>()), std::string(what) + ": arange");
  });
  check(n == 1, std::string(what) + ": arange is one launch (took " + std::to_string(n) + ")");
  check(same_locals(spmd::cuda::distribute_device_tensor<LX>(dev, count), spmd::sim::distribute_tensor<LX>(exact)),
        std::string(what) + ": distribute_device_tensor");
  check(same_locals(spmd::cuda::distribute_device_tensor<LX>(dev + 1, count),
                    spmd::sim::distribute_tensor<LX>(shifted)),
        std::string(what) + ": distribute_device_tensor from an unaligned pointer");
  try {
    (void)spmd::cuda::distribute_device_tensor<LX>(dev, count - 1);
    check(false, std::string(what) + ": a wrong element count throws");
  } catch (const std::invalid_argument& e) {
    check(std::string(e.what()).find("needs") != std::string::npos, std::string("the count is named: ") + e.what());
  }
  spmd::cuda::synchronize();
  spmd::cuda::check(cudaFree(dev), "cudaFree");
}

/// A transposing redistribute large enough to run by tiles (tile_big 16-byte items or more:
/// tests/cuda/step_table.cpp checks the rule), which the suite's small tensors no longer
/// reach, so that the tile kernel runs here and under racecheck.
template <class T, spmd::index_t Rows>
void tiled_transpose(const char* what) {
  using M8 = spmd::mesh<8>;
  using LA = spmd::layout<M8, spmd::placements<spmd::shard<0>>, spmd::extents<Rows, 64>>;
  using ToS1 = spmd::placements<spmd::shard<1>>;
  static_assert(Rows * 64 * sizeof(T) / 16 >= spmd::cuda::tile_big, "the step must be tiled");
  std::vector<T> g(static_cast<std::size_t>(Rows) * 64);
  for (std::size_t i = 0; i < g.size(); ++i) g[i] = T(static_cast<float>((i * 37) % 101) - 50.f);
  const auto got = spmd::cuda::redistribute<ToS1>(spmd::cuda::distribute_tensor<LA>(g));
  const auto want = spmd::sim::redistribute<ToS1>(spmd::sim::distribute_tensor<LA>(g));
  check(same_locals(got, want), std::string(what) + ": S(0)->S(1) by tiles gives the simulation's locals");
}

}  // namespace

int main() {
  if (!spmd::cuda::available()) {
    without_gpu();
    std::printf("no-GPU check: %d checks, %d failed\n", checks, failures);
    if (failures > 0) return 1;
    std::printf("SKIP cuda backend: no CUDA device; streams, graphs, local_map and errors need a GPU\n");
    return 77;
  }
  on_stream_and_graph();
  local_map_and_errors();
  step_graph_checks();
  one_launch_per_operator<spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::replicate>, spmd::extents<64, 48>>>(
      "even shards", 64 * 48);
  one_launch_per_operator<spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::shard<1>>, spmd::extents<63, 47>>>(
      "uneven shards", 63 * 47);
  on_device<float, spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::shard<1>>, spmd::extents<63, 47>>>(
      "f32 uneven S(0) S(1)");
  on_device<float, L>("f32 S(0) P(sum)");
  on_device<spmd::bfloat16, spmd::layout<M, spmd::placements<spmd::replicate, spmd::shard<1>>, spmd::extents<16, 64>>>(
      "bf16 R S(1)");
  on_device<std::int32_t, spmd::layout<M, spmd::placements<spmd::partial<spmd::reduce_op::max>, spmd::shard<0>>,
                                       spmd::extents<9, 5>>>("i32 P(max) S(0)");
  tiled_transpose<float, 8192>("f32 8192 x 64 on mesh 8");
  tiled_transpose<spmd::bfloat16, 16384>("bf16 16384 x 64 on mesh 8");
  std::printf("cuda backend: %d checks, %d failed\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
