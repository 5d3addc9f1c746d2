// bench/rng — random tensors on 8 simulated ranks against the memory-write floor and PyTorch.
//
//   meson compile -C build rng && build/bench/rng [--mib 256] [--no-torch] [--isa avx512|avx2|scalar]
//
// uniform_ and normal_ (f32, f64, bf16, f16) in place on a dtensor of 256 MiB sharded S(0)
// over 8 ranks of mesh<8> (each rank its own block, the simulation's threads sharing the
// ranks), timed by median of 5 after a warm call. The floor is the time to write the same
// bytes once into a warm 256 MiB buffer, measured in the same run, the faster of memset on
// one thread and streaming stores on the simulation's threads (as the draws write: without
// them the draws beat the floor on machines whose memset reads for ownership). Philox4x32-10 costs
// 10 rounds of two 32x32->64 multiplies per 16 bytes of f32 output, so on a CPU the draw is
// compute-bound: the header also shows one core's uniform f32 rate into a buffer that stays in
// cache (the compute ceiling, times the threads); --isa caps the host's vector path
// (host/random_isa.hpp: the best the CPU has by default), to compare the paths. When `python3 -c "import torch"` works
// (or $SPMD_BENCH_PYTHON names a Python that has torch), PyTorch's CPU uniform_ and normal_ on
// the same bytes with the same thread count are timed the same way and shown beside.
//
// The last line: RESULT rng_uniform_ratio=<floor / time, f32 uniform> rng_normal_ratio=<...>
// uniform_gbps=<GB/s> normal_gbps=<GB/s> half_vs_f32=<the worst of bf16 and f16's element
// rate over f32's, uniform and normal, each pair drawn in turns> [vs_torch_normal=<spmd / torch, normal f32 GB/s>
// vs_torch_uniform=<..., uniform f32>] (the last two only where torch was timed).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "spmd/backends/sim/sim.hpp"

#include "timing.hpp"

