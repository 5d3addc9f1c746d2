// tests/autoshard/search.cpp — the automatic sharding search (autoshard/search.hpp) against an
// enumeration of every assignment (brute_force), under several cost models and memory
// budgets; what it picks where the answer is known; pins; and its refusals.
#include <cmath>
#include <cstdio>
#include <string>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "graphs.hpp"
#include "spmd/autoshard/search.hpp"
#include "spmd/io/cost_file.hpp"

using namespace autoshard_tests;

namespace {

constexpr spmd::mesh_shape_vec two{{2}, 1}, four{{4}, 1}, two_by_two{{2, 2}, 2};

as::cost_model with_alpha(double alpha) {
  as::cost_model c{};
  c.fallback.alpha_s = alpha;
  return c;
}

bool same(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)); }

}  // namespace

// The compiler runs the search and the enumeration, and they agree (one layer on a mesh of 2:
// clang's constexpr step limit; docs/auto.md has the compile times), and the search of two
// layers.
constexpr as::cost_model fast_links = [] {
  as::cost_model c{};
  c.fallback.alpha_s = 1e-6;
  return c;
}();
static_assert(as::search(one_layer(two, 64, 128, 256), fast_links).step_s() ==
              as::brute_force(one_layer(two, 64, 128, 256), fast_links).step_s);
static_assert(as::search(two_layer(two, 64, 128, 256), fast_links).ok());

TEST_CASE("autoshard: the search's step time equals the best of every assignment", "[autoshard]") {
  for (const double alpha : {1e-7, 1e-6, 2e-5, 1e-3}) {
    const as::cost_model c = with_alpha(alpha);
    for (const auto& g : {two_layer(two, 64, 128, 256), residual(two, 64, 128), biased(two, 64, 128, 256, 32),
                          two_layer(four, 64, 128, 256), residual(four, 32, 64), biased(four, 16, 32, 64, 16),
                          two_layer(two_by_two, 8, 16, 32), fan_out(two, 64, 128), fan_out(four, 32, 64)}) {
      const as::solution s = as::search(g, c);
      REQUIRE(s.ok());
      const as::enumerated b = as::brute_force(g, c);
      CHECK(b.assignments >= 1404);
      INFO("alpha " << alpha << ", " << g.tensors.size() << " tensors, mesh of " << g.mesh.size() << " dims");
      CHECK(same(s.step_s(), b.step_s));
    }
  }
}

TEST_CASE("autoshard: operators chosen with their only reader: the same step from fewer states", "[autoshard]") {
  // The Pareto form with nothing deferred (search_detail::run's last flag) keeps every
  // combination of the live activations' layouts: the same optimum, from more states.
  for (const auto& g : {fan_out(two_by_two, 64, 128), biased(two_by_two, 64, 128, 256, 32), residual(two_by_two, 64, 128)}) {
    for (const double alpha : {1e-6, 2e-5}) {
      as::cost_model open = with_alpha(alpha), huge = open;
      huge.memory_budget = 1e30;
      const as::solution deferred = as::search(g, open), every = as::search_detail::run(g, huge, {}, false, true, false);
      REQUIRE(deferred.ok());
      REQUIRE(every.ok());
      INFO(g.tensors.size() << " tensors, alpha " << alpha);
      CHECK(same(deferred.step_s(), every.step_s()));
      CHECK(deferred.states < every.states);
      // the deferred operators' choices are recorded: pinning every layout found costs the same
      as::pins own;
      for (std::size_t t = 0; t < g.tensors.size(); ++t) own.pin(static_cast<int>(t), deferred.layouts[t], g.tensors.size());
      CHECK(same(as::search(g, open, own).step_s(), deferred.step_s()));
      for (std::size_t j = 0; j < g.ops.size(); ++j) CHECK(deferred.strategy[j] >= 0);
    }
  }
}

