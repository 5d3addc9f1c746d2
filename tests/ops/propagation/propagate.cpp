// tests/ops/propagation/propagate.cpp — the propagation engine at run time:
//   - einsum parsing and its errors;
//   - candidate validity (fixed, even_only, unreducible, mixed partials);
//   - resolve() against a brute force that plans every valid candidate: the same choice
//     (first exact candidate, else the least total plan cost, ties to the lowest number)
//     over random meshes, layouts, shapes, rules and forced outputs.
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "spmd/ops/matmul.hpp"
#include "spmd/ops/propagate.hpp"

namespace {

using namespace spmd;
using namespace spmd::ops;

TEST_CASE("einsum parses factors and rejects malformed text", "[propagate]") {
  constexpr op_rule mm = einsum("mk,kn->mn");
  static_assert(mm.ok && mm.inputs() == 2 && mm.factors.size() == 3);
  static_assert(mm.factor('k') == 1 && mm.factors[1].reducible);
  static_assert(op_rule::dim_of(mm.out, mm.factor('n')) == 1);
  constexpr op_rule b = einsum("ij,.j->ij");
  static_assert(b.ok && b.in[1][0] == no_factor);
  constexpr op_rule split = einsum("i->ij");  // j is made by the op: fixed
  static_assert(split.ok && split.factors[1].fixed);
  CHECK_FALSE(einsum("ij,jk").ok);
  CHECK_FALSE(einsum("ii->i").ok);
  CHECK_FALSE(einsum("i1->i").ok);
  CHECK_FALSE(einsum("ij-jk").ok);
  CHECK_FALSE(einsum("a,b,c,d,e->a").ok);
}

op_context context_of(const mesh_shape_vec& mesh, std::initializer_list<placement_vec> ps,
                      std::initializer_list<shape_vec> shapes, shape_vec out) {
  op_context c{};
  c.mesh = mesh;
  auto s = shapes.begin();
  for (const placement_vec& p : ps) {
    const spec_result r = make_spec(mesh, p, s->size());
    REQUIRE(r.ok());
    c.in.push_back(r.spec);
    c.in_shape.push_back(*s);
    double bytes = 4;
    for (index_t e : *s) bytes *= static_cast<double>(e);
    c.in_bytes.push_back(bytes);
    ++s;
  }
  c.out_shape = out;
  c.out_bytes = 4;
  for (index_t e : out) c.out_bytes *= static_cast<double>(e);
  return c;
}

placement_vec pv(std::initializer_list<placement> p) {
  placement_vec v{};
  for (const placement& x : p) v.push_back(x);
  return v;
}

TEST_CASE("candidate validity", "[propagate]") {
  const mesh_shape_vec m{{4}, 1};
  const op_context c = context_of(m, {pv({make_shard(0)})}, {shape_vec{{6, 8}, 2}}, shape_vec{{6}, 1});
  // "ij->i": 0 replicate, 1 shard i, 2 shard j.
  const op_rule sum_j = einsum("ij->i").reduces('j', reduce_op::sum);
  CHECK(make_candidate(sum_j, c, 2).valid());
  CHECK(make_candidate(sum_j, c, 2).out.placements[0] == make_partial(reduce_op::sum));
  CHECK(make_candidate(sum_j.not_reducible('j'), c, 2).error == candidate_error::unreducible_factor);
  CHECK(make_candidate(sum_j.fixed('j'), c, 2).error == candidate_error::fixed_factor);
  // i has 6 rows over 4 ranks: not even.
  CHECK(make_candidate(sum_j.even_only('i'), c, 1).error == candidate_error::uneven_factor);
  CHECK(make_candidate(sum_j.even_only('j'), c, 2).valid());  // 8 over 4
  CHECK(make_candidate(sum_j, c, 1).exact);
  CHECK(resolve(sum_j, c).index == 1);
  CHECK_FALSE(resolve(sum_j, c).costed);
}

/// What resolve() must return, by planning every candidate.
index_t brute_force(const op_rule& rule, const op_context& c, const placement_vec* forced) {
  layout_spec want{};
  if (forced != nullptr) want = make_spec(c.mesh, *forced, rule.out.size()).spec;
  const index_t n = candidate_count(rule, c);
  for (index_t i = 0; i < n; ++i) {
    const candidate k = make_candidate(rule, c, i);
    if (k.valid() && k.exact &&
        (forced == nullptr || propagate_detail::same_op_blocks(k.out, want)))
      return i;
  }
  index_t best = -1;
  double best_cost = 0;
  for (index_t i = 0; i < n; ++i) {
    const candidate k = make_candidate(rule, c, i);
    if (!k.valid()) continue;
    const double cost = cost_candidate(k, c, forced != nullptr ? &want : nullptr);
    if (best < 0 || cost < best_cost) {
      best = i;
      best_cost = cost;
    }
  }
  return best;
}

index_t shape_elems_of(const shape_vec& s) {
  index_t n = 1;
  for (index_t e : s) n *= e;
  return n;
}

TEST_CASE("branch and bound chooses what planning every candidate chooses", "[propagate]") {
  std::mt19937 rng(2024);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<unsigned>(n)); };
  const op_rule rules[] = {
      einsum("mk,kn->mn")
          .passes_partial_of(0, reduce_op::sum, reduce_op::sum)
          .passes_partial_of(1, reduce_op::sum, reduce_op::sum),
      einsum("ij,ij->ij").passes_partial(reduce_op::sum, reduce_op::sum),
      einsum("ij,.j->ij").passes_partial(reduce_op::max, reduce_op::max),
      einsum("ij->i").reduces('j', reduce_op::max).passes_partial(reduce_op::max, reduce_op::max),
      einsum("ij->i").reduces('j', reduce_op::avg).even_only('j'),
      einsum("ij->ij").fixed('j'),
      einsum("bmk,bkn->bmn").passes_partial_of(0, reduce_op::sum, reduce_op::sum),
  };
  const reduce_op ops[] = {reduce_op::sum, reduce_op::max, reduce_op::avg};
  int checked = 0, costed = 0, forced_cases = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const op_rule& rule = rules[pick(7)];
    mesh_shape_vec mesh{};
    const int dims = 1 + pick(3);
    for (int m = 0; m < dims; ++m) mesh.push_back(1 + pick(4));
    // Factor extents, some uneven.
    index_t extent[max_factors]{};
    for (int f = 0; f < rule.factors.size(); ++f) extent[f] = 1 + pick(9);
    op_context c{};
    c.mesh = mesh;
    bool ok = true;
    for (int i = 0; i < rule.inputs() && ok; ++i) {
      shape_vec shape{};
      for (std::int8_t f : rule.in[i]) shape.push_back(f == no_factor ? 1 : extent[f]);
      const reduce_op op = ops[pick(3)];
      placement_vec p{};
      for (int m = 0; m < dims; ++m) {
        const int r = pick(4);
        p.push_back(r == 0 ? make_replicate()
                    : r == 1 ? make_partial(op)
                             : make_shard(pick(shape.size())));
      }
      const spec_result s = make_spec(mesh, p, shape.size());
      ok = s.ok();
      c.in.push_back(s.spec);
      c.in_shape.push_back(shape);
      c.in_bytes.push_back(4.0 * static_cast<double>(shape_elems_of(shape)));
    }
    if (!ok) continue;
    for (std::int8_t f : rule.out) c.out_shape.push_back(f == no_factor ? 1 : extent[f]);
    c.out_bytes = 4.0 * static_cast<double>(shape_elems_of(c.out_shape));
    placement_vec forced{};
    const bool use_forced = pick(4) == 0;
    if (use_forced) {
      for (int m = 0; m < dims; ++m)
        forced.push_back(pick(2) == 0 ? make_replicate() : make_shard(pick(c.out_shape.size())));
      ++forced_cases;
    }
    const placement_vec* fp = use_forced ? &forced : nullptr;
    const resolution r = resolve(rule, c, fp);
    REQUIRE(r.ok());
    INFO("trial " << trial);
    const index_t bf = brute_force(rule, c, fp);
    CHECK(r.index == bf);
    if (r.index != bf && std::getenv("DEBUG_PROP")) {
      layout_spec want{};
      if (fp) want = make_spec(c.mesh, *fp, rule.out.size()).spec;
      for (index_t i : {r.index, bf}) {
        const candidate k = make_candidate(rule, c, i);
        std::printf("cand %ld exact %d cost %.6f bound", (long)i, (int)k.exact, cost_candidate(k, c, fp ? &want : nullptr));
        for (int j = 0; j < k.in.size(); ++j) std::printf(" %.3f/%.3f", propagate_detail::transition_bound(c.in[j], k.in[j]), propagate_detail::plan_cost(c.in[j], k.in[j], c.in_bytes[j]));
        if (fp) std::printf(" out %.3f/%.3f", propagate_detail::transition_bound(k.out, want), propagate_detail::plan_cost(k.out, want, c.out_bytes));
        std::printf("\n");
      }
    }
    if (!r.costed) CHECK(r.chosen.exact);
    costed += r.costed;
    ++checked;
  }
  CHECK(checked > 1300);
  CHECK(costed > 300);
  CHECK(forced_cases > 200);
}

TEST_CASE("resolve errors", "[propagate]") {
  const mesh_shape_vec m{{2, 2}, 2};
  const op_context c = context_of(m, {pv({make_shard(0), make_replicate()}), pv({make_replicate(), make_replicate()})},
                                  {shape_vec{{4, 4}, 2}, shape_vec{{4, 4}, 2}}, shape_vec{{4, 4}, 2});
  const op_rule mm = einsum("mk,kn->mn");
  CHECK(resolve(einsum("ij,jk"), c).error == resolve_error::bad_rule);
  CHECK(resolve(einsum("ijk,kn->ijn"), c).error == resolve_error::arity);
  const placement_vec bad = pv({make_shard(2), make_replicate()});
  CHECK(resolve(mm, c, &bad).error == resolve_error::forced_invalid);
  const placement_vec mixed = pv({make_partial(reduce_op::sum), make_partial(reduce_op::max)});
  CHECK(resolve(mm, c, &mixed).error == resolve_error::forced_invalid);
  const placement_vec good = pv({make_partial(reduce_op::max), make_replicate()});
  CHECK(resolve(mm, c, &good).ok());  // reachable by a redistribution of the output
}

}  // namespace