namespace {

using spmd::dyn;
using spmd::index_t;
using bench::clock_type;
using bench::median_s;
using bench::seconds_since;

/// Bytes written per second into a warm buffer, two ways: memset on one thread, and 16-byte
/// streaming stores (no read for ownership, as the draws write large outputs) from `threads`
/// threads, each its own slice. The floor takes the faster.
struct write_rates {
  double memset = 0, stream = 0;
  double best() const { return std::max(memset, stream); }
};

write_rates write_bandwidth(std::size_t bytes, int threads) {
  std::vector<char> a(bytes, 1);
  int v = 0;
  write_rates r;
  r.memset = static_cast<double>(bytes) / median_s([&] { std::memset(a.data(), ++v & 0x7f, bytes); }, 7);
#if defined(__x86_64__)
  char* const base = a.data() + (16 - reinterpret_cast<std::uintptr_t>(a.data()) % 16) % 16;
  const std::size_t slice = (bytes - 16) / static_cast<std::size_t>(threads) / 16 * 16;  // per thread
  const auto fill = [&](int t, int value) {
    const __m128i x = _mm_set1_epi8(static_cast<char>(value));
    char* const p = base + slice * static_cast<std::size_t>(t);
    for (std::size_t i = 0; i < slice; i += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(p + i), x);
    _mm_sfence();
  };
  r.stream = static_cast<double>(slice * static_cast<std::size_t>(threads)) / median_s([&] {
    const int value = ++v & 0x7f;
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(fill, t, value);
    fill(0, value);
    for (std::thread& t : pool) t.join();
  }, 7);
#endif
  if (a[bytes / 2] == 0x7f + 1) std::puts("");  // keep the stores
  return r;
}

/// Philox blocks per second on one core (computed, xor-summed, not stored).
double philox_blocks_per_s() {
  const std::uint64_t n = std::uint64_t{1} << 24;
  std::uint32_t acc = 0;
  const double s = median_s([&] {
    for (std::uint64_t i = 0; i < n; ++i) {
      const spmd::random::philox_block b = spmd::random::philox_stream_block(42, i);
      acc ^= b[0] ^ b[1] ^ b[2] ^ b[3];
    }
  }, 3);
  if (acc == 0x12345678u) std::puts("");
  return static_cast<double>(n) / s;
}

/// One case's figures.
struct figures {
  double seconds = 0, bytes = 0, elems = 0;
  double gbps() const { return bytes / seconds / 1e9; }
  double gelems() const { return elems / seconds / 1e9; }
};

/// PyTorch's CPU uniform_ and normal_ on the same bytes and threads, when `torch` imports
/// (python3, or $SPMD_BENCH_PYTHON): GB/s per case name, 0 where not measured.
struct torch_rates {
  std::vector<std::pair<std::string, double>> gbps_of;
  double gbps(const std::string& name) const {
    for (const auto& [n, g] : gbps_of)
      if (n == name) return g;
    return 0;
  }
};

torch_rates measure_torch(std::size_t bytes, int threads) {
  const char* py = std::getenv("SPMD_BENCH_PYTHON");
  const std::string script =
      "import time, torch\n"
      "torch.set_num_threads(" + std::to_string(threads) + ")\n"
      "B = " + std::to_string(bytes) + "\n"
      "for name, dt in ((\"f32\", torch.float32), (\"f64\", torch.float64), (\"bf16\", torch.bfloat16), "
      "(\"f16\", torch.float16)):\n"
      "  x = torch.empty(B // torch.tensor([], dtype=dt).element_size(), dtype=dt)\n"
      "  for dist in (\"uniform\", \"normal\"):\n"
      "    f = x.uniform_ if dist == \"uniform\" else x.normal_\n"
      "    f(); s = []\n"
      "    for _ in range(5):\n"
      "      t = time.perf_counter(); f(); s.append(time.perf_counter() - t)\n"
      "    s.sort(); print(dist, name, B / s[2] / 1e9, torch.__version__, flush=True)\n";
  // the script has no single quote, so the shell passes it as one word
  const std::string cmd = std::string(py ? py : "python3") + " -c '" + script + "' 2>/dev/null";
  torch_rates r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char dist[32], name[16], version[64];
  double g = 0;
  while (std::fscanf(p, "%31s %15s %lf %63s", dist, name, &g, version) == 4) {
    r.gbps_of.emplace_back(std::string(dist) + " " + name, g);
    if (r.gbps_of.size() == 1) std::printf("# PyTorch %s CPU, %d threads, same bytes\n", version, threads);
  }
  pclose(p);
  return r;
}

template <class T>
figures run(const char* name, std::size_t bytes, double write_bw, bool normal, const torch_rates& torch) {
  using L = spmd::layout<spmd::mesh<8>, spmd::placements<spmd::shard<0>>, spmd::extents<dyn>>;
  const index_t elems = static_cast<index_t>(bytes / sizeof(T));
  auto x = spmd::sim::empty<T, L>(L{spmd::extents<dyn>{elems}});
  spmd::generator g(1);
  figures f;
  f.seconds = median_s([&] {
    if (normal) spmd::sim::normal_(x, 0.0, 1.0, g);
    else spmd::sim::uniform_(x, 0.0, 1.0, g);
  });
  f.bytes = static_cast<double>(elems) * sizeof(T);
  f.elems = static_cast<double>(elems);
  const double floor_s = f.bytes / write_bw;
  std::printf("%-14s %6.0f %10.2f %7.2f %8.3f %10.2f %7.3f", name, f.bytes / (1 << 20), f.seconds * 1e3,
              f.gbps(), f.gelems(), floor_s * 1e3, floor_s / f.seconds);
  if (const double t = torch.gbps(name); t > 0) std::printf(" %9.2f %8.2f", t, f.gbps() / t);
  std::printf("\n");
  return f;
}

/// T's element rate over f32's for one distribution, the two drawn in turns: `rounds` rounds,
/// each timing one draw of `elems` elements of each (which goes first alternates), the
/// median of the rounds' ratios. This VM's speed drifts by tens of percent over seconds;
/// taking the types in turns puts both under the same drift, which timing the table's
/// cases one after the other does not.
template <class T>
double paired_element_ratio(index_t elems, bool normal, int rounds = 9) {
  using L = spmd::layout<spmd::mesh<8>, spmd::placements<spmd::shard<0>>, spmd::extents<dyn>>;
  auto f32 = spmd::sim::empty<float, L>(L{spmd::extents<dyn>{elems}});
  auto half = spmd::sim::empty<T, L>(L{spmd::extents<dyn>{elems}});
  spmd::generator g(1);
  const auto time = [&](auto& x) {
    const auto t0 = clock_type::now();
    if (normal) spmd::sim::normal_(x, 0.0, 1.0, g);
    else spmd::sim::uniform_(x, 0.0, 1.0, g);
    return seconds_since(t0);
  };
  time(f32);
  time(half);
  std::vector<double> r;
  for (int k = 0; k < rounds; ++k) {
    double a = 0, b = 0;
    if (k % 2 == 0) a = time(f32), b = time(half);
    else b = time(half), a = time(f32);
    r.push_back(a / b);  // the same elements: time ratio = element-rate ratio
  }
  std::sort(r.begin(), r.end());
  return r[r.size() / 2];
}

/// Elements per second of one core drawing uniform f32 into a buffer that stays in cache:
/// the compute ceiling of the host path the draws take (host/random_isa.hpp).
double one_core_uniform_elems_per_s() {
  const index_t n = index_t{1} << 14;
  std::vector<float> out(static_cast<std::size_t>(n));
  spmd::random::draw d;
  d.seed = 7;
  const int reps = 512;
  const double s = median_s([&] {
    for (int r = 0; r < reps; ++r) {
      d.offset += static_cast<std::uint64_t>(n);
      spmd::host::fill_run<float>(d, 0, n, out.data());
    }
  }, 3);
  return static_cast<double>(n) * reps / s;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 256;
  bool with_torch = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mib" && i + 1 < argc && std::atoi(argv[i + 1]) > 0) {
      mib = static_cast<std::size_t>(std::atoi(argv[++i]));
    } else if (a == "--no-torch") {
      with_torch = false;
    } else if (a == "--isa" && i + 1 < argc) {
      const std::string isa = argv[++i];
      using spmd::host::random_isa;
      if (isa != "avx512" && isa != "avx2" && isa != "scalar") {
        std::fprintf(stderr, "rng: bad --isa '%s' (avx512, avx2 or scalar)\n", isa.c_str());
        return 2;
      }
      spmd::host::limit_draw_isa(isa == "avx512" ? random_isa::avx512
                                 : isa == "avx2" ? random_isa::avx2
                                                 : random_isa::scalar);
    } else {
      std::fprintf(stderr, "rng: bad argument '%s' (usage: rng [--mib N>0] [--no-torch] [--isa avx512|avx2|scalar])\n",
                   argv[i]);
      return 2;
    }
  }
  const std::size_t bytes = mib << 20;
  const int threads = spmd::sim::threads();
  const write_rates writes = write_bandwidth(bytes, threads);
  const double write_bw = writes.best();
  const double blocks = philox_blocks_per_s();
  const double core = one_core_uniform_elems_per_s();
  std::printf("# write bandwidth: memset %.2f GB/s (one thread), streaming stores %.2f GB/s (%d threads); "
              "Philox4x32-10 one block at a time: %.1f M blocks/s on one core\n",
              writes.memset / 1e9, writes.stream / 1e9, threads, blocks / 1e6);
  std::printf("# host draw path: %s; uniform f32 on one core, in cache: %.3f G elements/s (%.2f GB/s), "
              "x %d threads = %.2f GB/s (the compute ceiling)\n",
              spmd::host::to_string(spmd::host::draw_isa()), core / 1e9, core * 4 / 1e9, threads, core * 4 * threads / 1e9);
  const torch_rates torch = with_torch ? measure_torch(bytes, threads) : torch_rates{};
  if (torch.gbps_of.empty()) std::printf("# PyTorch: not importable (or --no-torch), its rates are not shown\n");
  std::printf("# 8 simulated ranks (mesh<8>, S(0)), in place, %d threads; floor = bytes / write bandwidth\n",
              threads);
  std::printf("%-14s %6s %10s %7s %8s %10s %7s%s\n", "case", "MiB", "time(ms)", "GB/s", "Gelem/s", "floor(ms)",
              "ratio", torch.gbps_of.empty() ? "" : "  torch GB/s  spmd/torch");
  const figures uf = run<float>("uniform f32", bytes, write_bw, false, torch);
  const figures nf = run<float>("normal f32", bytes, write_bw, true, torch);
  run<double>("uniform f64", bytes, write_bw, false, torch);
  run<double>("normal f64", bytes, write_bw, true, torch);
  const figures ub = run<spmd::bfloat16>("uniform bf16", bytes, write_bw, false, torch);
  const figures nb = run<spmd::bfloat16>("normal bf16", bytes, write_bw, true, torch);
  const figures uh = run<spmd::float16>("uniform f16", bytes, write_bw, false, torch);
  const figures nh = run<spmd::float16>("normal f16", bytes, write_bw, true, torch);
  // the 16-bit types' element rate against f32's, same distribution, drawn in turns (the
  // table's rows ran one after another): the worst of the four
  const index_t pair_elems = static_cast<index_t>(bytes / sizeof(float));
  const double pairs[4] = {paired_element_ratio<spmd::bfloat16>(pair_elems, false),
                           paired_element_ratio<spmd::float16>(pair_elems, false),
                           paired_element_ratio<spmd::bfloat16>(pair_elems, true),
                           paired_element_ratio<spmd::float16>(pair_elems, true)};
  std::printf("# element rate over f32's, %lld elements each, drawn in turns (median of 9 rounds): "
              "uniform bf16 %.3f, uniform f16 %.3f, normal bf16 %.3f, normal f16 %.3f "
              "(from the table's rows: %.3f %.3f %.3f %.3f)\n",
              static_cast<long long>(pair_elems), pairs[0], pairs[1], pairs[2], pairs[3], ub.gelems() / uf.gelems(),
              uh.gelems() / uf.gelems(), nb.gelems() / nf.gelems(), nh.gelems() / nf.gelems());
  const double half = std::min({pairs[0], pairs[1], pairs[2], pairs[3]});
  std::printf("RESULT rng_uniform_ratio=%.3f rng_normal_ratio=%.3f uniform_gbps=%.2f normal_gbps=%.2f "
              "half_vs_f32=%.3f",
              bytes / write_bw / uf.seconds, bytes / write_bw / nf.seconds, uf.gbps(), nf.gbps(), half);
  if (const double t = torch.gbps("normal f32"); t > 0) std::printf(" vs_torch_normal=%.2f", nf.gbps() / t);
  if (const double t = torch.gbps("uniform f32"); t > 0) std::printf(" vs_torch_uniform=%.2f", uf.gbps() / t);
  std::printf("\n");
  return 0;
}
