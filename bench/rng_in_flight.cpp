// bench/rng_in_flight.cpp — how many registers of Philox blocks the vector draws keep in
// flight (the in_flight of host/random_avx512.hpp, sixteen blocks per register, and of
// host/random_avx2.hpp, eight): each type and distribution drawn with G = 1 .. 4 on one core
// into a buffer that stays in cache, in turns with f32 at its chosen G (this VM's speed
// drifts; turns put both under the same drift), the median of 11 rounds. Each path this CPU
// has is measured.
//
//   meson compile -C build rng_in_flight && build/bench/rng_in_flight
//
// Each row: the path and case, G, its rate (G elements/s) and that rate over f32's at
// in_flight. The last line: RESULT in_flight_chosen_vs_best=<the worst, over the paths and
// cases, of the chosen G's rate over the best G's> (1 when in_flight picks the fastest G of
// this machine everywhere).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "spmd/host/random_avx2.hpp"
#include "spmd/host/random_avx512.hpp"

#if SPMD_HOST_AVX2
namespace {

namespace av = spmd::host::avx2::detail;
namespace av5 = spmd::host::avx512::detail;
using spmd::bfloat16;
using spmd::float16;
using dist = spmd::random::distribution;
using clock_type = std::chrono::steady_clock;

/// The AVX2 path: fill_all with G given.
struct avx2_path {
  static constexpr const char* name = "AVX2";
  using path = av::path;
  template <class T, dist D>
  static constexpr int in_flight = av::in_flight<T, D>;
  template <class T, dist D, path P, int G>
  [[gnu::target("avx2,f16c"), gnu::noipa]] static void fill(float a, float b, std::uint64_t b0, long blocks, T* out) {
    av::params p{};
    p.a = av::splat(a);  // the fast path's operands (fill_blocks' setup)
    p.b = av::splat(b);
    av::fill_all<T, D, P, G>(p, 7, b0, blocks, out);
  }
};
/// The AVX-512 path: fill_all with G given.
struct avx512_path {
  static constexpr const char* name = "AVX-512";
  using path = av5::path;
  template <class T, dist D>
  static constexpr int in_flight = av5::in_flight<T, D>;
  template <class T, dist D, path P, int G>
  [[gnu::noipa]] static void fill(float a, float b, std::uint64_t b0, long blocks, T* out) {
    av5::fill_all<T, D, P, G>(av5::draw_params{a, b, false}, 7, b0, blocks, out);
  }
};

/// Elements per second (G) of `reps` draws of 16 Ki elements of [a, b) or N(a, b).
template <class Path, class T, dist D, typename Path::path P, int G>
double rate(float a, float b) {
  constexpr long n = 1 << 14;
  static std::vector<T> out(n);
  const float scale = D == dist::uniform ? (b - a) / static_cast<float>(1u << spmd::random::detail::digits<T>) : b;
  const int reps = D == dist::uniform ? 2000 : 800;
  const auto t0 = clock_type::now();
  for (int r = 0; r < reps; ++r)
    Path::template fill<T, D, P, G>(a, scale, 1000 + static_cast<std::uint64_t>(r) * (n / 4), n / 4, out.data());
  const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  return static_cast<double>(n) * reps / s / 1e9;
}

struct row {
  double rate, vs_f32;
};

template <class Path, class T, dist D, typename Path::path P, int G>
row measure(float a, float b) {
  std::vector<double> ratio, abs;
  for (int k = 0; k < 11; ++k) {
    const double f = rate<Path, float, D, Path::path::fast, Path::template in_flight<float, D>>(a, b);
    const double h = rate<Path, T, D, P, G>(a, b);
    ratio.push_back(h / f);
    abs.push_back(h);
  }
  std::sort(ratio.begin(), ratio.end());
  std::sort(abs.begin(), abs.end());
  return {abs[5], ratio[5]};
}

/// One case over G = 1 .. 4: prints the rows, returns the chosen G's rate over the best's.
template <class Path, class T, dist D, typename Path::path P>
double sweep(const char* name, float a, float b) {
  const row r[4] = {measure<Path, T, D, P, 1>(a, b), measure<Path, T, D, P, 2>(a, b),
                    measure<Path, T, D, P, 3>(a, b), measure<Path, T, D, P, 4>(a, b)};
  constexpr int chosen = Path::template in_flight<T, D>;
  double best = 0;
  for (int g = 0; g < 4; ++g) {
    std::printf("%-8s %-22s G=%d %s %7.3f %8.3f\n", Path::name, name, g + 1, g + 1 == chosen ? "*" : " ", r[g].rate,
                r[g].vs_f32);
    best = std::max(best, r[g].rate);
  }
  return r[chosen - 1].rate / best;
}

/// Every case of one path: the worst chosen-over-best.
template <class Path>
double sweep_all() {
  using P = typename Path::path;
  return std::min({
      sweep<Path, float, dist::uniform, P::fast>("uniform f32", 0, 1),
      sweep<Path, float, dist::normal, P::fast>("normal f32", 0, 1),
      sweep<Path, bfloat16, dist::uniform, P::exact>("uniform bf16 [0, 1)", 0, 1),
      sweep<Path, bfloat16, dist::uniform, P::fast>("uniform bf16 [-.1, .1)", -0.1f, 0.1f),
      sweep<Path, float16, dist::uniform, P::fast>("uniform f16", 0, 1),
      sweep<Path, bfloat16, dist::normal, P::fast>("normal bf16", 0, 1),
      sweep<Path, float16, dist::normal, P::fast>("normal f16", 0, 1),
  });
}

}  // namespace

int main() {
  if (!spmd::host::avx2::available()) {
    std::printf("# this CPU has no AVX2 and F16C: nothing to measure\n");
    return 0;
  }
  std::printf("# one core, 16 Ki elements in cache, median of 11 rounds in turns with f32; * = in_flight\n");
  std::printf("%-8s %-22s %-5s   %7s %8s\n", "path", "case", "G", "Gelem/s", "vs f32");
  double worst = 1;
  if (spmd::host::avx512::available()) worst = sweep_all<avx512_path>();
  else std::printf("# this CPU has no AVX-512 (F, BW, DQ, VL): only the AVX2 path\n");
  worst = std::min(worst, sweep_all<avx2_path>());
  std::printf("RESULT in_flight_chosen_vs_best=%.3f\n", worst);
}
#else
#include <cstdio>
int main() { std::printf("# no AVX2 path on this target: nothing to measure\nRESULT in_flight_chosen_vs_best=1\n"); }
#endif
