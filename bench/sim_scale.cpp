// bench/sim_scale — the MLP demo's layers on an 8x8 mesh (64 simulated ranks): time and
// memory, on 1 thread and on all; and the cost per rank of a small redistribute on the
// runtime path (64 ranks) against the compile-time path (32 ranks and fewer).
//
//   meson compile -C build sim_scale && build/bench/sim_scale [--quick]
//
// The model: x (batch, d_model) [S(0) on dp, R on tp]; W1 (d_hidden, d_model) column-parallel
// on tp; relu; W2 (d_model, d_hidden) row-parallel on tp (one all_reduce over tp); f32.
// Memory: what the weights, the input and the output hold (bytes_held: replicas once) against
// what 64 separate copies would take (the sum of the ranks' local sizes, as LocalTensor
// stores them), and the process's peak resident set.
// Then many ranks (run-time layouts, 1-D meshes of 4,096 to 65,536 ranks, 4 elements a rank):
// distribute, S(0) -> R, S(0) -> S(1) and R -> S(0), whose cost per rank should not grow with
// the ranks.
// The last line: RESULT scale_forward_ms=<1 thread> scale_forward_all_ms=<all threads>
//                       scale_memory=<held / per-rank copies, weights> runtime_path_ratio=
//                       <64-rank runtime path / 32-rank compile-time path, us per rank>
//                       many_ranks_growth=<us per rank at 65,536 ranks / at 4,096, the worst
//                       of the four>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/io/placement_text.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/tp.hpp"
#include "spmd/backends/sim/sim.hpp"

namespace {

using namespace spmd;
namespace sim = spmd::sim;
using clock_type = std::chrono::steady_clock;

/// n values in [-scale, scale), a fixed function of (i, seed): the timings and memory do not
/// depend on the values, only on their being finite.
std::vector<float> values(std::size_t n, unsigned seed, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = scale * (static_cast<float>((i * 2654435761u + seed * 40503u) % 2001u) / 1000.f - 1.f);
  return v;
}

double peak_rss_mib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // KiB on Linux
}

