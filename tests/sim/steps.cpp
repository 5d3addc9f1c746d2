// tests/sim/steps.cpp — every kind of step on the runtime path against the reference model:
// all valid single steps on small 1-d and 2-d meshes (merged groups included), a sample on
// 3-d meshes, even / uneven / zero-size shards, every element type; the precondition
// checks; plans from the planner; buffer reuse.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "../common/failures.hpp"

#include "reference.hpp"

namespace {

using simref::index_t;
using simref::ivec;
using spmd::placement;
using spmd::reduce_op;
using spmd::step_kind;

using spmd_test::failures;

spmd::mesh_shape_vec mesh_of(const ivec& m) {
  spmd::mesh_shape_vec v{};
  for (index_t s : m) v.push_back(s);
  return v;
}

constexpr reduce_op all_ops[] = {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min,
                                 reduce_op::product};
constexpr step_kind all_kinds[] = {step_kind::all_gather,     step_kind::all_reduce,
                                   step_kind::reduce_scatter, step_kind::all_to_all,
                                   step_kind::chunk,          step_kind::partition,
                                   step_kind::fill};

/// R, S(0..rank-1), P(each op).
std::vector<placement> alphabet(int rank) {
  std::vector<placement> a{spmd::make_replicate()};
  for (int d = 0; d < rank; ++d) a.push_back(spmd::make_shard(d));
  for (reduce_op op : all_ops) a.push_back(spmd::make_partial(op));
  return a;
}

/// Source states: every placement list (default shard order), plus the reversed order
/// where a tensor dim is sharded twice.
std::vector<spmd::layout_spec> sources(const ivec& mesh, int rank) {
  const auto alpha = alphabet(rank);
  std::vector<spmd::layout_spec> out;
  const ivec bound(mesh.size(), static_cast<index_t>(alpha.size()));
  ivec c(mesh.size(), 0);
  for (;;) {
    spmd::placement_vec p{};
    for (index_t k : c) p.push_back(alpha[static_cast<std::size_t>(k)]);
    const auto r = spmd::make_spec(mesh_of(mesh), p, rank);
    if (r.ok()) {
      out.push_back(r.spec);
      // Reversed shard order for tensor dims sharded by two mesh dims.
      spmd::placement_vec q = r.spec.placements;
      bool changed = false;
      for (int d = 0; d < rank; ++d) {
        const auto order = r.spec.shard_order(d);
        if (order.size() == 2) {
          q[order[0]].order = 1;
          q[order[1]].order = 0;
          changed = true;
        }
      }
      if (changed) {
        const auto r2 = spmd::make_spec(mesh_of(mesh), q, rank);
        if (r2.ok()) out.push_back(r2.spec);
      }
    }
    int m = static_cast<int>(mesh.size()) - 1;
    while (m >= 0 && ++c[static_cast<std::size_t>(m)] == bound[static_cast<std::size_t>(m)])
      c[static_cast<std::size_t>(m--)] = 0;
    if (m < 0) return out;
  }
}

/// Targets of a step on mask G from A: G's placements replaced by any of the alphabet;
/// new shards are appended to their tensor dim's shard order.
std::vector<spmd::layout_spec> targets(const spmd::layout_spec& a, unsigned g, int rank) {
  const auto alpha = alphabet(rank);
  std::vector<int> dims;
  for (int m = 0; m < a.placements.size(); ++m)
    if ((g >> m) & 1u) dims.push_back(m);
  std::vector<spmd::layout_spec> out;
  ivec c(dims.size(), 0);
  for (;;) {
    spmd::placement_vec p = a.placements;
    for (std::size_t i = 0; i < dims.size(); ++i) p[dims[i]] = alpha[static_cast<std::size_t>(c[i])];
    // Positions: keep A's for shards outside G; append G's new shards (mesh order).
    for (int d = 0; d < rank; ++d) {
      int next = 0;
      for (int m = 0; m < p.size(); ++m)
        if (p[m].is_shard(d) && !((g >> m) & 1u)) next = std::max(next, p[m].order + 1);
      for (int m = 0; m < p.size(); ++m)
        if (p[m].is_shard(d) && ((g >> m) & 1u)) p[m].order = next++;
    }
    const auto r = spmd::make_spec(a.mesh, p, rank);
    if (r.ok() && !(r.spec == a)) out.push_back(r.spec);
    int i = static_cast<int>(dims.size()) - 1;
    while (i >= 0 && ++c[static_cast<std::size_t>(i)] == static_cast<index_t>(alpha.size()))
      c[static_cast<std::size_t>(i--)] = 0;
    if (i < 0) return out;
  }
}

struct candidate {
  spmd::plan_step step;
  ivec global;
};

/// Every step the backend accepts on (mesh, shape).
std::vector<candidate> valid_steps(const ivec& mesh, const ivec& global) {
  const int rank = static_cast<int>(global.size());
  std::vector<candidate> out;
  const unsigned masks = (1u << mesh.size()) - 1;
  const spmd::shape_vec g = simref::to_shape(global);
  for (const auto& a : sources(mesh, rank))
    for (unsigned mask = 1; mask <= masks; ++mask)
      for (const auto& b : targets(a, mask, rank))
        for (step_kind k : all_kinds)
          for (reduce_op op : all_ops) {
            const spmd::plan_step s{k, mask, op, a, b};
            if (spmd::build_schedule(s, g).error == spmd::step_error::none)
              out.push_back({s, global});
          }
  return out;
}

bool holds_avg(const spmd::plan_step& s) {
  return spmd::holds_partial(s.from.placements, reduce_op::avg) ||
         spmd::holds_partial(s.to.placements, reduce_op::avg);
}

template <class T>
void check_step(const candidate& c, std::mt19937_64& rng, failures& f) {
  const auto in = simref::random_locals<T>(c.step.from, c.global, rng);
  if (std::is_integral_v<T> && holds_avg(c.step)) {  // no integer average: it must throw
    ++f.checks;
    try {
      (void)spmd::sim::execute(c.step, simref::to_shape(c.global), simref::to_set(in));
      f.add(simref::text(c.step) + " (" + spmd::sim::element_name<T>() + "): P(avg) did not throw");
    } catch (const std::invalid_argument& e) {
      if (std::string(e.what()).find("P(avg) needs a floating-point element type") == std::string::npos)
        f.add(simref::text(c.step) + ": wrong message: " + e.what());
    }
    return;
  }
  std::vector<simref::local<T>> want;
  try {
    want = simref::step(c.step, c.global, in);
  } catch (const std::exception& e) {
    f.add(simref::text(c.step) + " on " + simref::text(c.global) + ": reference: " + e.what());
    return;
  }
  const auto set = spmd::sim::execute(c.step, simref::to_shape(c.global), simref::to_set(in));
  const auto got = simref::from_set(set, c.step.to, c.global);
  ++f.checks;
  const std::string diff = simref::compare(want, got);
  if (!diff.empty())
    f.add(simref::text(c.step) + " on " + simref::text(c.global) + " (" +
          spmd::sim::element_name<T>() + "): " + diff);
}

struct coverage {
  std::map<std::pair<step_kind, bool>, int> n;  // (kind, merged group) -> steps
  void add(const spmd::plan_step& s) { ++n[{s.kind, (s.mesh_dims & (s.mesh_dims - 1)) != 0}]; }
};

}  // namespace

