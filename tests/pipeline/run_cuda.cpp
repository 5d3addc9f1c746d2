// tests/pipeline/run_cuda.cpp — the pipeline executor (runtime/pipeline.hpp) on the CUDA
// backend, every rank on one GPU: the link is in_process (a transfer hands the activation's
// device buffers to the next stage, no copy). Every schedule over 1, 2 and 4 pipeline ranks
// (interleaved with 2 stages each too) and 1, 3 and 8 microbatches trains chain.hpp's model one
// step in f32; the loss and every gradient equal the simulation's same step within 1e-5 (the
// GPU sums in other orders), and the schedules agree with the first run of the shape within 1e-6. Without a
// GPU it says so and exits 77.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/cuda/cuda.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/pipeline.hpp"

#include "chain.hpp"

namespace {

namespace pp = spmd::pp;
using M = spmd::mesh<2>::named<"dp">;
using T = float;

struct result {
  pp::schedule_kind kind{};
  double loss = 0;
  std::vector<std::vector<T>> grads;  // per stage
};

template <class B>
result pipelined(pp::schedule_kind k, pp::shape dims) {
  const pp::built b = pp::build(k, dims);
  if (b.info.failed.what != pp::fault::none) throw std::logic_error("a built table failed its check");
  chain::params<T, M, B> p(dims.stages());
  const chain::batch<T> data(dims.microbatches);
  chain::stages<T, M, B> st{p, data, dims.stages()};
  spmd::runtime::pipeline::in_process link;
  std::vector<int> mine;
  for (int r = 0; r < dims.ranks; ++r) mine.push_back(r);
  result out;
  out.kind = k;
  out.loss = spmd::runtime::pipeline::run(b.table, dims, st, link, mine);
  out.grads = chain::gradients(p);
  return out;
}

double worst(const result& a, const result& b) {
  double w = std::abs(a.loss - b.loss);
  for (std::size_t s = 0; s < a.grads.size(); ++s)
    for (std::size_t i = 0; i < a.grads[s].size(); ++i) w = std::max(w, double(std::abs(a.grads[s][i] - b.grads[s][i])));
  return w;
}

}  // namespace

int main() {
  if (!spmd::cuda::available()) {
    std::printf("SKIP pipeline executor on CUDA: no CUDA device on this machine\n");
    return 77;
  }
  int failures = 0, cases = 0;
  double worst_sim = 0, worst_other = 0;
  for (int p : {1, 2, 4})
    for (int v : {1, 2})
      for (int m : {1, 3, 8}) {
        const pp::shape dims{p, v, m};
        const result* first = nullptr;
        std::vector<result> runs;
        runs.reserve(4);
        for (pp::schedule_kind k : {pp::schedule_kind::gpipe, pp::schedule_kind::one_f_one_b,
                                    pp::schedule_kind::interleaved, pp::schedule_kind::zero_bubble}) {
          if (v > 1 && k != pp::schedule_kind::interleaved) continue;
          runs.push_back(pipelined<spmd::cuda::backend>(k, dims));
          const result sim = pipelined<spmd::sim::backend>(k, dims);
          const double d = worst(runs.back(), sim), o = first ? worst(runs.back(), *first) : 0.0;
          if (!first) first = &runs.front();
          worst_sim = std::max(worst_sim, d);
          worst_other = std::max(worst_other, o);
          ++cases;
          if (!(d <= 1e-5) || !(o <= 1e-6)) {
            ++failures;
            std::printf("FAIL %s ranks %d virtual %d microbatches %d: %.3g from the simulation, %.3g from %s\n",
                        std::string(pp::name(k)).c_str(), p, v, m, d, o, std::string(pp::name(runs.front().kind)).c_str());
          }
        }
      }
  std::printf("%d cases: CUDA within %.3g of the simulation, schedules within %.3g of each other\n%s\n", cases, worst_sim,
              worst_other, failures ? "FAIL" : "ok");
  return failures ? 1 : 0;
}