TEST_CASE("autoshard: under a memory budget, the best that fits; over it, the least budget that does", "[autoshard]") {
  const as::cost_model open = with_alpha(1e-6);
  for (const auto& g : {two_layer(four, 64, 128, 256), residual(two, 64, 128), biased(two, 64, 128, 256, 32)}) {
    const as::solution free = as::search(g, open);
    REQUIRE(free.ok());
    // the least memory any assignment needs
    as::cost_model tiny = open;
    tiny.memory_budget = 1;
    const as::solution none = as::search(g, tiny);
    REQUIRE(none.error == as::search_error::over_budget);
    REQUIRE(none.min_memory > 1);
    CHECK(none.min_memory <= free.memory_bytes);
    // budgets from the least to the unconstrained answer's: the search equals the enumeration,
    // the time never falls as the budget shrinks, and the memory fits
    double last = std::numeric_limits<double>::infinity();
    for (double f = 0; f <= 1.0001; f += 0.25) {
      as::cost_model c = open;
      c.memory_budget = none.min_memory + f * (free.memory_bytes - none.min_memory);
      const as::solution s = as::search(g, c);
      REQUIRE(s.ok());
      CHECK(s.memory_bytes <= c.memory_budget);
      CHECK(same(s.step_s(), as::brute_force(g, c).step_s));
      CHECK(s.step_s() <= last * (1 + 1e-12));
      last = s.step_s();
    }
    CHECK(same(last, free.step_s()));
  }
}

TEST_CASE("autoshard: known answers: Megatron's MLP when collectives are dear, the work split either way", "[autoshard]") {
  const as::graph g = two_layer(four, 64, 128, 256);
  // the products, relu, and the loss's sum (a reduction counts twice, as a product's contraction does)
  const double flops = 3 * (2.0 * 64 * 128 * 256 * 2 + 64 * 256 + 2.0 * 64 * 128);
  // A collective costs a second: the search finds the step that needs none, Megatron's MLP
  // (W1 split by output features, W2 by input features) with the loss left Partial (its value
  // is one all_reduce of a scalar away, outside the step: x is data, so no input gradient is
  // reduced).
  const as::solution slow = as::search(g, with_alpha(1.0));
  REQUIRE(slow.ok());
  CHECK(slow.comm_s == 0);
  CHECK(slow.collectives.total() == 0);
  CHECK(slow.layouts[1].placements[0].is_shard(0));
  CHECK(slow.layouts[3].placements[0].is_shard(1));
  CHECK(slow.layouts[g.loss].placements[0].is_partial());
  // The sum reads the Partial product whole on every rank (a Partial passes through it).
  const double sum_flops = 3 * 2.0 * 64 * 128;
  CHECK(same(slow.compute_s, ((flops - sum_flops) / 4 + sum_flops) / as::cost_model{}.flops_per_s));
  // Replicating every tensor instead (pinned) computes everything on every rank.
  as::pins all_r;
  for (std::size_t t = 0; t < g.tensors.size(); ++t) {
    spmd::placement_vec v{};
    v.push_back(spmd::make_replicate());
    all_r.pin(static_cast<int>(t), spmd::make_spec(g.mesh, v, g.tensors[t].shape.size()).spec, g.tensors.size());
  }
  const as::solution rep = as::search(g, with_alpha(1.0), all_r);
  REQUIRE(rep.ok());
  CHECK(same(rep.compute_s, flops / as::cost_model{}.flops_per_s));
  CHECK(rep.comm_s == 0);
  CHECK(rep.step_s() > slow.step_s());
}

TEST_CASE("autoshard: pinned layouts are evaluated by the same model, and never beat the search", "[autoshard]") {
  const as::graph g = biased(four, 64, 128, 256, 32);
  const as::cost_model c = with_alpha(2e-5);
  const as::solution best = as::search(g, c);
  REQUIRE(best.ok());
  // Megatron on the 4 ranks: W1 and b1 split by output features, W2 by input features
  as::pins megatron;
  const auto spec = [&](std::initializer_list<spmd::placement> p, int rank) {
    spmd::placement_vec v{};
    for (const spmd::placement& x : p) v.push_back(x);
    return spmd::make_spec(g.mesh, v, rank).spec;
  };
  megatron.pin(1, spec({spmd::make_shard(0)}, 2), g.tensors.size());
  megatron.pin(2, spec({spmd::make_shard(0)}, 1), g.tensors.size());
  megatron.pin(3, spec({spmd::make_shard(1)}, 2), g.tensors.size());
  megatron.pin(4, spec({spmd::make_replicate()}, 1), g.tensors.size());
  const as::solution m = as::search(g, c, megatron);
  REQUIRE(m.ok());
  CHECK(m.layouts[1].placements[0].is_shard(0));
  CHECK(m.step_s() >= best.step_s());
  CHECK(m.collectives.total() > 0);
  // pinning the search's own answer costs what the search said
  as::pins own;
  for (std::size_t t = 0; t < g.tensors.size(); ++t)
    if (g.tensors[t].kind != as::tensor_kind::activation) own.pin(static_cast<int>(t), best.layouts[t], g.tensors.size());
  CHECK(same(as::search(g, c, own).step_s(), best.step_s()));
}

