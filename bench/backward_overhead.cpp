// bench/backward_overhead — what autograd costs beyond the arithmetic of a backward.
//
//   meson compile -C build bench/backward_overhead && build/bench/backward_overhead [--quick]
//
// The Megatron MLP (column- then row-parallel, relu, loss = mean(y * c)) on a 2x4 mesh (dp, tp),
// f32, forward and backward, two ways:
//   autograd  the user API: variables, the TP blocks' trainable weights, loss.backward();
//   by hand   the same per-rank arithmetic on the local blocks with BLAS: the forward's GEMMs,
//             the all_reduce over tp, each rank's share of the loss (one fused loop), and the
//             backward's GEMMs (dW = gᵀ·x with a transposed operand, no copy), row sums, the
//             relu mask and the input gradient's all_reduce — what a hand-written Megatron
//             step does, and nothing else.
// Both create their outputs every call. The figure is the time per forward+backward (the
// minimum over samples), and under valgrind's callgrind (when installed) the instructions per
// call, as bench/op_overhead counts them. The last line:
//   RESULT backward_overhead_ratio=<worst time ratio> backward_overhead_instr=<worst Ir ratio>
//          no_grad_forward_instr=<worst Ir ratio of the forward on variables under no_grad
//          against the same forward on plain dtensors>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/autograd.hpp"

#include "callgrind.hpp"
#include "timing.hpp"

#if defined(SPMD_HAVE_CBLAS)
#include <cblas.h>
#endif

namespace {

using namespace spmd;
namespace rt = spmd::runtime;
namespace sim = spmd::sim;
using Mesh = mesh<2, 4>::named<"dp", "tp">;
constexpr int dp = 2, tp = 4;

/// Calls counted per path under callgrind.
constexpr int instr_calls = 20;

std::vector<float> values(std::size_t n, unsigned seed) {
  std::vector<float> v(n);
  unsigned s = seed * 2654435761u + 1;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int>(s >> 9) % 2001 - 1000) * 1e-3f;
  }
  return v;
}

#if defined(SPMD_HAVE_CBLAS)
/// c (m x n) = op(a) · op(b) (+ c when accumulate), row-major.
void gemm(bool ta, bool tb, int m, int n, int k, const float* a, const float* b, float* c) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, m, n, k, 1.f, a,
              ta ? m : k, b, tb ? k : n, 0.f, c, n);
}

/// The hand-written MLP: every rank's blocks as plain vectors.
template <index_t B, index_t D, index_t H>
struct by_hand {
  static constexpr int rows = static_cast<int>(B / dp), hh = static_cast<int>(H / tp), d = static_cast<int>(D);
  struct rank_blocks {
    std::vector<float> x, w1, b1, w2, b2, c;
  };
  std::vector<rank_blocks> r;  // by mesh index (dp-major)

  by_hand(const std::vector<float>& x, const std::vector<float>& w1, const std::vector<float>& b1,
          const std::vector<float>& w2, const std::vector<float>& b2, const std::vector<float>& c)
      : r(dp * tp) {
    for (int p = 0; p < dp; ++p)
      for (int t = 0; t < tp; ++t) {
        rank_blocks& k = r[static_cast<std::size_t>(p * tp + t)];
        k.x.assign(x.begin() + p * rows * d, x.begin() + (p + 1) * rows * d);
        k.c.assign(c.begin() + p * rows * d, c.begin() + (p + 1) * rows * d);
        k.w1.assign(w1.begin() + t * hh * d, w1.begin() + (t + 1) * hh * d);  // rows of W1 (H, D)
        k.b1.assign(b1.begin() + t * hh, b1.begin() + (t + 1) * hh);
        k.w2.resize(static_cast<std::size_t>(d * hh));  // columns of W2 (D, H)
        for (int o = 0; o < d; ++o)
          for (int j = 0; j < hh; ++j) k.w2[static_cast<std::size_t>(o * hh + j)] = w2[static_cast<std::size_t>(o * H + t * hh + j)];
        k.b2 = b2;
      }
  }

  struct grads {
    std::vector<float> loss;
    std::vector<std::vector<float>> dx, dw1, db1, dw2, db2;
  };

  static void all_reduce_tp(std::vector<std::vector<float>>& v, int p) {
    std::vector<float>& first = v[static_cast<std::size_t>(p * tp)];
    for (int t = 1; t < tp; ++t) {
      const std::vector<float>& o = v[static_cast<std::size_t>(p * tp + t)];
      for (std::size_t i = 0; i < first.size(); ++i) first[i] += o[i];
    }
    for (int t = 1; t < tp; ++t) v[static_cast<std::size_t>(p * tp + t)] = first;
  }