TEST_CASE("every valid step on 1-d and 2-d meshes matches the reference", "[steps]") {
  const std::vector<std::pair<ivec, std::vector<ivec>>> cases = {
      {{4}, {{5}, {6, 3}, {3, 4}, {0, 2}}},
      {{3}, {{7}, {2, 5}}},
      {{2, 2}, {{5, 3}, {4, 4}, {1, 3}}},
      {{2, 3}, {{6, 5}, {3, 7}}},
  };
  std::mt19937_64 rng(7);
  failures f;
  coverage cov;
  std::size_t k = 0;
  for (const auto& [mesh, shapes] : cases)
    for (const ivec& global : shapes)
      for (const candidate& c : valid_steps(mesh, global)) {
        cov.add(c.step);
        check_step<float>(c, rng, f);
        check_step<std::int64_t>(c, rng, f);
        switch (k++ % 3) {  // the other types on a third of the steps each
          case 0: check_step<double>(c, rng, f); break;
          case 1: check_step<std::int32_t>(c, rng, f); break;
          default: check_step<spmd::bfloat16>(c, rng, f); break;
        }
      }
  f.report_checked();
  // Every kind ran, on single and on merged groups.
  for (step_kind kind : all_kinds) {
    INFO(spmd::step_kind_name(kind));
    CHECK(cov.n[{kind, false}] > 0);
    CHECK(cov.n[{kind, true}] > 0);
  }
}