// Identical blocks are one program: the first walked from every layout of its entry, its table
// carrying the others (fastest.hpp, segment). 44 more blocks add no move to plan and only their
// exits' states; the step equals the general program's, which walks every block (a finite
// budget: the Pareto form, no tables, no deferral).
TEST_CASE("autoshard: identical blocks are walked once; each more costs its exit's states", "[autoshard]") {
  const spmd::mesh_shape_vec mesh{{2, 4}, 2};
  const as::solution four_blocks = as::search(residual_chain(mesh, 4, 512, 1024, 4096));
  const as::solution five_blocks = as::search(residual_chain(mesh, 5, 512, 1024, 4096));
  const as::solution many = as::search(residual_chain(mesh, 48, 512, 1024, 4096));
  REQUIRE(four_blocks.ok());
  REQUIRE(five_blocks.ok());
  REQUIRE(many.ok());
  CHECK(many.plans == four_blocks.plans);  // 44 more blocks, no new move to plan
  const long per_block = five_blocks.states - four_blocks.states;
  CHECK(many.states - four_blocks.states == 44 * per_block);
  CHECK(per_block * 50 < four_blocks.states);  // a block's exit, not its walk
  for (const double alpha : {20e-6, 1e-6, 1e-8})
    for (const int blocks : {5, 12}) {
      const as::graph g = residual_chain(mesh, blocks, 512, 1024, 4096);
      as::cost_model c = with_alpha(alpha);
      const as::solution fast = as::search(g, c);
      c.memory_budget = 1e300;  // finite: the general program (here with nothing deferred: it walks every state)
      const as::solution general = as::search_detail::run(g, c, {}, false, true, false);
      CHECK(same(as::search(g, c).step_s(), fast.step_s()));  // a budget the fastest step meets: that step
      REQUIRE(fast.ok());
      REQUIRE(general.ok());
      CHECK(same(fast.step_s(), general.step_s()));
      CHECK(fast.collectives.total() == general.collectives.total());
      CHECK(fast.states < general.states);
    }
}

TEST_CASE("autoshard: refusals name the operator", "[autoshard]") {
  as::graph shared{four};
  const int x = shared.data({8, 16});
  const int w = shared.param({16, 16});
  const int h = shared.apply<ops::matmul_t>({x, w});
  shared.loss = shared.apply<loss_sum>({shared.apply<ops::matmul_t>({h, w})});  // tied: w read twice
  const as::solution s = as::search(shared, {});
  CHECK(s.error == as::search_error::shared_parameter);
  CHECK(s.bad_op == 1);

  as::graph later = two_layer(four, 8, 16, 32);
  later.ops[0].in[0] = later.ops[1].out;  // reads what the next operator makes
  CHECK(as::search(later, {}).error == as::search_error::not_in_order);

  // a pin no strategy can make: the loss (rank 1) split on the dim the sum needs whole
  as::graph g = two_layer(four, 8, 16, 32);
  as::pins p;
  const int last = g.ops[2].out;  // the product summed by the loss, (8, 16): its last dim reduced
  spmd::placement_vec v{};
  v.push_back(spmd::make_partial(spmd::reduce_op::max));
  p.pin(last, spmd::make_spec(g.mesh, v, 2).spec, g.tensors.size());
  const as::solution n = as::search(g, {}, p);
  CHECK(n.error == as::search_error::no_strategy);
  CHECK(n.bad_op == 2);
  CHECK(std::string(as::describe(n.error)).find("strategy") != std::string::npos);
}

