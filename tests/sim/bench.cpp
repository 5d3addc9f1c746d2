// tests/sim/bench.cpp — how fast the simulation redistributes (not a test; built on demand:
// `meson compile -C build sim_bench && build/tests/sim/sim_bench [--small-only]`).
//
// Large: 256 MiB of f32 on 8 ranks. The floor is the bytes the simulation must write (every
// rank's new local, since the source dtensor stays valid) divided by the bandwidth of one
// warm 256 MiB memcpy on this machine; ratio = floor / measured (>= 1: faster than copying
// the output once). Reductions also read every rank's input, which the floor leaves out.
// Small: 4 KiB of f32 on 8 ranks, microseconds per redistribute, compile-time plan path and
// runtime plan path (schedules built on every call, as `execute(plan, ...)` does).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <spmd/backends/sim/sim.hpp>
#include <spmd/spmd.hpp>

namespace {

using namespace spmd;
using clk = std::chrono::steady_clock;

template <class F>
double best_of(int reps, F&& f) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = clk::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clk::now() - t0).count());
  }
  return best;
}

double memcpy_bandwidth(std::size_t bytes) {
  std::vector<char> a(bytes, 1), b(bytes, 2);
  const double t = best_of(5, [&] { std::memcpy(b.data(), a.data(), bytes); });
  return static_cast<double>(bytes) / t;
}

template <class D>
double written_bytes(const D& d) {
  double n = 0;
  for (index_t r = 0; r < d.locals().ranks(); ++r) n += static_cast<double>(d.locals().size(r));
  return n * sizeof(typename D::value_type);
}

template <class P, class X>
void large(const char* name, const X& x, double bw) {
  double bytes = 0;
  const double t = best_of(3, [&] {
    const auto y = sim::redistribute<P>(x);
    bytes = written_bytes(y);
  });
  const double floor = bytes / bw;
  std::printf("  %-26s %9.2f ms   floor %8.2f ms   ratio %.2f\n", name, t * 1e3, floor * 1e3,
              floor / t);
}

template <class L, class P>
void small(const char* name) {
  using Dst = layout<typename L::mesh_type, P, typename L::extents_type>;
  const auto x = sim::arange<float, L>();
  const int n = 20000;
  const double typed = best_of(5, [&] {
                         for (int i = 0; i < n; ++i) {
                           const auto y = sim::redistribute<P>(x);
                           asm volatile("" : : "r"(y.locals().data(0)) : "memory");
                         }
                       }) / n;
  constexpr const plan& p = plan_of<L, Dst, float>::value();
  const shape_vec g = L{}.extents().to_vec();
  const double runtime = best_of(5, [&] {
                           for (int i = 0; i < n; ++i) {
                             const auto y = sim::execute(p, g, x.locals());
                             asm volatile("" : : "r"(y.data(0)) : "memory");
                           }
                         }) / n;
  std::printf("  %-26s typed %6.3f us   runtime plan %6.3f us\n", name, typed * 1e6,
              runtime * 1e6);
}

}  // namespace

int main(int argc, char** argv) {
  const bool small_only = argc > 1 && std::string(argv[1]) == "--small-only";
  {
    std::printf("4 KiB f32 (32 x 32) on 8 ranks, per redistribute:\n");
    using M = mesh<8>;
    using M2 = mesh<2, 4>;
    using E = extents<32, 32>;
    small<layout<M, placements<shard<0>>, E>, placements<replicate>>("S(0) -> R");
    small<layout<M, placements<shard<0>>, E>, placements<shard<1>>>("S(0) -> S(1)");
    small<layout<M, placements<replicate>, E>, placements<shard<1>>>("R -> S(1)");
    small<layout<M, placements<partial<>>, E>, placements<replicate>>("P -> R");
    small<layout<M, placements<partial<>>, E>, placements<shard<0>>>("P -> S(0)");
    small<layout<M, placements<shard<0>>, E>, placements<partial<>>>("S(0) -> P");
    small<layout<M2, placements<shard<0>, shard<1>>, E>, placements<replicate, replicate>>(
        "2x4 S(0)S(1) -> RR");
    small<layout<M2, placements<shard<0>, shard<1>>, E>, placements<shard<1>, shard<0>>>(
        "2x4 S(0)S(1) -> S(1)S(0)");
  }
  if (small_only) return 0;

  constexpr index_t rows = 8192, cols = 8192;  // 256 MiB of f32
  using E = extents<rows, cols>;
  using M = mesh<8>;
  using M2 = mesh<2, 4>;
  const double bw = memcpy_bandwidth(rows * cols * sizeof(float));
  std::printf("\n256 MiB f32 on 8 ranks (memcpy %.2f GB/s):\n", bw / 1e9);
  {
    const auto s0 = sim::full<float, layout<M, placements<shard<0>>, E>>(1.f);
    large<placements<replicate>>("S(0) -> R  (all_gather)", s0, bw);
    large<placements<shard<1>>>("S(0) -> S(1)  (all_to_all)", s0, bw);
    large<placements<partial<>>>("S(0) -> P  (fill)", s0, bw);
  }
  {
    const auto r = sim::full<float, layout<M, placements<replicate>, E>>(1.f);
    large<placements<shard<0>>>("R -> S(0)  (chunk)", r, bw);
    large<placements<shard<1>>>("R -> S(1)  (chunk)", r, bw);
  }
  {
    const auto p = sim::full<float, layout<M, placements<partial<>>, E>>(1.f);
    large<placements<replicate>>("P -> R  (all_reduce)", p, bw);
    large<placements<shard<0>>>("P -> S(0)  (reduce_scatter)", p, bw);
  }
  {
    const auto x = sim::full<float, layout<M2, placements<shard<0>, shard<1>>, E>>(1.f);
    large<placements<replicate, replicate>>("2x4 S(0)S(1) -> RR", x, bw);
    large<placements<shard<1>, shard<0>>>("2x4 S(0)S(1) -> S(1)S(0)", x, bw);
  }
  return 0;
}