  grads run() const {
    const int n = dp * tp;
    std::vector<std::vector<float>> h(n), z(n);
    for (int i = 0; i < n; ++i) {  // forward: h = x W1ᵀ + b1, relu; z = relu(h) W2ᵀ (partial)
      const rank_blocks& k = r[static_cast<std::size_t>(i)];
      h[i].resize(static_cast<std::size_t>(rows * hh));
      gemm(false, true, rows, hh, d, k.x.data(), k.w1.data(), h[i].data());
      std::vector<float> a(h[i].size());
      for (int q = 0; q < rows; ++q)
        for (int j = 0; j < hh; ++j) {
          float& v = h[i][static_cast<std::size_t>(q * hh + j)];
          v += k.b1[static_cast<std::size_t>(j)];
          a[static_cast<std::size_t>(q * hh + j)] = v > 0 ? v : 0;
        }
      z[i].resize(static_cast<std::size_t>(rows * d));
      gemm(false, true, rows, d, hh, a.data(), k.w2.data(), z[i].data());
      h[i].swap(a);  // keep relu(h) for dW2; the mask is relu(h) > 0
    }
    for (int p = 0; p < dp; ++p) all_reduce_tp(z, p);
    grads g;
    g.loss.resize(n);  // each rank's share of the loss, mean((z + b2) * c) (Partial over dp)
    for (int i = 0; i < n; ++i) {
      const rank_blocks& k = r[static_cast<std::size_t>(i)];
      float s = 0;
      for (int q = 0; q < rows; ++q)
        for (int o = 0; o < d; ++o) {
          const std::size_t e = static_cast<std::size_t>(q * d + o);
          s += (z[i][e] + k.b2[static_cast<std::size_t>(o)]) * k.c[e];
        }
      g.loss[i] = s / static_cast<float>(B * D);
    }
    g.dx.resize(n), g.dw1.resize(n), g.db1.resize(n), g.dw2.resize(n), g.db2.resize(n);
    const float scale = 1.f / static_cast<float>(B * D);
    for (int i = 0; i < n; ++i) {  // backward: gy = c / N; the rest per rank
      const rank_blocks& k = r[static_cast<std::size_t>(i)];
      std::vector<float> gy(k.c.size());
      for (std::size_t e = 0; e < gy.size(); ++e) gy[e] = k.c[e] * scale;
      g.db2[i].assign(static_cast<std::size_t>(d), 0.f);
      for (int q = 0; q < rows; ++q)
        for (int o = 0; o < d; ++o) g.db2[i][static_cast<std::size_t>(o)] += gy[static_cast<std::size_t>(q * d + o)];
      g.dw2[i].resize(static_cast<std::size_t>(d * hh));
      gemm(true, false, d, hh, rows, gy.data(), h[i].data(), g.dw2[i].data());  // gyᵀ relu(h)
      std::vector<float> dh(static_cast<std::size_t>(rows * hh));
      gemm(false, false, rows, hh, d, gy.data(), k.w2.data(), dh.data());
      g.db1[i].assign(static_cast<std::size_t>(hh), 0.f);
      for (int q = 0; q < rows; ++q)
        for (int j = 0; j < hh; ++j) {
          float& v = dh[static_cast<std::size_t>(q * hh + j)];
          if (!(h[i][static_cast<std::size_t>(q * hh + j)] > 0)) v = 0;
          g.db1[i][static_cast<std::size_t>(j)] += v;
        }
      g.dw1[i].resize(static_cast<std::size_t>(hh * d));
      gemm(true, false, hh, d, rows, dh.data(), k.x.data(), g.dw1[i].data());  // dhᵀ x
      g.dx[i].resize(static_cast<std::size_t>(rows * d));
      gemm(false, false, rows, d, hh, dh.data(), k.w1.data(), g.dx[i].data());
    }
    for (int p = 0; p < dp; ++p) all_reduce_tp(g.dx, p);
    return g;
  }
};
#endif

struct row {
  std::string shape;
  double autograd_ns, hand_ns;
};

/// Not differentiating: the forward on plain dtensors against the same forward on variables
/// under no_grad (nothing recorded): what autograd costs code that does not use it.
struct forward_row {
  std::string shape;
  double dtensor_ns, no_grad_ns;
};
std::vector<forward_row> forward_rows;

