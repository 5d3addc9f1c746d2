// bench/pipeline — every schedule's step (runtime/pipeline.hpp) on a model of 4 layers
// against its table (plan/pipeline_schedule.hpp): the bubble and the peak of live
// stage-microbatches the table says, and what a step measures.
//
//   pipeline                       the simulation (every pipeline rank in this process), then
//                                  mpirun -np 2 ... --mpi (one process per pipeline rank)
//   pipeline --sim | mpirun -np 2 pipeline --mpi
//
// The model: x_{l+1} = tanh(x_l · W_lᵀ) for 4 layers of width 512, then the cross entropy of
// x · W_outᵀ (16 classes), microbatches of 1024 rows (an activation is 2 MiB: the buffer pool
// maps it, so the resident memory shows it), 8 microbatches a step, f32, 2 pipeline
// ranks (interleaved: 2 stages each, one layer a stage; the others: 2 layers a stage), one
// BLAS thread each. Each figure is the median of 3 steps after a warm one.
//   measured bubble   MPI: 1 − (the ranks' task seconds summed) / (2 × the step's seconds);
//                     the simulation runs the ranks one after another, so its step is the
//                     table replayed with the measured task times (each slot as long as its
//                     longest task, a two-slot backward over both of its slots)
//   peak              MPI: the process's resident memory above the step's start, at most
//                     (VmHWM), over the bytes one stage-microbatch's forward holds (measured
//                     alone): the measured peak in stage-microbatches, against the table's
//   RESULT pipeline backend=B schedule=S microbatches=8 table_bubble=<> bubble=<> table_peak=<>
//     peak=<> step_ms=<>
#include <cblas.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "resident.hpp"
#include "spmd/backends/mpi/mpi.hpp"
#include "spmd/backends/mpi/pipeline.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/autograd.hpp"
#include "spmd/runtime/pipeline.hpp"