template <class F>
double median_ms(F&& f, int runs) {
  f();  // warm
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    const auto t0 = clock_type::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(clock_type::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

/// Locals' sizes summed over ranks: what storing every rank's local separately takes.
template <class D>
double per_rank_bytes(const D& x) {
  double b = 0;
  for (index_t i = 0; i < x.locals().ranks(); ++i)
    b += static_cast<double>(x.locals().size(i)) * sizeof(float);
  return b;
}

template <index_t Batch, index_t DModel, index_t DHidden>
struct mlp_case {
  using Mesh = mesh<8, 8>::named<"dp", "tp">;
  static constexpr int tp = Mesh::dim<"tp">();
  using X = layout<Mesh, placements<shard<0>, replicate>, extents<Batch, DModel>>;
  using Up = sim::column_parallel_linear<float, Mesh, tp, DModel, DHidden>;
  using Down = sim::row_parallel_linear<float, Mesh, tp, DHidden, DModel>;

  static void run(bool quick, double& ms1, double& ms_all, double& mem_ratio) {
    const auto x = sim::distribute_tensor<X>(values(Batch * DModel, 1, 1.f));
    const Up up = Up::from_full(values(DHidden * DModel, 2, 0.05f), values(DHidden, 3, 0.1f));
    const Down down = Down::from_full(values(DModel * DHidden, 4, 0.05f), values(DModel, 5, 0.1f));
    auto forward = [&] {
      auto y = down(sim::relu(up(x)));
      asm volatile("" : : "r"(&y) : "memory");
      return y;
    };
    const int runs = quick ? 3 : 7;
    const int all = sim::threads();
    sim::set_threads(1);
    ms1 = median_ms(forward, runs);
    sim::set_threads(all);
    ms_all = median_ms(forward, runs);
    const auto y = forward();
    const double held_w = static_cast<double>(up.weight.bytes_held() + down.weight.bytes_held());
    const double sep_w = per_rank_bytes(up.weight) + per_rank_bytes(down.weight);
    mem_ratio = held_w / sep_w;
    std::printf("mesh 8x8 (dp=8, tp=8), x (%lld, %lld), W1 (%lld, %lld), W2 (%lld, %lld), f32\n",
                (long long)Batch, (long long)DModel, (long long)DHidden, (long long)DModel,
                (long long)DModel, (long long)DHidden);
    std::printf("  forward: %.2f ms on 1 thread, %.2f ms on %d threads (speed-up %.2f)\n", ms1,
                ms_all, all, ms1 / ms_all);
    std::printf("  weights: %.1f MiB held, %.1f MiB as 64 per-rank copies (%.3f); one copy of "
                "W1 and W2: %.1f MiB\n",
                held_w / (1 << 20), sep_w / (1 << 20), mem_ratio,
                2.0 * DHidden * DModel * sizeof(float) / (1 << 20));
    std::printf("  x: %.2f MiB held (%.2f MiB per-rank); y: %.2f MiB held (%.2f MiB per-rank)\n",
                static_cast<double>(x.bytes_held()) / (1 << 20), per_rank_bytes(x) / (1 << 20),
                static_cast<double>(y.bytes_held()) / (1 << 20), per_rank_bytes(y) / (1 << 20));
    std::printf("  peak resident set of the process: %.1f MiB\n", peak_rss_mib());
  }
};

/// us per call of S(0)->R on a mesh of N ranks, 4 KiB, static extents (the compile-time
/// path up to static_ranks_limit ranks, the runtime path above).
template <index_t N>
double small_us() {
  using L = layout<mesh<N>, placements<shard<0>>, extents<64, 16>>;
  std::vector<float> g(64 * 16, 1.0f);
  const auto x = sim::distribute_tensor<L>(g);
  const double ms = median_ms(
      [&] {
        for (int i = 0; i < 200; ++i) {
          auto y = x.template redistribute<placements<replicate>>();
          asm volatile("" : : "r"(&y) : "memory");
        }
      },
      9);
  return ms * 1000.0 / 200.0;
}

/// us per rank of distribute, of redistributing S(0) to R and to S(1), and R to S(0), on a 1-D mesh of
/// n ranks, 4 elements a rank (run-time layouts: each call builds its schedules, as the
/// first call of a shape does). Median of 3.
struct many_ranks_us {
  double distribute = 0, gather = 0, all_to_all = 0, chunk = 0;
};
many_ranks_us many_ranks(index_t n) {
  const mesh_shape_vec mesh = parse_mesh(std::to_string(n));
  const shape_vec rows = parse_shape(std::to_string(4 * n)), square = parse_shape(std::to_string(n) + ",4");
  const layout_spec s0 = checked_spec(mesh, parse_placements("S(0)"), 1);
  const layout_spec r = checked_spec(mesh, parse_placements("R"), 1);
  const layout_spec s0b = checked_spec(mesh, parse_placements("S(0)"), 2);
  const layout_spec s1 = checked_spec(mesh, parse_placements("S(1)"), 2);
  const std::vector<float> g(static_cast<std::size_t>(4 * n), 1.0f);
  const auto per_rank = [&](auto&& f) { return median_ms(f, 3) * 1000.0 / static_cast<double>(n); };
  many_ranks_us out;
  out.distribute = per_rank([&] {
    auto x = sim::distribute<float>(std::span<const float>(g), s0, rows);
    asm volatile("" : : "r"(&x) : "memory");
  });
  const auto redistribute = [&](const layout_spec& from, const layout_spec& to, const shape_vec& shape) {
    const sim::local_set<float> x = sim::distribute<float>(std::span<const float>(g), from, shape);
    const plan p = make_plan(from, to, 16.0 * n).value;
    return per_rank([&] {
      auto y = sim::execute<float>(p, shape, x);
      asm volatile("" : : "r"(&y) : "memory");
    });
  };
  out.gather = redistribute(s0, r, rows);
  out.all_to_all = redistribute(s0b, s1, square);
  out.chunk = redistribute(r, s0, rows);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  double ms1 = 0, ms_all = 0, mem = 0;
  if (quick)
    mlp_case<64, 256, 1024>::run(true, ms1, ms_all, mem);
  else
    mlp_case<512, 1024, 4096>::run(false, ms1, ms_all, mem);

  std::printf("\nS(0) -> R of a 64x16 f32 tensor (4 KiB), static extents, 1 thread:\n");
  const double us8 = small_us<8>(), us16 = small_us<16>(), us32 = small_us<32>(),
               us64 = small_us<64>();
  std::printf("  %2d ranks: %8.2f us (%.3f us per rank)  compile-time path\n", 8, us8, us8 / 8);
  std::printf("  %2d ranks: %8.2f us (%.3f us per rank)  compile-time path\n", 16, us16, us16 / 16);
  std::printf("  %2d ranks: %8.2f us (%.3f us per rank)  compile-time path\n", 32, us32, us32 / 32);
  std::printf("  %2d ranks: %8.2f us (%.3f us per rank)  runtime path (cached schedules)\n", 64,
              us64, us64 / 64);
  std::printf("\nMany ranks: a 1-D mesh, 4 f32 elements a rank, run-time layouts (us per rank):\n");
  std::printf("  %7s %12s %12s %12s %12s\n", "ranks", "distribute", "S(0)->R", "S(0)->S(1)", "R->S(0)");
  const index_t few = 4096, most = quick ? 16384 : 65536;
  many_ranks_us first{}, last{};
  for (index_t n = few; n <= most; n *= 4) {
    const many_ranks_us t = many_ranks(n);
    std::printf("  %7lld %12.3f %12.3f %12.3f %12.3f\n", static_cast<long long>(n), t.distribute, t.gather,
                t.all_to_all, t.chunk);
    (n == few ? first : last) = t;
  }
  const double growth = std::max({last.distribute / first.distribute, last.gather / first.gather,
                                  last.all_to_all / first.all_to_all, last.chunk / first.chunk});
  std::printf("RESULT scale_forward_ms=%.2f scale_forward_all_ms=%.2f scale_memory=%.3f "
              "runtime_path_ratio=%.3f many_ranks_growth=%.3f\n",
              ms1, ms_all, mem, (us64 / 64) / (us32 / 32), growth);
  return 0;
}
