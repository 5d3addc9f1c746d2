// tests/autoshard/models.cpp — models searched from their modules (nn/step_graph.hpp): the
// graph has the model's parameters, in parameters(model)'s order and shapes; the search on the
// gpt's graph is exact with its deferred operators (the same step as the Pareto form, which
// defers nothing); a parallel model's layouts pinned (and FSDP's reads, gathered) (nn/parallel_pins.hpp) are costed, never
// below the unrestricted search; and choose picks the cheapest candidate.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/autoshard/auto_parallel.hpp"
#include "spmd/autoshard/choose.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/nn/gpt.hpp"
#include "spmd/nn/parallel_pins.hpp"
#include "spmd/nn/parallelize.hpp"
#include "spmd/nn/step_graph.hpp"
#include "spmd/nn/unit_choice.hpp"

namespace {

namespace as = spmd::autoshard;
namespace nn = spmd::nn;
using spmd::index_t;

using small_gpt = nn::gpt<64, 16, 32, 4, 2>;
using small_mlp = nn::mlp<32, 64, 16, nn::act::relu>;

bool same(double a, double b) { return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b)); }

template <class Host>
std::vector<std::vector<index_t>> host_shapes() {
  Host h;
  std::vector<std::vector<index_t>> out;
  nn::for_each_parameter(h, [&](std::string_view, auto& t) {
    using E = typename std::remove_cvref_t<decltype(t)>::extents_type;
    std::vector<index_t> e;
    for (std::size_t d = 0; d < E::rank(); ++d) e.push_back(E::static_extent(d));
    out.push_back(e);
  });
  return out;
}

template <class Host>
std::vector<std::vector<index_t>> traced_shapes(const as::graph& g, const nn::traced& t) {
  std::vector<std::vector<index_t>> out;
  for (const int p : t.params) {
    const spmd::shape_vec& s = g.tensors[static_cast<std::size_t>(p)].shape;
    out.emplace_back(s.begin(), s.end());
  }
  return out;
}

as::graph gpt_step(const spmd::mesh_shape_vec& mesh, nn::traced* t = nullptr) {
  // [docs:gpt-graph]
  as::graph g{mesh};
  const int tokens = g.data({8, 16}, 8);
  const nn::traced m = nn::trace<small_gpt>(g, tokens);
  g.loss = nn::trace_cross_entropy<64>(g, m.out, g.data({8, 16}, 8));
  // [/docs:gpt-graph]
  if (t) *t = m;
  return g;
}

}  // namespace

// A model's step traced in the compiler and searched there: the choice as types
// (autoshard/auto_parallel.hpp). With collectives at a second each, spmd-train's mlp is
// computed whole on every rank: no collective.
struct traced_mlp_step {
  static constexpr as::graph make() {
    as::graph g{spmd::mesh_shape_vec{{4}, 1}};
    const int x = g.data({16, 32}), labels = g.data({16}, 8);  // tensors 0 and 1; w1 is 2
    const nn::traced t = nn::trace<small_mlp>(g, x);
    g.loss = nn::trace_cross_entropy<16>(g, t.out, labels);
    return g;
  }
};
struct dear_links {
  static constexpr as::cost_model value() {
    as::cost_model c{};
    c.fallback.alpha_s = 1.0;
    return c;
  }
};
using traced_choice = as::auto_parallel<traced_mlp_step, as::no_pins, dear_links>;
static_assert(traced_choice::ok && traced_choice::collectives == 0);
static_assert(std::is_same_v<traced_choice::placements_of<2>, spmd::placements<spmd::replicate>>);
static_assert(std::is_same_v<traced_choice::layout<2, spmd::mesh<4>>,
                             spmd::layout<spmd::mesh<4>, spmd::placements<spmd::replicate>, spmd::extents<64, 32>>>);

