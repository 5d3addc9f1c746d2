// tests/plan/plan_validity.cpp — every plan the run-time planner makes is a valid chain of
// steps, each step does what its kind says (the table in spmd/plan/step.hpp), its cost is
// what the cost model says, and no independent single-mesh-dim search finds a cheaper path.
//
//   pairs:  every src -> dst over {R, S(0), S(1), P(sum), P(max)} (rank-2 tensors) on meshes
//           4, 2x2, 2x3, 4x2, 2x2x2, plus 1x4 and 2x1x2 for unit mesh dims; and a seeded
//           random sample with explicit shard orders, rank-3 tensors, meshes up to 3-d.
//   sizes:  a small tensor (latency decides) and a 64 MiB one (bandwidth decides).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <spmd/plan.hpp>
#include <spmd/plan/lower.hpp>
#include <spmd/spmd.hpp>

#include "reference_planner.hpp"

namespace {

using spmd::layout_spec;
using spmd::placement;
using spmd::plan_step;
using spmd::step_kind;
using refplan::state;

constexpr double small_bytes = 8 * 8 * 4;             // 8x8 f32
constexpr double large_bytes = 4096.0 * 4096.0 * 4;   // 4096x4096 f32

// Failures collected in loops; the first few are shown with the pair that failed.
struct failures {
  std::vector<std::string> first;
  std::size_t count = 0, pairs = 0, steps = 0, compared = 0;
  void add(const std::string& what) {
    if (first.size() < 25) first.push_back(what);
    ++count;
  }
  void report(const char* name) const {
    std::printf("%s: %zu pairs, %zu steps checked, %zu compared with the reference, %zu failures\n",
                name, pairs, steps, compared, count);
    std::ostringstream os;
    for (const auto& f : first) os << f << '\n';
    INFO(os.str());
    INFO(count << " failures in " << pairs << " pairs");
    CHECK(count == 0);
  }
};

std::vector<long> mesh_of(const layout_spec& s) { return {s.mesh.begin(), s.mesh.end()}; }

std::string text(const layout_spec& s) {
  spmd::plan_text t{};
  spmd::put_state(t, s);
  std::string mesh;
  for (long m : mesh_of(s)) mesh += (mesh.empty() ? "" : "x") + std::to_string(m);
  return std::string(t.view()) + " on " + mesh;
}

std::string describe(const layout_spec& src, const layout_spec& dst, double bytes) {
  return text(src) + " -> " + text(dst).substr(0, text(dst).find(" on ")) + " (rank " +
         std::to_string(src.tensor_rank) + ", " + std::to_string(static_cast<long long>(bytes)) + " B)";
}

spmd::mesh_shape_vec mesh_vec(const std::vector<long>& m) {
  spmd::mesh_shape_vec v{};
  for (long s : m) v.push_back(s);
  return v;
}

// ---------------------------------------------------------------------------
// The checks for one pair
// ---------------------------------------------------------------------------

/// Step kinds by what they do to one mesh dim: (from kind, to kind).
bool kind_fits(step_kind k, const refplan::pl& a, const refplan::pl& b) {
  switch (k) {
    case step_kind::all_gather: return a.kind == 'S' && b.kind == 'R';
    case step_kind::all_to_all: return a.kind == 'S' && b.kind == 'S' && a.what != b.what;
    case step_kind::all_reduce: return a.kind == 'P' && b.kind == 'R';
    case step_kind::reduce_scatter: return a.kind == 'P' && b.kind == 'S';
    case step_kind::chunk: return a.kind == 'R' && b.kind == 'S';
    case step_kind::partition: return a.kind == 'R' && b.kind == 'P';
    case step_kind::fill: return a.kind == 'S' && b.kind == 'P';
  }
  return false;
}

void check_step(const plan_step& st, const layout_spec& src, int index, const std::string& where,
                failures& f) {
  const std::vector<long> mesh = mesh_of(src);
  const int dims = static_cast<int>(mesh.size());
  const std::string at = where + ", step " + std::to_string(index) + " (" + spmd::step_kind_name(st.kind) + ")";
  ++f.steps;

  // Same mesh and rank; both ends are layouts make_spec accepts unchanged.
  for (const layout_spec* s : {&st.from, &st.to}) {
    if (!(s->mesh == src.mesh) || s->tensor_rank != src.tensor_rank) f.add(at + ": changes the mesh or the rank");
    const spmd::spec_result r = spmd::make_spec(s->mesh, s->placements, s->tensor_rank);
    if (!r.ok() || !(r.spec == *s)) f.add(at + ": state " + text(*s) + " is not a valid layout");
  }

  // The group: not empty, only mesh dims of size > 1.
  if (st.mesh_dims == 0 || (st.mesh_dims >> dims) != 0) f.add(at + ": bad mesh_dims mask");
  for (int m = 0; m < dims; ++m)
    if (spmd::in_mask(st.mesh_dims, m) && mesh[static_cast<std::size_t>(m)] == 1)
      f.add(at + ": its group contains mesh dim " + std::to_string(m) + " of size 1");

  const state a = refplan::without_unit_dims(refplan::from_spec(st.from), mesh);
  const state b = refplan::without_unit_dims(refplan::from_spec(st.to), mesh);
  for (int m = 0; m < dims; ++m) {
    const auto mi = static_cast<std::size_t>(m);
    if (!spmd::in_mask(st.mesh_dims, m)) {
      // Outside the group nothing changes (unit mesh dims are compared as R).
      if (!(a[mi] == b[mi])) f.add(at + ": mesh dim " + std::to_string(m) + " outside the group changes");
      continue;
    }
    if (!kind_fits(st.kind, a[mi], b[mi]))
      f.add(at + ": mesh dim " + std::to_string(m) + " goes " + refplan::to_string({a[mi]}) + " -> " +
            refplan::to_string({b[mi]}) + ", not what the kind does");
    // Reductions reduce with the source's op; partition and fill create the target's.
    const bool reduces = st.kind == step_kind::all_reduce || st.kind == step_kind::reduce_scatter;
    const bool creates = st.kind == step_kind::partition || st.kind == step_kind::fill;
    if (reduces && a[mi].kind == 'P' && a[mi].what != static_cast<int>(st.op)) f.add(at + ": reduces with the wrong op");
    if (creates && b[mi].kind == 'P' && b[mi].what != static_cast<int>(st.op)) f.add(at + ": creates the wrong op");
    // A shard may stop only if no mesh dim outside the group splits its tensor dim later;
    // a new shard comes after every shard outside the group.
    for (int k = 0; k < dims; ++k) {
      if (spmd::in_mask(st.mesh_dims, k)) continue;
      const auto ki = static_cast<std::size_t>(k);
      if (a[mi].kind == 'S' && a[ki].kind == 'S' && a[ki].what == a[mi].what && a[ki].order > a[mi].order)
        f.add(at + ": unshards mesh dim " + std::to_string(m) + " before mesh dim " + std::to_string(k));
      if (b[mi].kind == 'S' && b[ki].kind == 'S' && b[ki].what == b[mi].what && b[ki].order > b[mi].order)
        f.add(at + ": shards mesh dim " + std::to_string(m) + " before mesh dim " + std::to_string(k));
    }
  }
}

/// Plan src -> dst at run time and check it. `reference`: also compare with the brute force.
spmd::plan_result check_pair(const layout_spec& src, const layout_spec& dst, double bytes, bool reference,
                             failures& f) {
  ++f.pairs;
  const std::string where = describe(src, dst, bytes);
  const spmd::plan_result r = spmd::make_plan(src, dst, bytes);
  if (!r.ok()) {
    f.add(where + ": " + spmd::describe(r.error));
    return r;
  }
  const spmd::plan& p = r.value;
  const std::vector<long> mesh = mesh_of(src);
  const state s0 = refplan::without_unit_dims(refplan::from_spec(src), mesh);
  const state s1 = refplan::without_unit_dims(refplan::from_spec(dst), mesh);

  // Chain: src, the steps end to end, dst. No steps exactly when the layouts agree
  // (unit mesh dims aside): an R -> R plan is empty, not a gather and a chunk.
  if (p.steps.empty() != (s0 == s1)) f.add(where + ": empty plan iff same layout fails");
  if (!p.steps.empty()) {
    // The plan's states hold R on unit mesh dims, its ends included: compare the same way.
    if (!(refplan::without_unit_dims(refplan::from_spec(p.steps[0].from), mesh) == s0))
      f.add(where + ": the first step does not start at the source");
    if (!(refplan::without_unit_dims(refplan::from_spec(p.steps[p.steps.size() - 1].to), mesh) == s1))
      f.add(where + ": the last step does not end at the target");
    for (int m = 0; m < src.mesh.size(); ++m)
      if (src.mesh[m] == 1 && !(p.steps[0].from.placements[m].is_replicate() &&
                                p.steps[p.steps.size() - 1].to.placements[m].is_replicate()))
        f.add(where + ": a unit mesh dim is not R at the plan's ends");
  }
  for (int i = 0; i + 1 < p.steps.size(); ++i)
    if (!(p.steps[i].to == p.steps[i + 1].from)) f.add(where + ": steps " + std::to_string(i) + " and " +
                                                         std::to_string(i + 1) + " do not meet");

  // Each step; no state visited twice; the cost is the sum of the model's step costs.
  std::set<state> seen{s0};
  double cost = 0;
  int collectives = 0;
  for (int i = 0; i < p.steps.size(); ++i) {
    const plan_step& st = p.steps[i];
    check_step(st, src, i, where, f);
    if (!seen.insert(refplan::without_unit_dims(refplan::from_spec(st.to), mesh)).second)
      f.add(where + ": step " + std::to_string(i) + " returns to an earlier state");
    const double n = static_cast<double>(spmd::group_size(src.mesh, st.mesh_dims));
    cost += refplan::step_cost(refplan::from_spmd(st.kind), refplan::from_spec(st.from),
                              refplan::from_spec(st.to), mesh, n, bytes);
    collectives += spmd::is_collective(st.kind);
  }
  if (std::abs(cost - p.cost_us) > 1e-9 * (1 + cost)) f.add(where + ": cost_us is not the sum of its steps");
  if (collectives != p.collectives()) f.add(where + ": collectives() miscounts");

  if (reference) {
    ++f.compared;
    const refplan::best b = refplan::cheapest(refplan::from_spec(src), refplan::from_spec(dst), mesh, bytes,
                                              refplan::ends_vocabulary(s0, s1));
    if (!b.found) {
      f.add(where + ": the reference finds no path");
    } else if (refplan::better(b.cost, b.collectives, p.cost_us, p.collectives())) {
      f.add(where + ": the reference finds a cheaper path (" + std::to_string(b.cost) + " us, " +
            std::to_string(b.collectives) + " collectives) than the plan (" + std::to_string(p.cost_us) +
            " us, " + std::to_string(p.collectives()) + ")");
    }
  }
  return r;
}

// ---------------------------------------------------------------------------
// Layouts to plan between
// ---------------------------------------------------------------------------

/// Every layout of a rank-2 tensor over {R, S(0), S(1), P(sum), P(max)} per mesh dim
/// (mixing sum and max in one layout is invalid and left out).
std::vector<layout_spec> all_layouts(const std::vector<long>& mesh) {
  const placement choices[] = {spmd::make_replicate(), spmd::make_shard(0), spmd::make_shard(1),
                               spmd::make_partial(spmd::reduce_op::sum),
                               spmd::make_partial(spmd::reduce_op::max)};
  std::vector<layout_spec> out;
  std::size_t total = 1;
  for (std::size_t i = 0; i < mesh.size(); ++i) total *= 5;
  for (std::size_t code = 0; code < total; ++code) {
    spmd::placement_vec p{};
    for (std::size_t m = 0, c = code; m < mesh.size(); ++m, c /= 5) p.push_back(choices[c % 5]);
    const spmd::spec_result r = spmd::make_spec(mesh_vec(mesh), p, 2);
    if (r.ok()) out.push_back(r.spec);
  }
  return out;
}

/// A random layout: shards of random (also negative) dims, at most one reduce op, and
/// for most tensor dims an explicit shard order (a random permutation).
layout_spec random_layout(std::mt19937& rng, const std::vector<long>& mesh, int rank) {
  std::uniform_int_distribution<int> pick(0, 99), dim(-rank, rank - 1), op(0, 4);
  const auto the_op = static_cast<spmd::reduce_op>(op(rng));
  spmd::placement_vec p{};
  for (std::size_t m = 0; m < mesh.size(); ++m) {
    const int x = pick(rng);
    p.push_back(x < 25 ? spmd::make_replicate() : x < 75 ? spmd::make_shard(dim(rng)) : spmd::make_partial(the_op));
  }
  for (int d = 0; d < rank; ++d) {
    if (pick(rng) < 30) continue;  // default order for this tensor dim
    std::vector<int> at;
    for (int m = 0; m < p.size(); ++m)
      if (p[m].is_shard() && (p[m].dim == d || p[m].dim == d - rank)) at.push_back(m);
    std::vector<int> pos(at.size());
    for (std::size_t k = 0; k < pos.size(); ++k) pos[k] = static_cast<int>(k);
    std::shuffle(pos.begin(), pos.end(), rng);
    for (std::size_t k = 0; k < at.size(); ++k) p[at[k]].order = pos[k];
  }
  const spmd::spec_result r = spmd::make_spec(mesh_vec(mesh), p, rank);
  REQUIRE(r.ok());
  return r.spec;
}

}  // namespace

