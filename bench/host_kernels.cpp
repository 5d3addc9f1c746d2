// bench/host_kernels — each host kernel the models use, against its floor: the bytes it must
// read and write at the copy bandwidth measured in the same run at the same size (a memcpy
// of that many bytes: L2-resident at 64 KiB, memory at 64 MiB).
//
//   meson compile -C build host_kernels && build/bench/host_kernels [--isa scalar|avx2|avx512]
//
// Kernels (float, host/vector_math.hpp, on this CPU's path unless --isa limits it):
//   exp, tanh, gelu_tanh      y = f(x)                       8 bytes an element
//   gelu_tanh_backward        y = g · gelu'(x)               12
//   softmax, log_softmax      rows of 512                    8 (each row stays in L1)
//   layer_norm                rows of 512, weight and bias   8
//   layer_norm_backward       rows of 512, weight            12
//   adamw                     p, g, m, v -> p, m, v          28
//   add                       the elementwise add's kernel   12 (runtime/ops/elementwise.hpp)
// For each: the working set from 64 KiB to 64 MiB, GB/s of the bytes above, and floor =
// the copy's time for those bytes / the kernel's time (1: at the copy's speed). The
// transcendental kernels are compute-bound where the data is in cache; memory-bound
// kernels are to reach 0.7 of the floor (issue 54). Time: 5 rounds, each timing as many calls
// as take 20 ms of the kernel and then of the copy; the medians of the times and the ratios.
//   RESULT host_kernels_min_floor=<the least floor among the memory-bound kernels at 64 MiB>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "spmd/host/vector_math.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "timing.hpp"

namespace {

namespace vm = spmd::host::vector_math;

/// 64-byte aligned storage, as the library's buffers are (host/buffer.hpp).
template <class T>
struct aligned_allocator {
  using value_type = T;
  aligned_allocator() = default;
  template <class U>
  aligned_allocator(const aligned_allocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{64})); }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{64}); }
  bool operator==(const aligned_allocator&) const { return true; }
};
using floats = std::vector<float, aligned_allocator<float>>;

struct kernel {
  const char* name;
  int bytes_per_elem;  // read + written
  bool memory_bound;   // expected to stream at the copy's rate at every size
  std::function<void(floats*, std::int64_t)> run;
};

/// How many calls of f take 20 ms (after a warm call), so that a 64 KiB kernel of a few
/// microseconds is timed over thousands.
template <class F>
long calls_for(F& f) {
  f();
  long calls = 1;
  while (true) {
    const auto t0 = bench::clock_type::now();
    for (long i = 0; i < calls; ++i) f();
    if (bench::seconds_since(t0) >= 0.02) return calls;
    calls *= 2;
  }
}