TEST_CASE("autoshard models: the traced graph has the model's parameters, in order, with their shapes", "[autoshard]") {
  nn::traced t;
  const as::graph g = gpt_step(spmd::mesh_shape_vec{{2, 4}, 2}, &t);
  CHECK(t.params.size() == nn::parameter_paths<small_gpt>().size());
  CHECK(traced_shapes<small_gpt>(g, t) == host_shapes<small_gpt>());
  for (const int p : t.params) CHECK(g.tensors[static_cast<std::size_t>(p)].kind == as::tensor_kind::param);
  // logits (8, 16, 64), then the loss a scalar
  CHECK(g.tensors[static_cast<std::size_t>(t.out)].shape.size() == 3);
  CHECK(g.tensors[static_cast<std::size_t>(g.loss)].shape.size() == 0);

  as::graph m{spmd::mesh_shape_vec{{2}, 1}};
  const nn::traced mt = nn::trace<small_mlp>(m, m.data({16, 32}));
  CHECK(traced_shapes<small_mlp>(m, mt) == host_shapes<small_mlp>());
  // matmul_t, add, relu, matmul_t, add
  CHECK(m.ops.size() == 5);
}

TEST_CASE("autoshard models: an operator given more inputs than it takes is refused", "[autoshard]") {
  as::graph g{spmd::mesh_shape_vec{{2}, 1}};
  const int x = g.data({4, 8});
  CHECK(g.apply<spmd::ops::binary<spmd::ops::add_fn>>({x, x}) >= 0);
  CHECK_THROWS_AS(g.apply<spmd::ops::binary<spmd::ops::add_fn>>({x, x, x, x, x}), std::length_error);
}

TEST_CASE("autoshard models: the gpt's search with deferred operators is exact", "[autoshard]") {
  as::cost_model open{}, huge{};
  huge.memory_budget = 1e30;  // the Pareto form
  const as::graph g = gpt_step(spmd::mesh_shape_vec{{2}, 1});
  const as::solution deferred = as::search(g, open);
  const as::solution every = as::search_detail::run(g, huge, {}, false, true, false);  // nothing deferred
  REQUIRE(deferred.ok());
  REQUIRE(every.ok());
  CHECK(same(deferred.step_s(), every.step_s()));
  CHECK(deferred.states < every.states);
  // under budgets, deferred operators carry their Pareto sets (deferred_fronts): the same
  // answers as the program that defers nothing, from the least memory that fits to none
  const as::solution least = as::search_detail::run(g, huge, {}, true, true, false);
  REQUIRE(least.ok());
  CHECK(same(as::search_detail::run(g, huge, {}, true).memory_bytes, least.memory_bytes));
  for (const double f : {0.0, 0.1, 0.3, 0.6, 1.0}) {
    as::cost_model c{};
    c.memory_budget = least.memory_bytes + f * (deferred.memory_bytes - least.memory_bytes);
    const as::solution with = as::search(g, c), without = as::search_detail::run(g, c, {}, false, true, false);
    REQUIRE(with.ok());
    REQUIRE(without.ok());
    CHECK(same(with.step_s(), without.step_s()));
    CHECK(with.memory_bytes <= c.memory_budget);
  }
  // cheap links: the search splits the work (below computing it all on every rank)
  as::cost_model cheap{};
  cheap.fallback = {1e-9, 1e-15};
  const as::solution split = as::search(g, cheap), whole = as::search(gpt_step(spmd::mesh_shape_vec{{1}, 1}), cheap);
  REQUIRE(split.ok());
  CHECK(split.compute_s < 0.75 * whole.compute_s);
  // on 2x4 the search runs (deferred q, k, v: thousands of states, not millions)
  const as::solution wide = as::search(gpt_step(spmd::mesh_shape_vec{{2, 4}, 2}), cheap);
  REQUIRE(wide.ok());
  CHECK(wide.states < 100000);
  CHECK(wide.compute_s < split.compute_s);
}