TEST_CASE("every pair over R, S(0), S(1), P(sum), P(max) plans validly and optimally", "[validity]") {
  const std::vector<std::vector<long>> meshes = {{4}, {2, 2}, {2, 3}, {4, 2}, {2, 2, 2}, {1, 4}, {2, 1, 2}};
  failures f;
  for (const auto& mesh : meshes) {
    const std::vector<layout_spec> layouts = all_layouts(mesh);
    // The brute force runs on 1-d and 2-d meshes (3-d: too many states for Bellman-Ford here).
    const bool reference = mesh.size() <= 2;
    for (const layout_spec& src : layouts)
      for (const layout_spec& dst : layouts)
        for (double bytes : {small_bytes, large_bytes}) check_pair(src, dst, bytes, reference, f);
  }
  f.report("exhaustive");
}

TEST_CASE("random pairs with explicit shard orders and rank-3 tensors plan validly", "[validity]") {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> ndims(1, 3), size(1, 4), which(0, 3);
  const double sizes[] = {0, small_bytes, 4 * 6 * 10 * 4, large_bytes};
  failures f;
  for (int i = 0; i < 4000; ++i) {
    std::vector<long> mesh(static_cast<std::size_t>(ndims(rng)));
    for (long& m : mesh) m = size(rng);
    const layout_spec src = random_layout(rng, mesh, 3), dst = random_layout(rng, mesh, 3);
    check_pair(src, dst, sizes[which(rng)], mesh.size() <= 2, f);
  }
  f.report("random");
}

