// tests/pipeline/run_sim.cpp — the pipeline executor (runtime/pipeline.hpp) in the
// simulation: every schedule over 1, 2 and 4 pipeline ranks (interleaved with 2 stages each
// too) and 1..8 microbatches trains chain.hpp's model one step. The loss and every
// parameter's gradient equal one device's full-batch step (double: within 1e-12), and every
// schedule gives the same bits (each stage sums its microbatches' gradients in the same
// order). Each pipeline rank's stages run on a mesh of 2 ranks (the rows split on dp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/plan/pipeline_schedule.hpp"
#include "spmd/runtime/pipeline.hpp"

#include "chain.hpp"

namespace {

namespace pp = spmd::pp;
using M = spmd::mesh<2>::named<"dp">;
using B = spmd::sim::backend;
using T = double;

struct result {
  double loss = 0;
  std::vector<std::vector<T>> grads;  // per stage
};

result pipelined(pp::schedule_kind k, pp::shape dims) {
  const pp::built b = pp::build(k, dims);
  REQUIRE(b.info.failed.what == pp::fault::none);
  chain::params<T, M, B> p(dims.stages());
  const chain::batch<T> data(dims.microbatches);
  chain::stages<T, M, B> st{p, data, dims.stages()};
  spmd::runtime::pipeline::in_process link;
  std::vector<int> mine(static_cast<std::size_t>(dims.ranks));
  for (int r = 0; r < dims.ranks; ++r) mine[std::size_t(r)] = r;
  result out;
  out.loss = spmd::runtime::pipeline::run(b.table, dims, st, link, mine);
  out.grads = chain::gradients(p);
  return out;
}

template <int Mb>
result reference(int stages) {
  chain::params<T, M, B> p(stages);
  const chain::batch<T> data(Mb);
  result out;
  out.loss = chain::whole<Mb>(p, data);
  out.grads = chain::gradients(p);
  return out;
}

result reference(int stages, int m) {
  switch (m) {
    case 1: return reference<1>(stages);
    case 2: return reference<2>(stages);
    case 3: return reference<3>(stages);
    case 4: return reference<4>(stages);
    case 5: return reference<5>(stages);
    case 6: return reference<6>(stages);
    case 7: return reference<7>(stages);
    default: return reference<8>(stages);
  }
}

double worst(const result& a, const result& b) {
  double w = std::abs(a.loss - b.loss);
  for (std::size_t s = 0; s < a.grads.size(); ++s)
    for (std::size_t i = 0; i < a.grads[s].size(); ++i) w = std::max(w, std::abs(a.grads[s][i] - b.grads[s][i]));
  return w;
}

}  // namespace

TEST_CASE("every schedule's step equals one device's full batch, and each other's bits", "[pipeline]") {
  for (int p : {1, 2, 4})
    for (int v : {1, 2})
      for (int m = 1; m <= 8; ++m) {
        const pp::shape dims{p, v, m};
        INFO("ranks " << p << " virtual " << v << " microbatches " << m);
        const result ref = reference(dims.stages(), m);
        std::vector<result> runs;
        for (pp::schedule_kind k : {pp::schedule_kind::gpipe, pp::schedule_kind::one_f_one_b,
                                    pp::schedule_kind::interleaved, pp::schedule_kind::zero_bubble}) {
          if (v > 1 && k != pp::schedule_kind::interleaved) continue;
          INFO(pp::name(k));
          runs.push_back(pipelined(k, dims));
          CHECK(worst(runs.back(), ref) < 1e-12);
          CHECK(runs.back().grads.size() == std::size_t(dims.stages()));
          if (runs.size() > 1) {
            CHECK(runs.back().loss == runs.front().loss);
            CHECK(runs.back().grads == runs.front().grads);
          }
        }
      }
}

TEST_CASE("a table of another pipeline is refused", "[pipeline]") {
  const pp::built b = pp::build(pp::schedule_kind::one_f_one_b, {2, 1, 2});
  chain::params<T, M, B> p(4);
  const chain::batch<T> data(2);
  chain::stages<T, M, B> st{p, data, 4};
  spmd::runtime::pipeline::in_process link;
  const std::vector<int> mine{0, 1, 2, 3};
  CHECK_THROWS_AS(spmd::runtime::pipeline::run(b.table, {4, 1, 2}, st, link, mine), std::invalid_argument);
}
