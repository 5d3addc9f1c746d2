// bench/rng — random tensors on 8 simulated ranks against the memory-write floor.
//
//   meson compile -C build rng && build/bench/rng [--mib 256]
//
// uniform_ and normal_ (f32 and f64) in place on a dtensor of 256 MiB sharded S(0) over 8
// ranks of mesh<8> (each rank its own 32 MiB block), timed by median of 5 after a warm call.
// The floor is the time to write the same bytes once (memset of a warm 256 MiB buffer,
// measured in the same run): a generator that writes each element once at memory speed
// reaches ratio 1. Philox4x32-10 costs 10 rounds of two 32x32->64 multiplies per 16 bytes
// of f32 output, so on a CPU core the draw is compute-bound: the table also shows the
// Philox-only rate (blocks computed and summed, nothing stored), the ceiling for this code.
//
// The last line: RESULT rng_uniform_ratio=<floor / time, f32 uniform> rng_normal_ratio=<...>
// uniform_gbps=<GB/s> normal_gbps=<GB/s>.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/backends/sim/sim.hpp"

#include "timing.hpp"

namespace {

using spmd::dyn;
using spmd::index_t;
using bench::clock_type;
using bench::median_s;
using bench::seconds_since;


/// Bytes written per second by memset into a warm buffer.
double write_bandwidth(std::size_t bytes) {
  std::vector<char> a(bytes, 1);
  int v = 0;
  const double s = median_s([&] { std::memset(a.data(), ++v & 0x7f, bytes); }, 7);
  if (a[bytes / 2] == 0x7f + 1) std::puts("");  // keep the stores
  return static_cast<double>(bytes) / s;
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

template <class T>
void run(const char* name, index_t elems, double write_bw, double* ratio_out, double* gbps_out, bool normal) {
  using L = spmd::layout<spmd::mesh<8>, spmd::placements<spmd::shard<0>>, spmd::extents<dyn>>;
  auto x = spmd::sim::empty<T, L>(L{spmd::extents<dyn>{elems}});
  spmd::generator g(1);
  const double s = median_s([&] {
    if (normal) spmd::sim::normal_(x, 0.0, 1.0, g);
    else spmd::sim::uniform_(x, 0.0, 1.0, g);
  });
  const double bytes = static_cast<double>(elems) * sizeof(T);
  const double floor_s = bytes / write_bw;
  std::printf("%-16s %10.0f %12.2f %10.2f %10.2f %8.3f\n", name, bytes / (1 << 20), s * 1e3,
              bytes / s / 1e9, floor_s * 1e3, floor_s / s);
  if (ratio_out) *ratio_out = floor_s / s;
  if (gbps_out) *gbps_out = bytes / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t mib = 256;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--mib") mib = static_cast<std::size_t>(std::atoi(argv[i + 1]));
  const std::size_t bytes = mib << 20;
  const double write_bw = write_bandwidth(bytes);
  const double blocks = philox_blocks_per_s();
  std::printf("# memset write bandwidth: %.2f GB/s; Philox4x32-10: %.1f M blocks/s on one core "
              "(%.2f GB/s of f32, the compute ceiling)\n",
              write_bw / 1e9, blocks / 1e6, blocks * 16 / 1e9);
  std::printf("# 8 simulated ranks (mesh<8>, S(0)), in place; floor = bytes / write bandwidth\n");
  std::printf("%-16s %10s %12s %10s %10s %8s\n", "case", "MiB", "time(ms)", "GB/s", "floor(ms)", "ratio");
  double ru = 0, rn = 0, gu = 0, gn = 0;
  run<float>("uniform f32", static_cast<index_t>(bytes / 4), write_bw, &ru, &gu, false);
  run<float>("normal f32", static_cast<index_t>(bytes / 4), write_bw, &rn, &gn, true);
  run<double>("uniform f64", static_cast<index_t>(bytes / 8), write_bw, nullptr, nullptr, false);
  run<double>("normal f64", static_cast<index_t>(bytes / 8), write_bw, nullptr, nullptr, true);
  run<spmd::bfloat16>("uniform bf16", static_cast<index_t>(bytes / 2), write_bw, nullptr, nullptr, false);
  std::printf("RESULT rng_uniform_ratio=%.3f rng_normal_ratio=%.3f uniform_gbps=%.2f normal_gbps=%.2f\n",
              ru, rn, gu, gn);
  return 0;
}