/// A kernel's seconds per call and its floor (the copy's time over the kernel's), from 5
/// rounds that each time the kernel and then the copy: the medians of the kernel's times and
/// of the rounds' ratios. A slow spell of this shared machine then falls on both sides of a
/// ratio (timed apart, the two moved the 64 MiB floor by ±30 %).
template <class K, class C>
std::pair<double, double> timed_against(K&& kernel, C&& copy) {
  const long kc = calls_for(kernel), cc = calls_for(copy);
  std::vector<double> ks, ratios;
  for (int round = 0; round < 5; ++round) {
    auto t0 = bench::clock_type::now();
    for (long i = 0; i < kc; ++i) kernel();
    const double k = bench::seconds_since(t0) / static_cast<double>(kc);
    t0 = bench::clock_type::now();
    for (long i = 0; i < cc; ++i) copy();
    const double c = bench::seconds_since(t0) / static_cast<double>(cc);
    ks.push_back(k);
    ratios.push_back(c / k);
  }
  return {bench::median(ks), bench::median(ratios)};
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--isa" && i + 1 < argc) {
      const std::string v = argv[++i];
      if (v == "scalar") spmd::host::limit_kernel_isa(spmd::host::vector_isa::scalar);
      else if (v == "avx2") spmd::host::limit_kernel_isa(spmd::host::vector_isa::avx2);
      else if (v != "avx512") {
        std::fprintf(stderr, "host_kernels: --isa %s: the paths are scalar, avx2 and avx512\n", v.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "host_kernels: unknown argument %s (--isa scalar|avx2|avx512)\n", a.c_str());
      return 2;
    }
  }
  std::printf("host kernels: %s path (this CPU's best: %s)\n", spmd::host::to_string(spmd::host::kernel_isa()),
              spmd::host::to_string(spmd::host::best_kernel_isa()));
  constexpr std::int64_t row = 512;
  spmd::optim_math::adamw_coeffs<float> c{true, 1 - 1e-5f, 0.1f, 0.999f, 0.001f, 0.03f, 1e-8f, 1e-3f};
  // v[0..3]: the operands (each sized for the kernel), filled once
  const std::vector<kernel> kernels = {
      {"exp", 8, false, [](auto* v, std::int64_t n) { vm::map<spmd::unary_fn::exp>(v[0].data(), v[1].data(), n); }},
      {"tanh", 8, false, [](auto* v, std::int64_t n) { vm::map<spmd::unary_fn::tanh>(v[0].data(), v[1].data(), n); }},
      {"gelu_tanh", 8, false,
       [](auto* v, std::int64_t n) { vm::map<spmd::unary_fn::gelu_tanh>(v[0].data(), v[1].data(), n); }},
      {"gelu_tanh_backward", 12, false,
       [](auto* v, std::int64_t n) { vm::gelu_tanh_backward(v[0].data(), v[2].data(), v[1].data(), n); }},
      {"softmax", 8, true,
       [](auto* v, std::int64_t n) { vm::softmax_rows<false>(v[0].data(), row, v[1].data(), row, n / row, row); }},
      {"log_softmax", 8, true,
       [](auto* v, std::int64_t n) { vm::softmax_rows<true>(v[0].data(), row, v[1].data(), row, n / row, row); }},
      {"layer_norm", 8, true,
       [](auto* v, std::int64_t n) {
         vm::layer_norm_rows(v[0].data(), row, v[1].data(), row, n / row, row, v[3].data(), v[3].data() + row, 1e-5f);
       }},
      {"layer_norm_backward", 12, true,
       [](auto* v, std::int64_t n) {
         vm::layer_norm_backward_rows(v[2].data(), row, v[0].data(), row, v[3].data(), v[1].data(), row, n / row, row,
                                      1e-5f);
       }},
      {"adamw", 28, true,
       [c](auto* v, std::int64_t n) {
         vm::adamw(v[0].data(), v[2].data(), v[1].data(), v[3].data(), v[0].data(), v[1].data(), v[3].data(), n, c);
       }},
      {"add", 12, true,
       [](auto* v, std::int64_t n) {
         using spmd::host::strided_view;
         spmd::shape_vec shape{};
         shape.push_back(n);
         spmd::runtime::op_kernel<spmd::ops::binary<spmd::ops::add_fn>>::run(
             {}, strided_view<float>(v[1].data(), shape), spmd::runtime::op_rank_info{},
             strided_view<const float>(v[0].data(), shape), strided_view<const float>(v[2].data(), shape));
       }},
  };
  double least = 1e30;
  std::printf("%-20s %10s %10s %8s\n", "kernel", "KiB", "GB/s", "floor");
  for (const kernel& k : kernels) {
    for (std::size_t kib = 64; kib <= 64 * 1024; kib *= 4) {
      const std::size_t bytes = kib * 1024;
      const auto n = static_cast<std::int64_t>(bytes / static_cast<std::size_t>(k.bytes_per_elem)) / row * row;
      floats v[4];
      for (auto& x : v) x.assign(static_cast<std::size_t>(n + 2 * row), 0.5f);
      for (std::int64_t i = 0; i < n; ++i) v[0][static_cast<std::size_t>(i)] = std::sin(static_cast<float>(i)) * 3;
      const double moved = static_cast<double>(n) * k.bytes_per_elem;
      // the floor: a memcpy of as many bytes read plus written (copying half of them)
      std::vector<char> a(static_cast<std::size_t>(moved) / 2, 1), b(a.size(), 2);
      const auto [s, floor] = timed_against(
          [&] {
            k.run(v, n);
            asm volatile("" : : "r"(v[1].data()) : "memory");
          },
          [&] {
            std::memcpy(b.data(), a.data(), a.size());
            asm volatile("" : : "r"(b.data()) : "memory");  // (the copy is not optimised away)
          });
      std::printf("%-20s %10zu %10.2f %8.3f\n", k.name, kib, moved / s / 1e9, floor);
      if (k.memory_bound && kib == 64 * 1024) least = std::min(least, floor);
    }
  }
  std::printf("RESULT host_kernels_min_floor=%.3f\n", least);
  return 0;
}