template <index_t B, index_t D, index_t H>
void bench_forward(int samples, double secs) {
  using X = layout<Mesh, placements<shard<0>, replicate>, extents<B, D>>;
  using UpD = rt::column_parallel_linear<float, Mesh, 1, D, H, sim::backend>;
  using DownD = rt::row_parallel_linear<float, Mesh, 1, H, D, sim::backend>;
  const auto x0 = values(B * D, 1), w1 = values(H * D, 2), b1 = values(H, 3), w2 = values(D * H, 4),
             b2 = values(D, 5);
  const UpD upd = UpD::from_full(w1, b1);
  const DownD downd = DownD::from_full(w2, b2);
  auto up = rt::trainable<UpD>::from_full(w1, b1, "up");
  auto down = rt::trainable<DownD>::from_full(w2, b2, "down");
  const auto xd = sim::distribute_tensor<X>(x0);
  const auto xv = rt::requires_grad(sim::distribute_tensor<X>(x0), "x");
  auto plain = [&] {
    auto y = downd(rt::relu(upd(xd)));
    asm volatile("" : : "r"(&y) : "memory");
  };
  auto no_grad = [&] {
    rt::no_grad guard;
    auto y = down(rt::relu(up(xv)));
    asm volatile("" : : "r"(&y) : "memory");
  };
  const std::string shape = std::to_string(B) + "x" + std::to_string(D) + "x" + std::to_string(H);
  if (bench::callgrind_mode) {
    bench::count_instructions(plain, shape + "|forward-dtensor", 3, instr_calls);
    bench::count_instructions(no_grad, shape + "|forward-no_grad", 3, instr_calls);
    return;
  }
  double ta = 1e300, tb = 1e300;
  for (int s = 0; s < samples; ++s) {
    ta = std::min(ta, bench::ns_per_call(plain, secs));
    tb = std::min(tb, bench::ns_per_call(no_grad, secs));
  }
  forward_rows.push_back({shape, ta, tb});
}

template <index_t B, index_t D, index_t H>
void bench_case(std::vector<row>& rows, int samples, double secs) {
#if defined(SPMD_HAVE_CBLAS)
  using X = layout<Mesh, placements<shard<0>, replicate>, extents<B, D>>;
  using Up = rt::trainable<rt::column_parallel_linear<float, Mesh, 1, D, H, sim::backend>>;
  using Down = rt::trainable<rt::row_parallel_linear<float, Mesh, 1, H, D, sim::backend>>;
  const auto x0 = values(B * D, 1), w1 = values(H * D, 2), b1 = values(H, 3), w2 = values(D * H, 4),
             b2 = values(D, 5), c0 = values(B * D, 6);
  auto up = Up::from_full(w1, b1, "up");
  auto down = Down::from_full(w2, b2, "down");
  auto x = rt::requires_grad(sim::distribute_tensor<X>(x0), "x");
  const auto c = sim::distribute_tensor<X>(c0);
  auto with_autograd = [&] {
    auto loss = rt::mean<>(down(rt::relu(up(x))) * c);
    loss.backward();
    asm volatile("" : : "r"(&x.grad()) : "memory");
    x.zero_grad(), up.weight.zero_grad(), up.bias.zero_grad(), down.weight.zero_grad(), down.bias.zero_grad();
  };
  const by_hand<B, D, H> hand(x0, w1, b1, w2, b2, c0);
  auto written_by_hand = [&] {
    auto g = hand.run();
    asm volatile("" : : "r"(&g) : "memory");
  };
  {  // the two agree (so the comparison is of the same arithmetic)
    with_autograd();
    rt::mean<>(down(rt::relu(up(x))) * c).backward();
    const auto g = hand.run();
    const std::vector<float> dx = x.grad().full_tensor();
    double worst = 0;
    for (int p = 0; p < dp; ++p)
      for (std::size_t e = 0; e < g.dx[static_cast<std::size_t>(p * tp)].size(); ++e)
        worst = std::max(worst, std::fabs(double(dx[p * g.dx[0].size() + e]) - g.dx[static_cast<std::size_t>(p * tp)][e]));
    if (worst > 1e-5) std::fprintf(stderr, "warning: the two paths' dx differ by %g\n", worst);
    x.zero_grad(), up.weight.zero_grad(), up.bias.zero_grad(), down.weight.zero_grad(), down.bias.zero_grad();
  }
  const std::string shape = std::to_string(B) + "x" + std::to_string(D) + "x" + std::to_string(H);
  if (bench::callgrind_mode) {
    bench::count_instructions(with_autograd, shape + "|autograd", 3, instr_calls);
    bench::count_instructions(written_by_hand, shape + "|hand", 3, instr_calls);
    return;
  }
  double ta = 1e300, tb = 1e300;
  for (int s = 0; s < samples; ++s) {
    if (s % 2 == 0) {
      ta = std::min(ta, bench::ns_per_call(with_autograd, secs));
      tb = std::min(tb, bench::ns_per_call(written_by_hand, secs));
    } else {
      tb = std::min(tb, bench::ns_per_call(written_by_hand, secs));
      ta = std::min(ta, bench::ns_per_call(with_autograd, secs));
    }
  }
  rows.push_back({shape, ta, tb});
#else
  (void)rows, (void)samples, (void)secs;
#endif
}

}  // namespace