// Without a budget the search runs on arrays indexed by the states' codes, with identical
// blocks walked once (fastest.hpp); a layer too wide to index takes the hashed program, which
// walks every operator. Both give the same step, collectives and layouts, on the gpt and on a
// gpt of four blocks (whose repeated halves go through a table), under three cost models.
TEST_CASE("autoshard models: the arrays and the hashed program give the same step", "[autoshard]") {
  const spmd::mesh_shape_vec mesh{{2, 2}, 2};
  as::graph four{mesh};
  const int tokens = four.data({8, 16}, 8);
  const nn::traced t = nn::trace<nn::gpt<64, 16, 32, 4, 4>>(four, tokens);
  four.loss = nn::trace_cross_entropy<64>(four, t.out, four.data({8, 16}, 8));
  for (const as::graph& g : {gpt_step(mesh), four})
    for (const double alpha : {20e-6, 1e-7, 1e-9}) {
      as::cost_model c{};
      c.fallback.alpha_s = alpha;
      const as::solution arrays = as::search_detail::run(g, c, {}, false);
      const as::solution hashed = as::search_detail::run(g, c, {}, false, true);
      REQUIRE(arrays.ok());
      REQUIRE(hashed.ok());
      CHECK(same(arrays.step_s(), hashed.step_s()));
      CHECK(same(arrays.memory_bytes, hashed.memory_bytes));
      CHECK(arrays.collectives == hashed.collectives);
      CHECK(arrays.strategy == hashed.strategy);
      for (std::size_t x = 0; x < g.tensors.size(); ++x) CHECK(spmd::same_blocks(arrays.layouts[x], hashed.layouts[x]));
    }
}

TEST_CASE("autoshard models: a parallel model's layouts pinned, costed; choose takes the cheapest", "[autoshard]") {
  using Mesh = spmd::mesh<2, 2>::named<"dp", "tp">;
  using B = spmd::sim::backend;
  using megatron = nn::tp_plan<nn::rule<"w1", nn::colwise>, nn::rule<"b1", nn::colwise>, nn::rule<"w2", nn::rowwise>>;
  const small_mlp host;
  using Fsdp = decltype(nn::parallelize<Mesh, B, nn::tensor_parallel<"tp", megatron>, nn::fsdp<"dp">>(host));
  using Ddp = decltype(nn::parallelize<Mesh, B, nn::tensor_parallel<"tp", megatron>, nn::ddp<"dp">>(host));
  using Whole = decltype(nn::parallelize<Mesh, B>(host));

  as::graph g{spmd::mesh_shape_vec{{2, 2}, 2}};
  const int x = g.data({16, 32}), labels = g.data({16}, 8);
  const nn::traced t = nn::trace<small_mlp>(g, x);
  g.loss = nn::trace_cross_entropy<16>(g, t.out, labels);
  // the batch: split on dp (FSDP, DDP) or whole (everything replicated)
  const auto batch = [&](bool split, int rank) {
    spmd::placement_vec p{};
    p.push_back(split ? spmd::make_shard(0) : spmd::make_replicate());
    p.push_back(spmd::make_replicate());
    return spmd::make_spec(g.mesh, p, rank).spec;
  };

  as::pins fsdp = nn::parameter_pins<Fsdp>(g, t);
  // w1 under FSDP x TP: Shard(0) on tp, then on dp (the split after tp's)
  REQUIRE(fsdp.has(t.params[0]));
  const spmd::layout_spec& w1 = fsdp.layout[static_cast<std::size_t>(t.params[0])];
  CHECK(w1.placements[0].is_shard(0));
  CHECK(w1.placements[1].is_shard(0));
  CHECK(!w1.default_order(0));
  as::pins ddp = nn::parameter_pins<Ddp>(g, t), whole = nn::parameter_pins<Whole>(g, t);
  for (as::pins* p : {&fsdp, &ddp, &whole}) {
    p->pin(x, batch(p != &whole, 2), g.tensors.size());
    p->pin(labels, batch(p != &whole, 1), g.tensors.size());
  }
  // FSDP reads every parameter gathered on dp; DDP holds it so
  for (as::pins* p : {&fsdp, &ddp}) nn::pin_reads_whole_on(*p, g, t, 0);
  const spmd::layout_spec& w1_read = fsdp.read_layout[static_cast<std::size_t>(t.params[0])];
  CHECK(w1_read.placements[0].is_replicate());
  CHECK(w1_read.placements[1].is_shard(0));
  // replicated, the step's activations are whole too (nothing to split them)
  for (std::size_t a = 0; a < g.tensors.size(); ++a)
    if (g.tensors[a].kind == as::tensor_kind::activation)
      whole.pin(static_cast<int>(a), batch(false, g.tensors[a].shape.size()), g.tensors.size());
  CHECK(ddp.layout[static_cast<std::size_t>(t.params[0])].placements[0].is_replicate());
  CHECK(ddp.layout[static_cast<std::size_t>(t.params[2])].placements[1].is_shard(1));  // w2 rowwise

  for (const double alpha : {1e-9, 2e-5, 1.0}) {
    as::cost_model c{};
    c.fallback.alpha_s = alpha;
    const as::choice ch = as::choose(g, c, {fsdp, ddp, whole});
    REQUIRE(ch.best >= 0);
    for (const as::solution& s : ch.candidates) {
      REQUIRE(s.ok());
      CHECK(s.step_s() >= ch.unrestricted.step_s() * (1 - 1e-12));
      CHECK(s.step_s() >= ch.candidates[static_cast<std::size_t>(ch.best)].step_s());
      // the pinned parameters rest as the model holds them
      for (std::size_t i = 0; i < t.params.size(); ++i)
        CHECK(spmd::same_blocks(s.layouts[static_cast<std::size_t>(t.params[i])],
                                fsdp.has(t.params[i]) ? s.layouts[static_cast<std::size_t>(t.params[i])] : s.layouts[0]));
    }
    // read gathered, FSDP pays its all_gathers whatever the activations: never below DDP
    CHECK(ch.candidates[0].comm_s >= ch.candidates[1].comm_s * (1 - 1e-12));
    // among candidates as fast as the best, none with fewer collectives
    const as::solution& b = ch.candidates[static_cast<std::size_t>(ch.best)];
    for (const as::solution& s : ch.candidates)
      if (same(s.step_s(), b.step_s())) CHECK(b.collectives.total() <= s.collectives.total());
    CHECK(same(ch.candidates[0].layouts[static_cast<std::size_t>(t.params[0])].placements[1].dim, 0));
    // replicating everything needs no collective; when collectives cost a second it wins, and
    // it is what the unrestricted search finds
    CHECK(ch.candidates[2].collectives.total() == 0);
    if (alpha == 1.0) {
      CHECK(ch.best == 2);
      CHECK(ch.optimal());
    }
  }
}

