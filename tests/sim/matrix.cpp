// tests/sim/matrix.cpp — the redistribute matrix: every src -> dst pair over
// {R, S(0), S(1), P(sum), P(max)} on meshes 4, 2x2, 2x3, 4x2 and 2x2x2, on an even and an
// uneven shape (zero-size shards included), planned by make_plan and run by the simulation
// backend, checked against a naive reference; round trips A -> B -> A; the counter.
//
// The reference is tests/runtime/reference.hpp's list-splitting model: a rank's block is
// G's elements that survive torch.chunk splits of index lists, mesh dim by mesh dim.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "../runtime/reference.hpp"
#include "spmd/plan.hpp"
#include "spmd/backends/sim/sim.hpp"

namespace {

using spmd::index_t;

/// G's values at the reference block of `coord`, row-major.
std::vector<double> reference_block(const ref::ivec& mesh, const std::vector<ref::place>& ps,
                                    const ref::ivec& shape, const ref::ivec& coord) {
  const ref::box b = ref::box_at(mesh, ps, shape, coord);
  std::vector<double> out{0.0};
  for (std::size_t d = 0; d < shape.size(); ++d) {
    index_t stride = 1;
    for (std::size_t k = d + 1; k < shape.size(); ++k) stride *= shape[k];
    std::vector<double> next;
    for (double base : out)
      for (index_t i : b.indices[d]) next.push_back(base + static_cast<double>(i * stride));
    out = std::move(next);
  }
  return out;
}

double reduce(char op, double a, double b) { return op == 'x' ? std::max(a, b) : a + b; }

struct layout_case {
  std::vector<ref::place> places;
  char op;  // 's' sum, 'x' max, 0 none
};

std::vector<layout_case> all_placements(std::size_t mesh_dims) {
  const std::vector<std::pair<ref::place, char>> one = {
      {{'R', 0, -1}, 0}, {{'S', 0, -1}, 0}, {{'S', 1, -1}, 0}, {{'P', 0, -1}, 's'}, {{'P', 0, -1}, 'x'}};
  std::vector<layout_case> out{{{}, 0}};
  for (std::size_t m = 0; m < mesh_dims; ++m) {
    std::vector<layout_case> next;
    for (const layout_case& c : out)
      for (const auto& [p, op] : one) {
        if (op && c.op && op != c.op) continue;  // one reduce op per layout
        layout_case n = c;
        n.places.push_back(p);
        if (op) n.op = op;
        next.push_back(n);
      }
    out = std::move(next);
  }
  return out;
}

spmd::layout_spec spec_of(const ref::ivec& mesh, const layout_case& c, int rank) {
  spmd::mesh_shape_vec m{};
  for (index_t s : mesh) m.push_back(s);
  spmd::placement_vec p = ref::to_spmd(c.places);
  for (int i = 0; i < p.size(); ++i)
    if (p[i].is_partial()) p[i] = spmd::make_partial(c.op == 'x' ? spmd::reduce_op::max : spmd::reduce_op::sum);
  const spmd::spec_result r = spmd::make_spec(m, p, rank);
  REQUIRE(r.ok());
  return r.spec;
}

/// Every rank's data under `dst`, or for Partial placements the reduction over each
/// partial group, equals the reference block of G.
int check_locals(const ref::ivec& mesh, const layout_case& dst, const ref::ivec& shape,
                 const spmd::sim::local_set<double>& out) {
  int bad = 0;
  const std::vector<ref::ivec> coords = ref::all_coords(mesh);
  for (std::size_t i = 0; i < coords.size(); ++i) {
    const ref::ivec& c = coords[i];
    bool leader = true;  // coordinate 0 on every partial mesh dim
    for (std::size_t m = 0; m < mesh.size(); ++m) leader = leader && (dst.places[m].kind != 'P' || c[m] == 0);
    if (!leader) continue;
    const std::vector<double> want = reference_block(mesh, dst.places, shape, c);
    std::vector<double> got;
    for (std::size_t j = 0; j < coords.size(); ++j) {
      bool same_group = true;
      for (std::size_t m = 0; m < mesh.size(); ++m)
        same_group = same_group && (dst.places[m].kind == 'P' || coords[j][m] == c[m]);
      if (!same_group) continue;
      const auto v = out.view(static_cast<index_t>(j));
      if (static_cast<std::size_t>(v.size()) != want.size()) return bad + 1;
      if (got.empty()) got.assign(v.data(), v.data() + v.size());
      else
        for (std::size_t k = 0; k < got.size(); ++k) got[k] = reduce(dst.op, got[k], v.data()[k]);
    }
    bad += got != want;
  }
  return bad;
}

}  // namespace

