// bench/rng_in_flight.cpp — how many registers of eight Philox blocks the AVX2 draw keeps in
// flight (host/random_avx2.hpp's in_flight): each type and distribution drawn with G = 1 .. 4
// on one core into a buffer that stays in cache, in turns with f32 at its chosen G (this VM's
// speed drifts; turns put both under the same drift), the median of 11 rounds.
//
//   meson compile -C build rng_in_flight && build/bench/rng_in_flight
//
// Each row: the case, G, its rate (G elements/s) and that rate over f32's at in_flight.
// The last line: RESULT in_flight_chosen_vs_best=<the worst, over the cases, of the chosen G's
// rate over the best G's> (1 when in_flight picks the fastest G of this machine everywhere).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "spmd/host/random_avx2.hpp"

#if SPMD_HOST_AVX2
namespace {

namespace av = spmd::host::avx2::detail;
using spmd::bfloat16;
using spmd::float16;
using dist = spmd::random::distribution;
using clock_type = std::chrono::steady_clock;

/// fill_all's loop with G given.
template <class T, dist D, av::path P, int G>
[[gnu::target("avx2,f16c"), gnu::noipa]] void fill(const av::params& p, std::uint64_t b0, long blocks, T* out) {
  const av::round_keys keys(7);
  const std::uint64_t groups = static_cast<std::uint64_t>(blocks) / 8;
  std::uint64_t g = 0;
  for (; g + G <= groups; g += G) av::fill_groups<T, D, P, G>(p, keys, b0 + 8 * g, out + 32 * g);
  for (; g < groups; ++g) av::fill_groups<T, D, P, 1>(p, keys, b0 + 8 * g, out + 32 * g);
}

/// Elements per second (G) of `reps` draws of 16 Ki elements of [a, b) or N(a, b).
template <class T, dist D, av::path P, int G>
[[gnu::target("avx2,f16c")]] double rate(float a, float b) {
  constexpr long n = 1 << 14;
  static std::vector<T> out(n);
  av::params p{};
  p.a = av::splat(a);  // the fast path's operands (fill_blocks' setup)
  p.b = av::splat(D == dist::uniform ? (b - a) / static_cast<float>(1u << spmd::random::detail::digits<T>) : b);
  const int reps = D == dist::uniform ? 2000 : 800;
  const auto t0 = clock_type::now();
  for (int r = 0; r < reps; ++r) fill<T, D, P, G>(p, 1000 + static_cast<std::uint64_t>(r) * (n / 4), n / 4, out.data());
  const double s = std::chrono::duration<double>(clock_type::now() - t0).count();
  return static_cast<double>(n) * reps / s / 1e9;
}

struct row {
  double rate, vs_f32;
};

template <class T, dist D, av::path P, int G>
row measure(float a, float b) {
  std::vector<double> ratio, abs;
  for (int k = 0; k < 11; ++k) {
    const double f = rate<float, D, av::path::fast, av::in_flight<float, D>>(a, b);
    const double h = rate<T, D, P, G>(a, b);
    ratio.push_back(h / f);
    abs.push_back(h);
  }
  std::sort(ratio.begin(), ratio.end());
  std::sort(abs.begin(), abs.end());
  return {abs[5], ratio[5]};
}

/// One case over G = 1 .. 4: prints the rows, returns the chosen G's rate over the best's.
template <class T, dist D, av::path P>
double sweep(const char* name, float a, float b) {
  const row r[4] = {measure<T, D, P, 1>(a, b), measure<T, D, P, 2>(a, b), measure<T, D, P, 3>(a, b),
                    measure<T, D, P, 4>(a, b)};
  double best = 0;
  for (int g = 0; g < 4; ++g) {
    std::printf("%-22s G=%d %s %7.3f %8.3f\n", name, g + 1, g + 1 == av::in_flight<T, D> ? "*" : " ", r[g].rate,
                r[g].vs_f32);
    best = std::max(best, r[g].rate);
  }
  return r[av::in_flight<T, D> - 1].rate / best;
}

}  // namespace

int main() {
  if (!spmd::host::avx2::available()) {
    std::printf("# this CPU has no AVX2 and F16C: nothing to measure\n");
    return 0;
  }
  std::printf("# one core, 16 Ki elements in cache, median of 11 rounds in turns with f32; * = in_flight\n");
  std::printf("%-22s %-5s   %7s %8s\n", "case", "G", "Gelem/s", "vs f32");
  const double worst = std::min({
      sweep<float, dist::uniform, av::path::fast>("uniform f32", 0, 1),
      sweep<float, dist::normal, av::path::fast>("normal f32", 0, 1),
      sweep<bfloat16, dist::uniform, av::path::exact>("uniform bf16 [0, 1)", 0, 1),
      sweep<bfloat16, dist::uniform, av::path::fast>("uniform bf16 [-.1, .1)", -0.1f, 0.1f),
      sweep<float16, dist::uniform, av::path::fast>("uniform f16", 0, 1),
      sweep<bfloat16, dist::normal, av::path::fast>("normal bf16", 0, 1),
      sweep<float16, dist::normal, av::path::fast>("normal f16", 0, 1),
  });
  std::printf("RESULT in_flight_chosen_vs_best=%.3f\n", worst);
}
#else
#include <cstdio>
int main() { std::printf("# no AVX2 path on this target: nothing to measure\nRESULT in_flight_chosen_vs_best=1\n"); }
#endif