namespace {

namespace rt = spmd::runtime;
namespace pp = spmd::pp;
using spmd::index_t;
constexpr index_t width = 512, rows = 1024, classes = 16;  // an activation: 2 MiB, a mapped block
constexpr int layers = 4, microbatches = 8, ranks = 2, steps = 3;

using bench::reset_peak;
using bench::resident;

std::vector<float> values(std::size_t n, unsigned seed, float scale) {
  std::vector<float> v(n);
  unsigned x = seed * 2654435761u + 1;
  for (float& e : v) {
    x = x * 1664525u + 1013904223u;
    e = scale * (float((x >> 8) % 20001) / 10000.f - 1.f);
  }
  return v;
}

template <class B>
struct model {
  using M = spmd::mesh<1>;
  using F = rt::factories<B>;
  using LW = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<width, width>>;
  using LO = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<classes, width>>;
  using LX = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<rows, width>>;
  using LT = spmd::layout<M, spmd::placements<spmd::replicate>, spmd::extents<rows>>;
  using w_var = decltype(rt::requires_grad(F::template distribute_tensor<LW>(std::vector<float>{})));
  using o_var = decltype(rt::requires_grad(F::template distribute_tensor<LO>(std::vector<float>{})));
  using activation = typename decltype(rt::tanh(rt::matmul_t(std::declval<rt::dtensor<float, LX, B>>(),
                                                             std::declval<w_var>())))::value_type;
  std::vector<w_var> w;
  std::vector<o_var> out;
  int stages;
  explicit model(int s) : stages(s) {
    for (int l = 0; l < layers; ++l)
      w.push_back(rt::requires_grad(F::template distribute_tensor<LW>(values(width * width, unsigned(l + 1), 0.03f)), "w"));
    out.push_back(rt::requires_grad(F::template distribute_tensor<LO>(values(classes * width, 99, 0.03f)), "out"));
  }
  rt::dtensor<float, LX, B> input(int m) const {
    return F::template distribute_tensor<LX>(values(rows * width, unsigned(100 + m), 1.f));
  }
  template <class X>
  auto layers_of(int s, X x) {
    const int per = layers / stages;
    auto h = rt::tanh(rt::matmul_t(x, w[std::size_t(s * per)]));
    for (int l = s * per + 1; l < (s + 1) * per; ++l) h = rt::tanh(rt::matmul_t(h, w[std::size_t(l)]));
    return h;
  }
  template <class In>
  auto forward(int s, int m, const In* in) {
    if (in) return layers_of(s, *in);
    return layers_of(s, input(m));
  }
  template <class In>
  auto loss(int s, int m, const In* in) {
    std::vector<std::int64_t> t(rows);
    for (index_t i = 0; i < rows; ++i) t[std::size_t(i)] = (i * 7 + m) % classes;
    const auto targets = F::template distribute_tensor<LT>(t);
    if (in) return rt::cross_entropy<classes>(rt::matmul_t(layers_of(s, *in), out[0]), targets) * (1.f / microbatches);
    return rt::cross_entropy<classes>(rt::matmul_t(layers_of(s, input(m)), out[0]), targets) * (1.f / microbatches);
  }
  void zero_grad() {
    for (auto& p : w) p.zero_grad();
    out[0].zero_grad();
  }
};

struct figures {
  double step_s = 0, bubble = 0, peak = 0;
};

/// Task seconds per (rank, slot of its start).
struct timings {
  const pp::table* t;
  std::map<std::pair<int, int>, double> at;  // (rank, stage*1000+microbatch*4+kind) -> seconds
  double busy = 0;
  void operator()(int r, const pp::task& k, double s) {
    at[{r, k.stage * 100000 + k.microbatch * 8 + int(k.kind)}] = s;
    busy += s;
  }
  /// The table replayed with these times: each slot as long as its longest task share.
  double replayed() const {
    double total = 0;
    for (int slot = 0; slot < t->slots; ++slot) {
      double longest = 0;
      for (int r = 0; r < t->ranks; ++r) {
        const pp::cell& c = (*t)(slot, r);
        if (c.work.kind == pp::work::idle) continue;
        const auto it = at.find({r, c.work.stage * 100000 + c.work.microbatch * 8 + int(c.work.kind)});
        if (it != at.end()) longest = std::max(longest, it->second / pp::duration(c.work.kind));
      }
      total += longest;
    }
    return total;
  }
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class B, class Link>
figures measure(pp::schedule_kind k, Link& link, const std::vector<int>& mine, bool mpi) {
  const pp::shape dims{ranks, k == pp::schedule_kind::interleaved ? 2 : 1, microbatches};
  const pp::built b = pp::build(k, dims);
  model<B> m(dims.stages());
  // one stage-microbatch's saved bytes: a forward of one stage, held
  double unit = 0;
  {
    const long long before = resident();
    auto x = rt::requires_grad(m.input(0));
    auto y = m.forward(0, 0, &x);
    unit = double(resident() - before);
  }
  std::vector<double> step_s, bubble, peak;
  for (int s = 0; s <= steps; ++s) {
    timings t{&b.table, {}, 0};
    const long long base = resident();
    reset_peak();
    if (mpi) MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    rt::pipeline::run(b.table, dims, m, link, mine, t);
    double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double held = double(bench::resident_peak() - base);
    m.zero_grad();
    if (s == 0) continue;  // warm-up
    double busy = t.busy;
    if (mpi) {
      MPI_Allreduce(MPI_IN_PLACE, &wall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, &busy, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, &held, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      step_s.push_back(wall);
      bubble.push_back(1.0 - busy / (ranks * wall));
    } else {
      const double replay = t.replayed();
      step_s.push_back(replay);
      bubble.push_back(1.0 - busy / (ranks * replay));
    }
    peak.push_back(held / unit);
  }
  return {median(step_s), median(bubble), median(peak)};
}

void report(const char* backend, pp::schedule_kind k, const figures& f, bool memory) {
  const pp::shape dims{ranks, k == pp::schedule_kind::interleaved ? 2 : 1, microbatches};
  const pp::built b = pp::build(k, dims);
  int peak = 0;
  for (int r = 0; r < ranks; ++r) peak = std::max(peak, pp::peak_live(b.table, r));
  const double table_bubble = 1.0 - double(pp::busy_slots(b.table)) / double(b.table.slots * b.table.ranks);
  std::printf("RESULT pipeline backend=%s schedule=%s microbatches=%d table_bubble=%.4f bubble=%.4f table_peak=%d "
              "peak=%s step_ms=%.1f\n",
              backend, std::string(pp::name(k)).c_str(), microbatches, table_bubble, f.bubble, peak,
              memory ? std::to_string(f.peak).substr(0, 5).c_str() : "-", f.step_s * 1e3);
}

constexpr pp::schedule_kind kinds[] = {pp::schedule_kind::gpipe, pp::schedule_kind::one_f_one_b,
                                       pp::schedule_kind::interleaved, pp::schedule_kind::zero_bubble};

}  // namespace

int main(int argc, char** argv) {
  openblas_set_num_threads(1);  // a pipeline rank per core: one thread each, the simulation too
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "--mpi") {
    spmd::mpi::environment env(argc, argv);
    spmd::mpi::pipeline_world world(ranks);
    spmd::mpi::communicator_scope in_group(world.group());
    spmd::mpi::pipeline_link link{world};
    for (pp::schedule_kind k : kinds) {
      const figures f = measure<spmd::mpi::backend>(k, link, {world.pipeline_rank()}, true);
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      if (rank == 0) report("mpi", k, f, true);
    }
    return 0;
  }
  rt::pipeline::in_process link;
  for (pp::schedule_kind k : kinds) report("sim", k, measure<spmd::sim::backend>(k, link, {0, 1}, false), false);
  if (mode == "--sim") return 0;
  std::fflush(stdout);
  const std::string cmd = std::string(SPMD_MPIRUN) + " -np 2 " + argv[0] + " --mpi";
  return std::system(cmd.c_str()) == 0 ? 0 : 1;
}