// The planner searches each pair with its tensor dims renamed canonically (plan/state.hpp):
// renaming the dims a pair shards renames its plan, step for step, ties included — the choice
// among equally cheap plans does not depend on how those dims are numbered. The dims neither
// end shards (a plan may shard one on the way) keep their relative order.
TEST_CASE("a plan does not depend on how the tensor dims are numbered", "[validity]") {
  std::mt19937 rng(20261130);
  std::uniform_int_distribution<int> ndims(1, 3), size(1, 4), which(0, 2);
  const double sizes[] = {small_bytes, 4 * 6 * 10 * 4, large_bytes};
  const auto renamed = [](const layout_spec& s, const int* to) {
    spmd::placement_vec p = s.placements;
    for (int m = 0; m < p.size(); ++m)
      if (p[m].is_shard()) p[m].dim = to[p[m].dim];
    return spmd::make_spec(s.mesh, p, s.tensor_rank).spec;
  };
  int checked = 0, differ = 0;
  for (int i = 0; i < 3000; ++i) {
    std::vector<long> mesh(static_cast<std::size_t>(ndims(rng)));
    for (long& m : mesh) m = size(rng);
    const layout_spec src = random_layout(rng, mesh, 3), dst = random_layout(rng, mesh, 3);
    int to[3] = {0, 1, 2};
    std::shuffle(to, to + 3, rng);
    // the dims neither end shards: the renamed pair's unused dims, in order
    bool used[3] = {}, used_to[3] = {};
    for (const layout_spec* e : {&src, &dst})
      for (int m = 0; m < e->placements.size(); ++m)
        if (e->placements[m].is_shard() && e->mesh[m] > 1) used[e->placements[m].dim] = true;
    for (int d = 0; d < 3; ++d) used_to[to[d]] = used[d];
    for (int d = 0, u = 0; d < 3; ++d)
      if (!used[d]) {
        while (used_to[u]) ++u;
        to[d] = u++;
      }
    const double bytes = sizes[which(rng)];
    const spmd::plan_result a = spmd::make_plan(src, dst, bytes);
    const spmd::plan_result b = spmd::make_plan(renamed(src, to), renamed(dst, to), bytes);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    REQUIRE(a.value.steps.size() == b.value.steps.size());
    for (int k = 0; k < a.value.steps.size(); ++k) {
      const spmd::plan_step& x = a.value.steps[k];
      const spmd::plan_step& y = b.value.steps[k];
      CHECK(x.kind == y.kind);
      CHECK(x.mesh_dims == y.mesh_dims);
      CHECK(x.op == y.op);
      CHECK(spmd::same_blocks(renamed(x.from, to), y.from));
      CHECK(spmd::same_blocks(renamed(x.to, to), y.to));
    }
    CHECK(a.value.cost_us == b.value.cost_us);
    ++checked;
    differ += !(to[0] == 0 && to[1] == 1);
  }
  CHECK(differ > checked / 2);  // most pairs were really renamed
}