// Per unit: the gpt's three units (the model, each block) each FSDP or DDP. choose_mix searches
// the eight mixes; each is checked against its own search, and under budgets between the mixes'
// memories the best mix is what a brute force over them finds: some of them mixed.
TEST_CASE("autoshard models: choose_mix picks the best FSDP/DDP mix of the gpt's units", "[autoshard]") {
  using Mesh = spmd::mesh<2, 2>::named<"dp", "tp">;
  using B = spmd::sim::backend;
  using Fsdp = decltype(nn::parallelize<Mesh, B, nn::tensor_parallel<"tp", nn::gpt_megatron>, nn::fsdp<"dp", nn::gpt_fsdp_units>>(
      std::declval<const small_gpt&>()));
  using Ddp = decltype(nn::parallelize<Mesh, B, nn::tensor_parallel<"tp", nn::gpt_megatron>, nn::ddp<"dp">>(
      std::declval<const small_gpt&>()));
  nn::traced t;
  const as::graph g = gpt_step(spmd::mesh_shape_vec{{2, 2}, 2}, &t);
  std::vector<as::pins> options{nn::parameter_pins<Fsdp>(g, t), nn::parameter_pins<Ddp>(g, t)};
  for (as::pins& p : options) {
    nn::pin_reads_whole_on(p, g, t, 0);
    for (std::size_t d = 0; d < g.tensors.size(); ++d)
      if (g.tensors[d].kind == as::tensor_kind::data) {
        spmd::placement_vec pl{};
        pl.push_back(spmd::make_shard(0));
        pl.push_back(spmd::make_replicate());
        p.pin(static_cast<int>(d), spmd::make_spec(g.mesh, pl, g.tensors[d].shape.size()).spec, g.tensors.size());
      }
  }
  const std::vector<std::string_view> units = nn::unit_paths<small_gpt, nn::gpt_fsdp_units>();
  REQUIRE(units.size() == 3);
  std::vector<int> unit_of(g.tensors.size(), -1);
  constexpr auto paths = nn::parameter_paths<small_gpt>();
  for (std::size_t i = 0; i < paths.size(); ++i)
    unit_of[static_cast<std::size_t>(t.params[i])] = static_cast<int>(nn::owning_unit(paths[i], units));
  CHECK(unit_of[static_cast<std::size_t>(t.params[0])] == 0);   // wte: the model's
  CHECK(unit_of[static_cast<std::size_t>(t.params[2])] == 1);   // blocks.0.ln1.weight
  CHECK(unit_of[static_cast<std::size_t>(t.params[28])] == 0);  // lm_head

  // the brute force: every mix searched on its own pins
  std::vector<as::solution> each;
  for (int m = 0; m < 8; ++m) {
    std::vector<int> mix{m & 1, (m >> 1) & 1, (m >> 2) & 1};
    const as::pins p = as::mix_pins(options, unit_of, mix);
    for (std::size_t i = 0; i < paths.size(); ++i) {  // each parameter rests as its unit's option holds it
      const int w = t.params[i];
      const as::pins& o = options[static_cast<std::size_t>(mix[static_cast<std::size_t>(unit_of[static_cast<std::size_t>(w)])])];
      CHECK(spmd::same_blocks(p.layout[static_cast<std::size_t>(w)], o.layout[static_cast<std::size_t>(w)]));
    }
    each.push_back(as::search(g, {}, p));
    REQUIRE(each.back().ok());
  }
  // the uniform mixes are the whole-model candidates
  const as::choice whole = as::choose(g, {}, options);
  CHECK(same(each[0].step_s(), whole.candidates[0].step_s()));
  CHECK(same(each[7].step_s(), whole.candidates[1].step_s()));
  int mixed_wins = 0;
  std::vector<double> budgets{0};  // 0: none
  for (const as::solution& s : each) budgets.push_back(s.memory_bytes);
  for (const double budget : budgets) {
    as::cost_model c{};
    if (budget > 0) c.memory_budget = budget;
    const as::mix_choice m = as::choose_mix(g, c, options, unit_of, 3);
    CHECK(m.exhaustive);
    CHECK(m.mixes == 8);
    // each mix under this budget (its activations placed within it, not as without one)
    std::vector<as::solution> within;
    int want = -1;
    for (int i = 0; i < 8; ++i) {
      within.push_back(as::search(g, c, as::mix_pins(options, unit_of, {i & 1, (i >> 1) & 1, (i >> 2) & 1})));
      if (within.back().ok() && (want < 0 || as::better_candidate(within.back(), within[static_cast<std::size_t>(want)])))
        want = i;
    }
    REQUIRE(want >= 0);
    REQUIRE(m.best.size() == 3);
    INFO("budget " << budget);
    CHECK(m.best == std::vector<int>{want & 1, (want >> 1) & 1, (want >> 2) & 1});
    CHECK(same(m.step.step_s(), within[static_cast<std::size_t>(want)].step_s()));
    if (!m.uniform()) ++mixed_wins;
    // one unit at a time from the best uniform mix: never worse than it
    const as::mix_choice d = as::choose_mix(g, c, options, unit_of, 3, 2);
    CHECK(!d.exhaustive);
    REQUIRE(!d.best.empty());
    CHECK(!as::better_candidate(d.step, m.step));  // nothing beats every mix searched
    for (const int u : {0, 7})
      if (within[static_cast<std::size_t>(u)].ok()) CHECK(!as::better_candidate(within[static_cast<std::size_t>(u)], d.step));
  }
  CHECK(mixed_wins > 0);
  // below every mix's memory: none fits, and the least is named
  as::cost_model tight{};
  tight.memory_budget = 1;
  const as::mix_choice none = as::choose_mix(g, tight, options, unit_of, 3);
  CHECK(none.best.empty());
  double least = each[0].memory_bytes;
  for (const as::solution& s : each) least = std::min(least, s.memory_bytes);
  CHECK(none.least_memory <= least);
  CHECK(none.least_memory > 1);
}