TEST_CASE("every pair over R, S(0), S(1), P(sum), P(max) redistributes exactly", "[matrix]") {
  const std::vector<ref::ivec> meshes = {{4}, {2, 2}, {2, 3}, {4, 2}, {2, 2, 2}};
  const std::vector<ref::ivec> shapes = {{8, 12}, {5, 3}};  // even; uneven with empty shards
  long pairs = 0, failures = 0, round_trip_failures = 0, collectives = 0;
  for (const ref::ivec& mesh : meshes) {
    const std::vector<layout_case> layouts = all_placements(mesh.size());
    for (const ref::ivec& shape : shapes) {
      spmd::shape_vec global{};
      for (index_t e : shape) global.push_back(e);
      std::vector<double> g(static_cast<std::size_t>(shape[0] * shape[1]));
      for (std::size_t i = 0; i < g.size(); ++i) g[i] = static_cast<double>(i);
      for (const layout_case& a : layouts) {
        const spmd::layout_spec sa = spec_of(mesh, a, 2);
        const spmd::sim::local_set<double> in = spmd::sim::distribute<double>(g, sa, global);
        for (const layout_case& b : layouts) {
          const spmd::layout_spec sb = spec_of(mesh, b, 2);
          const double bytes = static_cast<double>(g.size() * sizeof(double));
          spmd::sim::comm_counter counter;
          const spmd::plan there = spmd::make_plan(sa, sb, bytes).value;
          const spmd::sim::local_set<double> out = spmd::sim::execute(there, global, in);
          ++pairs;
          collectives += counter.total();
          if (counter.total() != there.collectives()) ++failures;
          if (const int bad = check_locals(mesh, b, shape, out)) {
            ++failures;
            UNSCOPED_INFO("mesh " << ref::to_string(mesh) << " shape " << ref::to_string(shape) << ": "
                                  << ref::to_string(a.places) << " -> " << ref::to_string(b.places) << ": " << bad
                                  << " ranks differ from the reference");
          }
          // A -> B -> A: A's locals come back exactly (Partial A: its global value does).
          const spmd::plan back = spmd::make_plan(sb, sa, bytes).value;
          const spmd::sim::local_set<double> again = spmd::sim::execute(back, global, out);
          const bool partial_a = a.op != 0;
          bool same = true;
          if (partial_a) {
            same = spmd::sim::full_tensor<double>(again, sa, global) == g;
          } else {
            for (index_t r = 0; r < in.ranks(); ++r) {
              const auto x = in.view(r), y = again.view(r);
              same = same && x.size() == y.size() && std::equal(x.data(), x.data() + x.size(), y.data());
            }
          }
          if (!same) {
            ++round_trip_failures;
            UNSCOPED_INFO("round trip " << ref::to_string(a.places) << " -> " << ref::to_string(b.places)
                                        << " on " << ref::to_string(mesh) << " does not restore A");
          }
        }
      }
    }
  }
  std::printf("matrix: %ld pairs (each with a round trip), %ld collectives run\n", pairs, collectives);
  CHECK(pairs > 20000);
  CHECK(failures == 0);
  CHECK(round_trip_failures == 0);
}