TEST_CASE("scalars and vectors plan validly", "[validity]") {
  // Rank 0 (only R and P apply) and rank 1, with a zero-size tensor among the sizes.
  const placement choices[] = {spmd::make_replicate(), spmd::make_shard(0), spmd::make_partial(spmd::reduce_op::sum),
                               spmd::make_partial(spmd::reduce_op::min)};
  failures f;
  for (int rank : {0, 1})
    for (const std::vector<long>& mesh : std::vector<std::vector<long>>{{4}, {2, 2}, {2, 1, 3}, {2, 2, 2}}) {
      std::vector<layout_spec> layouts;
      std::size_t total = 1;
      for (std::size_t i = 0; i < mesh.size(); ++i) total *= 4;
      for (std::size_t code = 0; code < total; ++code) {
        spmd::placement_vec p{};
        for (std::size_t m = 0, c = code; m < mesh.size(); ++m, c /= 4) p.push_back(choices[c % 4]);
        const spmd::spec_result r = spmd::make_spec(mesh_vec(mesh), p, rank);
        if (r.ok()) layouts.push_back(r.spec);
      }
      for (const layout_spec& src : layouts)
        for (const layout_spec& dst : layouts)
          for (double bytes : {0.0, small_bytes, large_bytes}) check_pair(src, dst, bytes, mesh.size() <= 2, f);
    }
  f.report("scalars and vectors");
}

