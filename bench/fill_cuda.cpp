// bench/fill_cuda — tensors made in device memory (issue 28, point 4) against the floor of
// the bytes they must move, measured in the same run: the factories (full, arange), the random
// draws (rand, randn, bernoulli_, dropout; rand on S(1) too, whose blocks are not runs of the
// global tensor and so take the draws' general body) and distribute_device_tensor, on 8
// ranks, f32.
//
//   meson compile -C build fill_cuda && build/bench/fill_cuda [MiB] [case]   (default 256)
//
// `case` runs only the cases whose name starts with it (to profile one kernel: ncu -c 1 ...);
// the RESULT line is printed only when every case ran.
//
// The global tensor has MiB of f32 in rows of 1024; layouts on mesh 8: S(0) (every block
// written once: the global tensor's bytes), R (8 copies), and, for distribute_device_tensor,
// S(1) (a transposing cut: runs of 128 elements).
// Floor: bytes that must move (a fill writes its blocks; dropout and distribute read their
// input once and write every block) over the device-to-device copy rate measured first
// (cudaMemcpyAsync of 1 GiB, read + write bytes per second); a cudaMemsetAsync of the global
// tensor's bytes is printed beside it, as what a plain write reaches.
// Time: CUDA events around a loop after two warm-up calls, the median of 5 rounds; each call
// includes its stream-ordered allocation, as a user's call does.
// Last line:
//   RESULT cuda_uniform_ratio=<rand f32 S(0), floor / time> cuda_fill_ratio=<worst of full,
//   arange> cuda_distribute_ratio=<worst of distribute_device_tensor's layouts>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_timing.hpp"
#include "spmd/backends/cuda/cuda.hpp"

namespace {

using spmd::index_t;
namespace cu = spmd::cuda;

using bench::copy_bandwidth;
using bench::event_timer;

using M8 = spmd::mesh<8>;
constexpr index_t cols = 1024;
template <class P>
using L = spmd::layout<M8, P, spmd::extents<spmd::dyn, spmd::dyn>>;
using S0 = spmd::placements<spmd::shard<0>>;
using S1 = spmd::placements<spmd::shard<1>>;
using R = spmd::placements<spmd::replicate>;

const char* only = nullptr;  // argv[2]: the prefix of the cases to run
bool wanted(const char* name) { return only == nullptr || std::string(name).rfind(only, 0) == 0; }

template <class F>
double line(const char* name, const char* layout, double bytes_moved, event_timer& t, F&& f, double bw) {
  if (!wanted(name)) return 1.0;
  const double us = t.us(f);
  const double floor_us = bytes_moved / bw * 1e6;
  const double ratio = floor_us / us;
  std::printf("%-26s %-5s %12.1f %12.1f %8.3f\n", name, layout, us, floor_us, ratio);
  return ratio;
}

}  // namespace

int main(int argc, char** argv) {
  if (!cu::available()) {
    std::printf("SKIP fill_cuda: no CUDA device\n");
    return 77;
  }
  const index_t mib = argc > 1 ? std::atol(argv[1]) : 256;
  if (argc > 2) only = argv[2];
  if (mib <= 0) {
    std::fprintf(stderr, "usage: fill_cuda [MiB] [case]\n");
    return 2;
  }
  const index_t rows = mib * (index_t{1} << 20) / static_cast<index_t>(sizeof(float)) / cols;
  const double g = static_cast<double>(rows * cols) * sizeof(float);
  const double bw = copy_bandwidth();
  std::printf("# device copy: %.0f GB/s; global tensor %lld MiB (%lld x %lld f32), mesh 8\n", bw / 1e9,
              static_cast<long long>(mib), static_cast<long long>(rows), static_cast<long long>(cols));
  std::printf("%-26s %-5s %12s %12s %8s\n", "case", "to", "time (us)", "floor (us)", "ratio");
  event_timer t;
  spmd::generator gen(1234);
  const L<S0> s0{spmd::extents<spmd::dyn, spmd::dyn>{rows, cols}};
  const L<R> r{spmd::extents<spmd::dyn, spmd::dyn>{rows, cols}};
  const L<S1> s1{spmd::extents<spmd::dyn, spmd::dyn>{rows, cols}};

  // What a plain write of the same bytes reaches (cudaMemsetAsync), beside the copy floor.
  cu::device_buffer<float> plain(rows * cols);
  line("cudaMemsetAsync (no alloc)", "-", g, t, ([&] {
         cu::check(cudaMemsetAsync(plain.data(), 0, static_cast<std::size_t>(g), cu::current_stream()), "cudaMemsetAsync");
       }),
       bw);
  double fill = 1e9;
  fill = std::min(fill, line("full", "S(0)", g, t, ([&] { (void)cu::full<float>(1.5f, s0); }), bw));
  fill = std::min(fill, line("arange", "S(0)", g, t, ([&] { (void)cu::arange<float>(s0); }), bw));
  line("full", "R", 8 * g, t, ([&] { (void)cu::full<float>(1.5f, r); }), bw);
  const double uniform = line("rand (uniform)", "S(0)", g, t, ([&] { (void)cu::rand<float>(gen, s0); }), bw);
  line("randn (normal)", "S(0)", g, t, ([&] { (void)cu::randn<float>(gen, s0); }), bw);
  // S(1)'s blocks are not runs of the global tensor: random_item, the body for any block.
  line("rand (uniform)", "S(1)", g, t, ([&] { (void)cu::rand<float>(gen, s1); }), bw);
  auto x = cu::full<float>(2.0f, s0);
  line("uniform_ [-1, 1)", "S(0)", g, t, ([&] { spmd::runtime::uniform_(x, -1.0, 1.0, gen); }), bw);
  line("bernoulli_", "S(0)", g, t, ([&] { spmd::runtime::bernoulli_(x, 0.3, gen); }), bw);
  line("dropout", "S(0)", 2 * g, t, ([&] { (void)spmd::runtime::dropout(x, 0.1, gen); }), bw);

  cu::device_buffer<float> global(rows * cols);
  cu::check(cudaMemsetAsync(global.data(), 0, static_cast<std::size_t>(g), cu::current_stream()), "cudaMemsetAsync");
  double dist = 1e9;
  dist = std::min(dist, line("distribute_device_tensor", "S(0)", 2 * g,
                             t, ([&] { (void)cu::distribute_device_tensor<L<S0>>(global.data(), rows * cols, s0); }), bw));
  dist = std::min(dist, line("distribute_device_tensor", "S(1)", 2 * g,
                             t, ([&] { (void)cu::distribute_device_tensor<L<S1>>(global.data(), rows * cols, s1); }), bw));
  dist = std::min(dist, line("distribute_device_tensor", "R", 9 * g,
                             t, ([&] { (void)cu::distribute_device_tensor<L<R>>(global.data(), rows * cols, r); }), bw));
  if (only == nullptr)
    std::printf("RESULT cuda_uniform_ratio=%.3f cuda_fill_ratio=%.3f cuda_distribute_ratio=%.3f\n", uniform, fill,
                dist);
  return 0;
}