TEST_CASE("sampled steps on 3-d meshes match the reference", "[steps]") {
  const std::vector<std::pair<ivec, ivec>> cases = {
      {{2, 2, 2}, {4, 3, 5}}, {{2, 1, 3}, {5, 6}}, {{2, 2, 2}, {3, 0, 2}}, {{3, 2, 2}, {7, 4}}};
  std::mt19937_64 rng(11);
  failures f;
  coverage cov;
  for (const auto& [mesh, global] : cases) {
    const int rank = static_cast<int>(global.size());
    const auto srcs = sources(mesh, rank);
    const spmd::shape_vec g = simref::to_shape(global);
    // Random (A, G, B, kind, op); keep the valid ones.
    int kept = 0;
    for (int tries = 0; tries < 60000 && kept < 400; ++tries) {
      const auto& a = srcs[rng() % srcs.size()];
      const unsigned mask = 1u + static_cast<unsigned>(rng() % ((1u << mesh.size()) - 1));
      const auto ts = targets(a, mask, rank);
      if (ts.empty()) continue;
      const spmd::plan_step s{all_kinds[rng() % 7], mask, all_ops[rng() % 5], a,
                              ts[rng() % ts.size()]};
      if (spmd::build_schedule(s, g).error != spmd::step_error::none) continue;
      ++kept;
      cov.add(s);
      check_step<float>({s, global}, rng, f);
      check_step<std::int32_t>({s, global}, rng, f);
    }
    CHECK(kept > 100);
  }
  f.report_checked();
  for (step_kind kind : all_kinds) {
    INFO(spmd::step_kind_name(kind));
    CHECK(cov.n[{kind, false}] + cov.n[{kind, true}] > 0);
  }
}