// ---------------------------------------------------------------------------
// Optimality beyond the ends' vocabulary. These began as known gaps: the planner once
// sharded only the tensor dims the ends shard and merged collectives only towards R or
// the final placements, and cheaper plans existed outside that move set.
// ---------------------------------------------------------------------------

TEST_CASE("a reference with every tensor dim and reduce op finds no cheaper plan",
          "[optimal]") {
  // Once failing: P(sum) -> P(max) on 4 ranks planned all_reduce + partition (10.2 us at
  // 256 B) where reduce_scatter into S(0), then a fill with max's identity, costs 8.4 us;
  // S(0),R -> R,P(sum) on 2x2 at 64 MiB gathered 388 us where chunking mesh dim 1 into
  // S(1) first halves what the all_gather moves (198 us).
  const std::vector<std::vector<long>> meshes = {{4}, {2, 2}, {2, 3}, {4, 2}, {1, 4}};
  failures f;
  for (const auto& mesh : meshes) {
    const std::vector<layout_spec> layouts = all_layouts(mesh);
    for (const layout_spec& src : layouts)
      for (const layout_spec& dst : layouts)
        for (double bytes : {small_bytes, large_bytes}) {
          ++f.pairs;
          ++f.compared;
          const spmd::plan& p = spmd::make_plan(src, dst, bytes).value;
          const refplan::best b = refplan::cheapest(refplan::from_spec(src), refplan::from_spec(dst), mesh,
                                                    bytes, refplan::full_vocabulary(2));
          if (refplan::better(b.cost, b.collectives, p.cost_us, p.collectives()))
            f.add(describe(src, dst, bytes) + ": plan " + std::string(spmd::trace(p, src, dst).view()) + " costs " +
                  std::to_string(p.cost_us) + " us, the full-vocabulary reference " + std::to_string(b.cost) + " us");
        }
  }
  f.report("optimal: full vocabulary");
}

TEST_CASE("plan costs obey the triangle inequality", "[optimal]") {
  // cost(A -> C) <= cost(A -> B) + cost(B -> C) for every B, as PyTorch's
  // test_graph_based_redistribute_cost asserts for its planner. Once failing: merged
  // collectives only targeted R or the final placements, so P(sum),P(sum) -> P(max),P(max)
  // on 2x2 cost 10.2 us directly but 8.4 us through S(0),S(0).
  const std::vector<std::vector<long>> meshes = {{4}, {2, 2}, {2, 3}, {4, 2}};
  failures f;
  for (const auto& mesh : meshes) {
    const std::vector<layout_spec> layouts = all_layouts(mesh);
    const std::size_t n = layouts.size();
    for (double bytes : {small_bytes, large_bytes}) {
      std::vector<double> cost(n * n);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < n; ++j) cost[i * n + j] = spmd::make_plan(layouts[i], layouts[j], bytes).value.cost_us;
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t k = 0; k < n; ++k) {
          ++f.pairs;
          const double direct = cost[i * n + k];
          for (std::size_t j = 0; j < n; ++j) {
            const double via = cost[i * n + j] + cost[j * n + k];
            if (direct > via + 1e-9 * (1 + direct)) {
              f.add(describe(layouts[i], layouts[k], bytes) + " costs " + std::to_string(direct) + " us, via " +
                    text(layouts[j]) + " " + std::to_string(via) + " us");
              break;
            }
          }
        }
    }
  }
  f.report("optimal: triangle inequality");
}