TEST_CASE("autoshard: a cost model written to a file reads back the same, for its mesh only", "[autoshard]") {
  as::cost_model c{};
  c.links.push_back({1.25e-6, 1.0 / 9.5e9});
  c.links.push_back({3e-5, 1.0 / 1.2e9});
  c.flops_per_s = 1.234567890123e11;
  c.memory_bytes_per_s = 9.87654321e9;
  const std::string path = "autoshard_cost_test.json";
  spmd::io::save_cost_model(path, c, two_by_two);
  const as::cost_model r = spmd::io::load_cost_model(path, two_by_two);
  REQUIRE(r.links.size() == 2);
  for (int m = 0; m < 2; ++m) {
    CHECK(r.links[m].alpha_s == c.links[m].alpha_s);
    CHECK(r.links[m].beta_s_per_byte == c.links[m].beta_s_per_byte);
  }
  CHECK(r.flops_per_s == c.flops_per_s);
  CHECK(r.memory_bytes_per_s == c.memory_bytes_per_s);
  CHECK_THROWS_WITH(spmd::io::load_cost_model(path, four), Catch::Contains("not the mesh searched"));
  std::remove(path.c_str());
}

// The search numbers layouts by their blocks (layout_ids.hpp): two layouts get one id exactly
// when same_blocks says they hold the same blocks, on every placement of tensors of rank 0–3
// over meshes with one-rank dims, shard orders given and not.
TEST_CASE("autoshard: layouts share an id exactly when they hold the same blocks", "[autoshard]") {
  using spmd::placement;
  for (const spmd::mesh_shape_vec& mesh : {spmd::mesh_shape_vec{{2}, 1}, spmd::mesh_shape_vec{{2, 1, 3}, 3},
                                            spmd::mesh_shape_vec{{1, 2}, 2}, spmd::mesh_shape_vec{{2, 2}, 2}})
    for (int rank = 0; rank <= 3; ++rank) {
      // per mesh dim: R, P(sum), P(max), S(d) for each d; shard orders default or reversed
      std::vector<placement> choices{spmd::make_replicate(), spmd::make_partial(spmd::reduce_op::sum),
                                     spmd::make_partial(spmd::reduce_op::max)};
      for (int d = 0; d < rank; ++d) choices.push_back(spmd::make_shard(d));
      std::vector<spmd::layout_spec> all;
      int total = 1;
      for (int m = 0; m < mesh.size(); ++m) total *= static_cast<int>(choices.size());
      for (int code = 0; code < total; ++code)
        for (int reversed = 0; reversed < 2; ++reversed) {
          spmd::placement_vec p{};
          for (int m = 0, c = code; m < mesh.size(); ++m, c /= static_cast<int>(choices.size()))
            p.push_back(choices[static_cast<std::size_t>(c % static_cast<int>(choices.size()))]);
          if (reversed) {  // each tensor dim split right to left
            for (int d = 0; d < rank; ++d) {
              int count = 0;
              for (int m = 0; m < p.size(); ++m) count += p[m].is_shard(d);
              for (int m = 0, pos = count - 1; m < p.size(); ++m)
                if (p[m].is_shard(d)) p[m].order = pos--;
            }
          }
          const spmd::spec_result r = spmd::make_spec(mesh, p, rank);
          if (r.ok()) all.push_back(r.spec);
        }
      as::search_detail::layout_ids ids;
      std::vector<int> id;
      for (const spmd::layout_spec& s : all) id.push_back(ids.id(s));
      long pairs = 0, same_pairs = 0;
      for (std::size_t a = 0; a < all.size(); ++a)
        for (std::size_t b = 0; b < all.size(); ++b) {
          ++pairs;
          const bool same_blocks = spmd::same_blocks(all[a], all[b]);
          same_pairs += same_blocks;
          REQUIRE(same_blocks == (id[a] == id[b]));
          REQUIRE(same_blocks == (as::search_detail::key_of(all[a]) == as::search_detail::key_of(all[b])));
        }
      CHECK(same_pairs > static_cast<long>(all.size()));  // some layouts differ and hold the same blocks
      for (std::size_t a = 0; a < all.size(); ++a) {  // Partial as Replicate, by id
        spmd::placement_vec p = all[a].placements;
        for (int m = 0; m < p.size(); ++m)
          if (p[m].is_partial()) p[m] = spmd::make_replicate();
        CHECK(ids.as_replicate(id[a]) == ids.id(spmd::make_spec(mesh, p, rank).spec));
      }
    }
}
