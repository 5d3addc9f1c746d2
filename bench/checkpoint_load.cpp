// bench/checkpoint_load — loading a 1 GiB safetensors checkpoint into 8 simulated ranks with
// resharding, against the file-read floor.
//
//   meson compile -C build checkpoint_load && build/bench/checkpoint_load [--mib 1024] [--dir /tmp]
//
// The checkpoint: four f32 tensors of 256 MiB (8192 x 8192), saved from mesh<8> S(0). Loaded
// (median of 3, the file in the page cache after a first read) into:
//   - mesh<2, 4> S(1), S(0): every rank reads 1/8 of each tensor, in runs of 4096 floats;
//   - mesh<8> S(1): every rank reads 1/8, in runs of 1024 floats (16 KiB);
//   - mesh<2, 4> R, S(0): every rank reads 1/4 (each block twice over the mesh: 2 GiB in all).
// The floor: the bytes the ranks need together over the sequential read bandwidth of the same
// file measured in the same run (read() of the whole file into a warm buffer). spmd's load maps
// the file and copies each rank's runs: the floor assumes that copy runs at read() speed.
//
// The last line: RESULT load_ratio=<floor / time, worst case> load_gbps=<GB/s, S(1),S(0)>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "spmd/backends/sim/sim.hpp"

#include "timing.hpp"
#include "spmd/io/checkpoint.hpp"

namespace {

using namespace spmd;
using bench::clock_type;
using bench::median_s;
using bench::seconds_since;
constexpr index_t side = 8192;
using E = extents<side, side>;


/// read() of the whole file into a buffer, bytes per second (the file cached).
double read_bandwidth(const std::string& path, std::size_t bytes) {
  std::vector<char> buf(bytes);
  const double s = median_s([&] {
    const int fd = ::open(path.c_str(), O_RDONLY);
    std::size_t at = 0;
    while (at < bytes) {
      const ssize_t n = ::read(fd, buf.data() + at, std::min<std::size_t>(bytes - at, std::size_t{1} << 26));
      if (n <= 0) break;
      at += static_cast<std::size_t>(n);
    }
    ::close(fd);
  }, 3);
  return static_cast<double>(bytes) / s;
}

const char* names[] = {"t0", "t1", "t2", "t3"};

template <class L>
double load_all(const std::string& path) {
  return median_s([&] {
    for (const char* n : names) {
      const auto x = io::load<float, L, sim::backend>(path, n);
      if (x.locals().size(0) < 0) std::puts("");
    }
  }, 3);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = "/tmp";
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == "--dir") dir = argv[i + 1];
  const std::string path = dir + "/spmd_bench_checkpoint.safetensors";
  {
    using Save = layout<mesh<8>, placements<shard<0>>, E>;
    std::vector<float> g(static_cast<std::size_t>(side * side));
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<float>(i % 1000003);
    const auto a = sim::distribute_tensor<Save>(g);
    using P = std::pair<std::string_view, const decltype(a)&>;
    const auto t0 = clock_type::now();
    io::save_tensors<sim::backend>(path, {}, P(names[0], a), P(names[1], a), P(names[2], a), P(names[3], a));
    std::printf("# saved 4 x 256 MiB from mesh<8> S(0) in %.2f s (with fsync)\n", seconds_since(t0));
  }
  const double total = 4.0 * side * side * sizeof(float);
  const double bw = read_bandwidth(path, static_cast<std::size_t>(total) + 4096);
  std::printf("# sequential read (page cache): %.2f GB/s\n", bw / 1e9);
  std::printf("%-22s %12s %10s %10s %10s %8s\n", "load into", "bytes(MiB)", "time(ms)", "GB/s", "floor(ms)", "ratio");
  double worst = 1e9, gbps = 0;
  const auto row = [&](const char* name, double bytes, double s) {
    const double floor_s = bytes / bw;
    std::printf("%-22s %12.0f %10.1f %10.2f %10.1f %8.3f\n", name, bytes / (1 << 20), s * 1e3, bytes / s / 1e9,
                floor_s * 1e3, floor_s / s);
    worst = std::min(worst, floor_s / s);
  };
  const double s1 = load_all<layout<mesh<2, 4>, placements<shard<1>, shard<0>>, E>>(path);
  row("2x4 S(1),S(0)", total, s1);
  gbps = total / s1 / 1e9;
  row("8 S(1)", total, load_all<layout<mesh<8>, placements<shard<1>>, E>>(path));
  row("2x4 R,S(0)", 2 * total, load_all<layout<mesh<2, 4>, placements<replicate, shard<0>>, E>>(path));
  std::printf("RESULT load_ratio=%.3f load_gbps=%.2f\n", worst, gbps);
  std::remove(path.c_str());
  return 0;
}