int main(int argc, char** argv) {
#if !defined(SPMD_HAVE_CBLAS)
  std::printf("backward_overhead needs BLAS (the hand-written path calls cblas_sgemm)\n");
  return 0;
#endif
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  bench::callgrind_mode = argc > 1 && std::strcmp(argv[1], "--callgrind") == 0;
  const int samples = quick ? 3 : 7;
  const double secs = quick ? 0.05 : 0.2;
  std::vector<row> rows;
  bench_case<16, 32, 64>(rows, samples, secs);
  bench_case<64, 256, 1024>(rows, samples, secs);
  if (!bench::callgrind_mode) bench_case<256, 1024, 4096>(rows, samples, secs);
  bench_forward<16, 32, 64>(samples, secs);
  bench_forward<64, 256, 1024>(samples, secs);
  if (bench::callgrind_mode) return 0;
  const std::map<std::string, double> instr = bench::callgrind_counts(argv[0], "backward_overhead", instr_calls, "OPENBLAS_NUM_THREADS=1");
  std::printf("%-16s %14s %14s %8s %14s %14s %8s\n", "B x D x H", "autograd ns", "by hand ns", "ratio",
              "autograd Ir", "by hand Ir", "Ir ratio");
  double worst = 0, worst_instr = 0;
  for (const row& r : rows) {
    const double ratio = r.autograd_ns / r.hand_ns;
    worst = std::max(worst, ratio);
    std::printf("%-16s %14.0f %14.0f %8.3f", r.shape.c_str(), r.autograd_ns, r.hand_ns, ratio);
    const auto a = instr.find(r.shape + "|autograd"), h = instr.find(r.shape + "|hand");
    if (a != instr.end() && h != instr.end()) {
      std::printf(" %14.0f %14.0f %8.3f\n", a->second, h->second, a->second / h->second);
      worst_instr = std::max(worst_instr, a->second / h->second);
    } else {
      std::printf(" %14s %14s %8s\n", "-", "-", "-");
    }
  }
  std::printf("\nforward, not differentiated: plain dtensors against variables under no_grad\n");
  std::printf("%-16s %14s %14s %8s %14s %14s %8s\n", "B x D x H", "dtensor ns", "no_grad ns", "ratio",
              "dtensor Ir", "no_grad Ir", "Ir ratio");
  double worst_fwd_instr = 0;
  for (const forward_row& r : forward_rows) {
    std::printf("%-16s %14.0f %14.0f %8.3f", r.shape.c_str(), r.dtensor_ns, r.no_grad_ns, r.no_grad_ns / r.dtensor_ns);
    const auto a = instr.find(r.shape + "|forward-dtensor"), h = instr.find(r.shape + "|forward-no_grad");
    if (a != instr.end() && h != instr.end()) {
      std::printf(" %14.0f %14.0f %8.3f\n", a->second, h->second, h->second / a->second);
      worst_fwd_instr = std::max(worst_fwd_instr, h->second / a->second);
    } else {
      std::printf(" %14s %14s %8s\n", "-", "-", "-");
    }
  }
  if (instr.empty()) std::printf("# no instruction counts: valgrind is not installed or its run failed\n");
  char wi[32] = "n/a", wf[32] = "n/a";  // rounded as the tables print them
  if (!instr.empty()) {
    std::snprintf(wi, sizeof wi, "%.3f", worst_instr);
    std::snprintf(wf, sizeof wf, "%.3f", worst_fwd_instr);
  }
  std::printf("RESULT backward_overhead_ratio=%.3f backward_overhead_instr=%s no_grad_forward_instr=%s\n", worst, wi,
              wf);
  return 0;
}