namespace {
spmd::layout_spec spec(const ivec& mesh, std::vector<placement> ps, int rank) {
  spmd::placement_vec v{};
  for (auto p : ps) v.push_back(p);
  const auto r = spmd::make_spec(mesh_of(mesh), v, rank);
  REQUIRE(r.ok());
  return r.spec;
}
std::string error_of(const spmd::plan_step& s, const ivec& global) {
  std::vector<simref::local<float>> in;
  for (index_t r = 0; r < s.from.mesh_size(); ++r) {
    const auto b = simref::box(s.from, global, r);
    in.push_back({simref::to_ivec(b.shape), simref::to_ivec(b.offset),
                  std::vector<float>(static_cast<std::size_t>(simref::volume(simref::to_ivec(b.shape))))});
  }
  try {
    spmd::sim::execute(s, simref::to_shape(global), simref::to_set(in));
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("steps that cannot run are refused with the reason", "[steps]") {
  using spmd::make_partial;
  using spmd::make_replicate;
  using spmd::make_shard;
  const ivec m{2, 2};
  const auto S0S0 = spec(m, {make_shard(0), make_shard(0)}, 1);
  const auto RS0 = spec(m, {make_replicate(), make_shard(0)}, 1);
  const auto S0R = spec(m, {make_shard(0), make_replicate()}, 1);
  const auto RR = spec(m, {make_replicate(), make_replicate()}, 1);
  const auto PR = spec(m, {make_partial(), make_replicate()}, 1);

  // The outer shard of a nested pair cannot be gathered first: the inner one's position in
  // the shard order would change outside G.
  CHECK(error_of({step_kind::all_gather, 1u, reduce_op::sum, S0S0, RS0}, {8}) ==
        "spmd::sim::execute: step 0 (all_gather over mesh dims {0}) cannot run: a placement "
        "outside the step's mesh dims (G) changes");
  CHECK(error_of({step_kind::all_gather, 2u, reduce_op::sum, S0S0, S0R}, {8}).empty());
  // Specs that did not come from make_spec can still be checked on their boxes: mesh dim
  // 1 splits first in `from` but is gathered, and dim 0 keeps position 1 in `to`.
  spmd::layout_spec from = S0S0, to = S0S0;
  from.placements[0].order = 1;
  from.placements[1].order = 0;
  to.placements[0].order = 1;
  to.placements[1] = make_replicate();
  CHECK(error_of({step_kind::all_gather, 2u, reduce_op::sum, from, to}, {8}) ==
        "spmd::sim::execute: step 0 (all_gather over mesh dims {1}) cannot run: the pieces "
        "gathered from the group do not cover the rank's new block exactly (mesh index 0)");
  // Kind and placements disagree.
  CHECK(error_of({step_kind::all_reduce, 2u, reduce_op::sum, S0S0, S0R}, {8}).find(
            "do not fit its kind") != std::string::npos);
  CHECK(error_of({step_kind::all_reduce, 1u, reduce_op::max, PR, RR}, {8}).find(
            "do not fit its kind") != std::string::npos);  // op differs from P(sum)
  // A placement outside G changes.
  CHECK(error_of({step_kind::all_gather, 2u, reduce_op::sum, S0S0, RR}, {8}).find(
            "outside the step's mesh dims") != std::string::npos);
  // G empty / outside the mesh.
  CHECK(error_of({step_kind::chunk, 0u, reduce_op::sum, RR, RR}, {8}).find("empty or outside") !=
        std::string::npos);
  CHECK(error_of({step_kind::chunk, 4u, reduce_op::sum, RR, RR}, {8}).find("empty or outside") !=
        std::string::npos);
  // A chunk whose new shard splits first does not lie in the old block.
  spmd::layout_spec a = S0R, b = S0S0;
  a.placements[0].order = 1;  // alone, at position 1 (as make_spec never writes it)
  b.placements[0].order = 1;
  b.placements[1].order = 0;
  CHECK(error_of({step_kind::chunk, 2u, reduce_op::sum, a, b}, {8}) ==
        "spmd::sim::execute: step 0 (chunk over mesh dims {1}) cannot run: a rank's new block "
        "does not lie where the step kind needs it (inside the old block, or equal to it) "
        "(mesh index 1)");
  // Different meshes, wrong global rank.
  CHECK(error_of({step_kind::chunk, 1u, reduce_op::sum, RR, spec({4}, {make_shard(0)}, 1)}, {8})
            .find("differ in mesh") != std::string::npos);
  CHECK(spmd::build_schedule({step_kind::chunk, 1u, reduce_op::sum, RR, S0R},
                                  simref::to_shape({8, 2}))
            .error == spmd::step_error::shape_mismatch);
}

TEST_CASE("a plan is checked before any data moves", "[steps]") {
  const ivec m{4};
  const auto S0 = spec(m, {spmd::make_shard(0)}, 2);
  const auto R = spec(m, {spmd::make_replicate()}, 2);
  const auto S1 = spec(m, {spmd::make_shard(1)}, 2);
  spmd::plan p{};
  p.steps.push_back({step_kind::all_gather, 1u, reduce_op::sum, S0, R});
  p.steps.push_back({step_kind::chunk, 1u, reduce_op::sum, S0, S1});  // does not chain
  const ivec global{8, 4};
  const auto in = spmd::sim::distribute<float>(std::vector<float>(32), S0, simref::to_shape(global));
  CHECK_THROWS_WITH(spmd::sim::execute(p, simref::to_shape(global), in),
                    "spmd::sim::execute: step 1 (chunk over mesh dims {0}) does not start where "
                    "step 0 ends");
  // Locals of the wrong shape.
  spmd::plan q{};
  q.steps.push_back({step_kind::chunk, 1u, reduce_op::sum, R, S1});
  CHECK_THROWS_WITH(spmd::sim::execute(q, simref::to_shape(global), in),
                    "spmd::sim::execute: the local of mesh index 0 does not have the shape of "
                    "the plan's first state");
}

TEST_CASE("plans from the planner reproduce the global tensor", "[steps][plans]") {
  const std::vector<std::pair<ivec, std::vector<ivec>>> cases = {
      {{4}, {{10, 3}, {3}}},
      {{2, 3}, {{7, 4}, {6, 6, 2}}},
      {{2, 2, 2}, {{5, 9}, {4, 4, 4}, {0, 3}}},
  };
  std::mt19937_64 rng(5);
  failures f;
  int plans = 0;
  for (const auto& [mesh, shapes] : cases)
    for (const ivec& global : shapes) {
      const int rank = static_cast<int>(global.size());
      auto srcs = sources(mesh, rank);
      std::shuffle(srcs.begin(), srcs.end(), rng);
      srcs.resize(std::min<std::size_t>(srcs.size(), 40));
      std::vector<std::int64_t> data(static_cast<std::size_t>(simref::volume(global)));
      for (auto& x : data) x = static_cast<std::int64_t>(rng() % 1000) - 500;
      for (const auto& a : srcs)
        for (const auto& b : srcs) {
          const auto r = spmd::make_plan(a, b, 4.0 * static_cast<double>(data.size()));
          if (!r.ok()) continue;
          ++plans;
          // Exact arithmetic: int64, or for P(avg) (no integer average) the same integers in
          // double, where these sums and averages are exact too.
          auto run = [&]<class T>(T) {
            const std::vector<T> d(data.begin(), data.end());
            const auto in = spmd::sim::distribute<T>(d, a, simref::to_shape(global));
            const auto out = spmd::sim::execute(r.value, simref::to_shape(global), in);
            const auto got = simref::from_set(out, b, global);
            const auto value = simref::global_value(b, global, got);
            return std::pair{std::vector<std::int64_t>(value.begin(), value.end()),
                             simref::compare(simref::slice(b, global, d), got)};
          };
          const bool avg = spmd::holds_partial(a.placements, reduce_op::avg) ||
                           spmd::holds_partial(b.placements, reduce_op::avg);
          const auto [value, block_diff] = avg ? run(double{}) : run(std::int64_t{});
          ++f.checks;
          // The logical value is unchanged; non-partial targets hold exactly their boxes.
          if (value != data)
            f.add(simref::text(a) + " -> " + simref::text(b) + " on " + simref::text(global) +
                  ": the global value changed");
          bool partial = false;
          for (const auto& p : b.placements) partial |= p.is_partial();
          if (!partial && !block_diff.empty())
            f.add(simref::text(a) + " -> " + simref::text(b) + ": a local is not its block");
        }
    }
  f.report_checked();
  CHECK(plans > 1000);
}

TEST_CASE("buffers: unchanged ranks keep theirs, a const input is never written", "[steps]") {
  const ivec m{2, 2}, global{6, 4};
  const auto RR = spec(m, {spmd::make_replicate(), spmd::make_replicate()}, 2);
  const auto PR = spec(m, {spmd::make_partial(reduce_op::max), spmd::make_replicate()}, 2);
  const auto RS = spec(m, {spmd::make_replicate(), spmd::make_shard(0)}, 2);
  std::vector<float> data(24);
  for (int i = 0; i < 24; ++i) data[static_cast<std::size_t>(i)] = static_cast<float>(i);
  auto in = spmd::sim::distribute<float>(data, RR, simref::to_shape(global));
  const spmd::sim::local_set<float> copy = in;

  // R -> P(max) is a partition where every rank keeps its local: no copy at all.
  std::vector<const float*> before;
  for (index_t r = 0; r < 4; ++r) before.push_back(in.data(r));
  const spmd::plan_step part{step_kind::partition, 1u, reduce_op::max, RR, PR};
  spmd::plan p{};
  p.steps.push_back(part);
  auto moved = spmd::sim::execute(p, simref::to_shape(global), std::move(in));
  for (index_t r = 0; r < 4; ++r) CHECK(moved.data(r) == before[static_cast<std::size_t>(r)]);

  // R -> S(0) on mesh dim 1 (chunk) shrinks in place: rank at coordinate 0 keeps the prefix.
  spmd::plan c{};
  c.steps.push_back({step_kind::chunk, 2u, reduce_op::sum, RR, RS});
  const float* first = copy.data(0);
  const auto from_const = spmd::sim::execute(c, simref::to_shape(global), copy);
  CHECK(from_const.data(0) != first);  // a const input is copied, not taken
  for (index_t r = 0; r < 4; ++r)      // and left as it was
    CHECK(std::equal(copy.data(r), copy.data(r) + 24, data.begin()));
  spmd::sim::local_set<float> owned = copy;
  const float* owned0 = owned.data(0);
  const auto from_owned = spmd::sim::execute(c, simref::to_shape(global), std::move(owned));
  CHECK(from_owned.data(0) == owned0);
  CHECK(simref::compare(simref::slice(RS, global, data), simref::from_set(from_owned, RS, global))
            .empty());
}

TEST_CASE("large tensors take the streaming paths", "[steps]") {
  // 4 MiB of i32 (1 MiB per destination region and more): copies of many runs and
  // reductions write with streaming stores. Checked directly on the 2-d blocks.
  const ivec global{2048, 512};
  std::vector<std::int32_t> data(2048 * 512);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::int32_t>(i % 9973) - 4000;
  auto check_blocks = [&](const spmd::layout_spec& spec, const spmd::sim::local_set<std::int32_t>& got) {
    int bad = 0;
    for (index_t r = 0; r < got.ranks(); ++r) {
      const auto b = simref::box(spec, global, r);
      if (!(b.shape == got.shape(r))) return -1;
      const std::int32_t* p = got.data(r);
      for (index_t i = 0; i < b.shape[0]; ++i)
        for (index_t j = 0; j < b.shape[1]; ++j)
          bad += p[i * b.shape[1] + j] != data[static_cast<std::size_t>((b.offset[0] + i) * 512 + b.offset[1] + j)];
    }
    return bad;
  };
  for (const ivec& mesh : {ivec{4}, ivec{2}}) {
    const auto S0 = spec(mesh, {spmd::make_shard(0)}, 2);
    const auto S1 = spec(mesh, {spmd::make_shard(1)}, 2);
    const auto R = spec(mesh, {spmd::make_replicate()}, 2);
    const auto P = spec(mesh, {spmd::make_partial()}, 2);
    const auto g = simref::to_shape(global);
    for (const auto& [from, to] : std::vector<std::pair<spmd::layout_spec, spmd::layout_spec>>{
             {S0, S1}, {R, S1}, {P, R}, {P, S0}, {P, S1}, {S1, R}}) {
      INFO(simref::text(from) << " -> " << simref::text(to) << " on " << simref::text(mesh));
      const auto r = spmd::make_plan(from, to, 4.0 * 2048 * 512);
      REQUIRE(r.ok());
      const auto in = spmd::sim::distribute<std::int32_t>(data, from, g);
      CHECK(check_blocks(to, spmd::sim::execute(r.value, g, in)) == 0);
      CHECK(check_blocks(to, spmd::sim::execute(r.value, g, spmd::sim::local_set<std::int32_t>(in))) == 0);
    }
  }
}

TEST_CASE("layouts that differ only on mesh dims of size 1 hold the same blocks", "[steps]") {
  using spmd::make_partial;
  using spmd::make_replicate;
  using spmd::make_shard;
  using spmd::same_blocks;
  const ivec m{2, 1, 3};
  const auto a = spec(m, {make_shard(0), make_shard(0), make_replicate()}, 2);
  const auto b = spec(m, {make_shard(0), make_replicate(), make_replicate()}, 2);
  const auto c = spec(m, {make_shard(0), make_partial(), make_shard(0)}, 2);
  const auto d = spec(m, {make_shard(0), make_replicate(), make_shard(0)}, 2);
  const auto e = spec(m, {make_shard(0, 1), make_shard(0, 0), make_shard(0, 2)}, 2);  // size-1 first
  const auto f = spec(m, {make_shard(0, 1), make_replicate(), make_shard(0, 0)}, 2);  // real order flips
  CHECK(same_blocks(a, b));
  CHECK(same_blocks(c, d));
  CHECK(same_blocks(e, d));  // positions 1, 2 of the real splits are 0, 1 in d
  CHECK_FALSE(same_blocks(d, f));
  CHECK_FALSE(same_blocks(a, d));
  CHECK_FALSE(same_blocks(a, spec({2, 3}, {make_shard(0), make_replicate()}, 2)));
  // And they do: every rank's box is the same.
  for (index_t r = 0; r < 6; ++r) {
    CHECK(simref::box(a, {5, 4}, r) == simref::box(b, {5, 4}, r));
    CHECK(simref::box(e, {7, 4}, r) == simref::box(d, {7, 4}, r));
  }
}

TEST_CASE("a gather's schedule grows with the ranks, not their square", "[steps]") {
  // An all_gather to R on a 1-D mesh: the group's first member assembles one piece from each
  // member, the others copy its block (replicate). The ops, and the room reserved for them,
  // are linear in the ranks: reserving ranks x group size asked 75 GB at 16,384 ranks.
  const index_t n = 16384;
  const ivec m{n};
  const auto S0 = spec(m, {spmd::make_shard(0)}, 1);
  const auto R = spec(m, {spmd::make_replicate()}, 1);
  const spmd::step_schedule s =
      spmd::build_schedule({step_kind::all_gather, 1u, reduce_op::sum, S0, R}, simref::to_shape({4 * n}));
  REQUIRE(s.error == spmd::step_error::none);
  CHECK(s.ops.size() == static_cast<std::size_t>(2 * n - 1));  // n pieces, n - 1 replicas
  CHECK(s.ops.capacity() <= static_cast<std::size_t>(2 * n));
  std::size_t copies = 0;
  for (const spmd::sched_op& o : s.ops) copies += o.code == spmd::op_code::copy && o.dst == 0;
  CHECK(copies == static_cast<std::size_t>(n));
  // An all_to_all has a piece for every pair whose boxes meet: those it has, and only those.
  const auto S1 = spec(m, {spmd::make_shard(1)}, 2);
  const auto S0b = spec(m, {spmd::make_shard(0)}, 2);
  const spmd::step_schedule t =
      spmd::build_schedule({step_kind::all_to_all, 1u, reduce_op::sum, S0b, S1}, simref::to_shape({n, 3}));
  REQUIRE(t.error == spmd::step_error::none);
  CHECK(t.ops.size() == 3 * static_cast<std::size_t>(n));  // 3 columns: 3 ranks receive, from each row
}
