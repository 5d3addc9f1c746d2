// tests/runtime/value_api.cpp — the value-level API (make_spec, box_at) against the
// reference model, over every small mesh, placement list, shard order and shape.
#include <algorithm>
#include <cstddef>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "../common/failures.hpp"

#include "reference.hpp"

namespace {

using ref::index_t;
using ref::ivec;
using ref::place;

using spmd_test::failures;  // collected in hot loops

spmd::mesh_shape_vec mesh_vec(const ivec& mesh) {
  spmd::mesh_shape_vec v{};
  for (index_t s : mesh) v.push_back(s);
  return v;
}
spmd::shape_vec shape_vec(const ivec& shape) {
  spmd::shape_vec v{};
  for (index_t s : shape) v.push_back(s);
  return v;
}
spmd::coord_vec coord_vec(const ivec& c) {
  spmd::coord_vec v{};
  for (index_t s : c) v.push_back(s);
  return v;
}

// Every mesh of 1..3 dims with sizes 1..4.
std::vector<ivec> small_meshes() {
  std::vector<ivec> out;
  for (int k = 1; k <= 3; ++k) {
    const ivec bound(static_cast<std::size_t>(k), 4);
    for (ivec c : ref::all_coords(bound)) {
      for (auto& s : c) s += 1;
      out.push_back(c);
    }
  }
  return out;
}

// Every tensor shape of the given rank with sizes from {0, 1, 2, 3, 5, 7}.
std::vector<ivec> small_shapes(int rank) {
  static const index_t sizes[] = {0, 1, 2, 3, 5, 7};
  std::vector<ivec> out;
  for (const ivec& c : ref::all_coords(ivec(static_cast<std::size_t>(rank), 6))) {
    ivec s;
    for (index_t i : c) s.push_back(sizes[i]);
    out.push_back(s);
  }
  return out;
}

// Every placement list of k entries from {R, P(sum), S(0..rank-1)}, each with the default
// shard order and with every explicit order of each nested tensor dim.
std::vector<std::vector<place>> placement_lists(int k, int rank) {
  std::vector<std::vector<place>> out;
  const int options = rank + 2;
  for (const ivec& c : ref::all_coords(ivec(static_cast<std::size_t>(k), options))) {
    std::vector<place> ps;
    for (index_t o : c)
      ps.push_back(o == 0 ? place{'R'} : o == 1 ? place{'P'} : place{'S', int(o) - 2});
    std::vector<std::vector<place>> variants{ps};
    for (int d = 0; d < rank; ++d) {
      std::vector<int> ms;
      for (int m = 0; m < k; ++m)
        if (ps[m].kind == 'S' && ps[m].dim == d) ms.push_back(m);
      if (ms.size() < 2) continue;
      std::vector<std::vector<place>> next;
      for (const auto& v : variants) {
        next.push_back(v);  // default order
        std::vector<int> pos(ms.size());
        for (std::size_t i = 0; i < pos.size(); ++i) pos[i] = int(i);
        do {
          auto w = v;
          for (std::size_t i = 0; i < ms.size(); ++i) w[ms[i]].order = pos[i];
          next.push_back(w);
        } while (std::next_permutation(pos.begin(), pos.end()));
      }
      variants = std::move(next);
    }
    out.insert(out.end(), variants.begin(), variants.end());
  }
  return out;
}

std::string describe_case(const ivec& mesh, const std::vector<place>& ps, const ivec& shape,
                          const ivec& coord) {
  return "mesh " + ref::to_string(mesh) + " placements " + ref::to_string(ps) + " shape " +
         ref::to_string(shape) + " coord " + ref::to_string(coord);
}

}  // namespace

// ---------------------------------------------------------------------------
// Every rank's block, against the reference
// ---------------------------------------------------------------------------
TEST_CASE("box_at equals the reference on every small mesh, placement list, order and shape",
          "[value]") {
  failures f;
  std::mt19937 rng(20240611);  // fixed seed: the sample below is the same on every run
  std::size_t layouts = 0;
  for (const ivec& mesh : small_meshes()) {
    const int k = static_cast<int>(mesh.size());
    const auto coords = ref::all_coords(mesh);
    for (int rank = 0; rank <= 3; ++rank) {
      std::vector<ivec> shapes = small_shapes(rank);
      for (const auto& ps : placement_lists(k, rank)) {
        const spmd::spec_result r = spmd::make_spec(mesh_vec(mesh), ref::to_spmd(ps), rank);
        ++f.checks;
        if (!r.ok()) {
          f.add("make_spec rejected " + describe_case(mesh, ps, {}, {}) + ": " +
                spmd::describe(r.error));
          continue;
        }
        // The normalised shard order is the reference's.
        for (int d = 0; d < rank; ++d) {
          const auto order = r.spec.shard_order(d);
          if (std::vector<int>(order.begin(), order.end()) != ref::shard_order(ps, d, rank))
            f.add("shard order of dim " + std::to_string(d) + " in " + ref::to_string(ps));
        }
        // Negative dims name the same tensor dims.
        auto neg = ps;
        for (auto& p : neg)
          if (p.kind == 'S') p.dim -= rank;
        const spmd::spec_result rn = spmd::make_spec(mesh_vec(mesh), ref::to_spmd(neg), rank);
        if (!rn.ok() || !(rn.spec == r.spec)) f.add("negative dims differ: " + ref::to_string(neg));

        // Shapes: all of them, but a fixed-seed sample of 12 for rank-3 tensors on
        // 3-d meshes (the full product is ~27M blocks).
        std::vector<ivec> sample = shapes;
        if (k == 3 && rank == 3) {
          // Fisher-Yates by hand: std::shuffle differs between standard libraries,
          // mt19937's output does not.
          for (std::size_t i = sample.size() - 1; i > 0; --i)
            std::swap(sample[i], sample[rng() % (i + 1)]);
          sample.resize(12);
          sample.push_back({0, 7, 5});
          sample.push_back({7, 7, 7});
        }
        for (const ivec& shape : sample) {
          ++layouts;
          for (const ivec& coord : coords) {
            const ref::box want = ref::box_at(mesh, ps, shape, coord);
            const spmd::local_box got = spmd::box_at(r.spec, shape_vec(shape), coord_vec(coord));
            ++f.checks;
            if (ref::to_ivec(got.shape) != want.shape || ref::to_ivec(got.offset) != want.offset) {
              std::ostringstream os;
              os << describe_case(mesh, ps, shape, coord) << ": got shape "
                 << ref::to_string(ref::to_ivec(got.shape)) << " offset "
                 << ref::to_string(ref::to_ivec(got.offset)) << ", want " << want;
              f.add(os.str());
            }
          }
        }
      }
    }
  }
  INFO(layouts << " (mesh, placements, shape) triples");
  f.report();
  CHECK(layouts > 100000);
}

// ---------------------------------------------------------------------------
// Exact tiling: the ranks of one replica group hold every element exactly once
// ---------------------------------------------------------------------------
TEST_CASE("the blocks of each replica group partition the global tensor", "[value]") {
  failures f;
  std::size_t groups_checked = 0;
  for (const ivec& mesh : small_meshes()) {
    const int k = static_cast<int>(mesh.size());
    const auto coords = ref::all_coords(mesh);
    for (int rank = 0; rank <= 3; ++rank) {
      // Shapes with uneven and empty dims; fewer for the larger cases.
      std::vector<ivec> shapes = small_shapes(rank);
      if (rank == 3) shapes = {{0, 2, 3}, {7, 5, 3}, {5, 1, 7}, {2, 3, 2}, {3, 7, 0}};
      for (const auto& ps : placement_lists(k, rank)) {
        const spmd::spec_result r = spmd::make_spec(mesh_vec(mesh), ref::to_spmd(ps), rank);
        if (!r.ok()) continue;  // reported by the test above
        // The replica group of a rank: the ranks that differ only on the shard dims.
        unsigned shard_mask = 0;
        for (int m = 0; m < k; ++m)
          if (ps[m].kind == 'S') shard_mask |= 1u << m;
        for (const ivec& shape : shapes) {
          index_t volume = 1;
          for (index_t e : shape) volume *= e;
          for (const ivec& group : ref::groups(mesh, shard_mask)) {
            ++groups_checked;
            std::vector<int> held(static_cast<std::size_t>(volume), 0);
            for (index_t member : group) {
              const ivec& coord = coords[static_cast<std::size_t>(member)];
              const spmd::local_box b = spmd::box_at(r.spec, shape_vec(shape), coord_vec(coord));
              bool empty = false;
              for (int d = 0; d < rank; ++d) {
                ++f.checks;
                const index_t e = b.shape[d], o = b.offset[d];
                empty |= e == 0;
                if (e < 0 || o < 0 || o + e > shape[static_cast<std::size_t>(d)] ||
                    (e == 0 && o != shape[static_cast<std::size_t>(d)]))
                  f.add("block out of bounds: " + describe_case(mesh, ps, shape, coord));
              }
              if (empty) continue;
              // Visit every element of the block (row-major), mark it held.
              ivec i(static_cast<std::size_t>(rank), 0);
              for (;;) {
                index_t flat = 0;
                for (int d = 0; d < rank; ++d)
                  flat = flat * shape[static_cast<std::size_t>(d)] + b.offset[d] +
                         i[static_cast<std::size_t>(d)];
                ++held[static_cast<std::size_t>(flat)];
                int d = rank - 1;
                while (d >= 0 && ++i[static_cast<std::size_t>(d)] == b.shape[d])
                  i[static_cast<std::size_t>(d--)] = 0;
                if (d < 0) break;
              }
            }
            ++f.checks;
            for (index_t e = 0; e < volume; ++e)
              if (held[static_cast<std::size_t>(e)] != 1) {
                f.add("element " + std::to_string(e) + " held " +
                      std::to_string(held[static_cast<std::size_t>(e)]) +
                      " times: " + describe_case(mesh, ps, shape, {}));
                break;
              }
          }
        }
      }
    }
  }
  INFO(groups_checked << " replica groups");
  f.report();
}

// ---------------------------------------------------------------------------
// Errors: each bad input gets its code, and the placement it is about
// ---------------------------------------------------------------------------
namespace {
spmd::spec_result spec(const ivec& mesh, const std::vector<spmd::placement>& ps, int rank) {
  spmd::placement_vec v{};
  for (const auto& p : ps) v.push_back(p);
  return spmd::make_spec(mesh_vec(mesh), v, rank);
}
using spmd::layout_error;
using spmd::make_partial;
using spmd::make_replicate;
using spmd::make_shard;
using spmd::reduce_op;
}  // namespace

TEST_CASE("make_spec reports each bad input", "[value][errors]") {
  SECTION("valid inputs") {
    CHECK(spec({2, 4}, {make_shard(0), make_shard(-1)}, 2).ok());
    CHECK(spec({3}, {make_replicate()}, 0).ok());
    CHECK(
        spec({1, 1, 1, 1, 1, 1, 1, 1}, std::vector<spmd::placement>(8, make_replicate()), 8).ok());
    CHECK(spec({2, 2}, {make_partial(reduce_op::max), make_partial(reduce_op::max)}, 1).ok());
    CHECK(spec({2, 2, 2}, {make_shard(0, 2), make_shard(0, 0), make_shard(0, 1)}, 1).ok());
    const auto r = spec({2, 2}, {make_shard(0), make_shard(0)}, 1);
    CHECK(r.error == layout_error::none);
    CHECK(r.where == -1);
    CHECK(std::string(spmd::describe(r.error)) == "no error");
  }
  SECTION("placement count") {
    for (const auto& r : {spec({2, 4}, {make_shard(0)}, 1),
                          spec({2}, {make_shard(0), make_replicate()}, 1), spec({2, 2}, {}, 1)}) {
      CHECK(r.error == layout_error::placement_count_mismatch);
      CHECK_FALSE(r.ok());
    }
  }
  SECTION("shard dim outside the tensor's dims") {
    auto r = spec({2, 4}, {make_replicate(), make_shard(2)}, 2);
    CHECK(r.error == layout_error::shard_dim_out_of_range);
    CHECK(r.where == 1);
    r = spec({2, 4}, {make_shard(-3), make_replicate()}, 2);
    CHECK(r.error == layout_error::shard_dim_out_of_range);
    CHECK(r.where == 0);
    CHECK(spec({2}, {make_shard(0)}, 0).error == layout_error::shard_dim_out_of_range);  // a scalar
    CHECK(spec({2}, {make_shard(-2)}, 2).ok());
  }
  SECTION("mixed partial ops") {
    auto r =
        spec({2, 2, 2},
             {make_partial(reduce_op::sum), make_replicate(), make_partial(reduce_op::avg)}, 1);
    CHECK(r.error == layout_error::mixed_partial_ops);
    CHECK(r.where == 2);
    r = spec({2, 2}, {make_partial(reduce_op::max), make_partial(reduce_op::min)}, 1);
    CHECK(r.error == layout_error::mixed_partial_ops);
    CHECK(r.where == 1);
  }
  SECTION("inconsistent shard order") {
    // a position twice
    auto r = spec({2, 2}, {make_shard(0, 0), make_shard(0, 0)}, 1);
    CHECK(r.error == layout_error::inconsistent_shard_order);
    CHECK(r.where == 1);
    // positions on some shards only
    r = spec({2, 2}, {make_shard(0), make_shard(0, 0)}, 1);
    CHECK(r.error == layout_error::inconsistent_shard_order);
    r = spec({2, 2}, {make_shard(0, 1), make_shard(0)}, 1);
    CHECK(r.error == layout_error::inconsistent_shard_order);
    // a position past k-1
    r = spec({2, 2}, {make_shard(0, 0), make_shard(0, 2)}, 1);
    CHECK(r.error == layout_error::inconsistent_shard_order);
    CHECK(spec({2}, {make_shard(0, 1)}, 1).error == layout_error::inconsistent_shard_order);
    // one dim's positions do not count for another's
    CHECK(spec({2, 2}, {make_shard(0, 0), make_shard(1, 0)}, 2).ok());
    CHECK(spec({2, 2}, {make_shard(0, 1), make_shard(1, 0)}, 2).error ==
          layout_error::inconsistent_shard_order);
    // a negative dim and its positive spelling are one dim
    CHECK(spec({2, 2}, {make_shard(-1, 0), make_shard(1, 0)}, 2).error ==
          layout_error::inconsistent_shard_order);
    CHECK(spec({2, 2}, {make_shard(-1, 1), make_shard(1, 0)}, 2).ok());
  }
  SECTION("bad mesh shape") {
    auto r = spec({}, {}, 1);
    CHECK(r.error == layout_error::bad_mesh_shape);
    r = spec({2, 0}, {make_replicate(), make_replicate()}, 1);
    CHECK(r.error == layout_error::bad_mesh_shape);
    CHECK(r.where == 1);
    CHECK(spec({-2}, {make_replicate()}, 1).error == layout_error::bad_mesh_shape);
  }
  SECTION("tensor rank") {
    CHECK(spec({2}, {make_replicate()}, 9).error == layout_error::too_many_tensor_dims);
    CHECK(spec({2}, {make_replicate()}, -1).error == layout_error::too_many_tensor_dims);
  }
  SECTION("every error has its own sentence") {
    const layout_error all[] = {layout_error::none,
                                layout_error::placement_count_mismatch,
                                layout_error::shard_dim_out_of_range,
                                layout_error::mixed_partial_ops,
                                layout_error::inconsistent_shard_order,
                                layout_error::bad_mesh_shape,
                                layout_error::too_many_tensor_dims};
    std::vector<std::string> seen;
    for (layout_error e : all) {
      const std::string s = spmd::describe(e);
      CHECK_FALSE(s.empty());
      CHECK(s != "unknown error");
      CHECK(std::find(seen.begin(), seen.end(), s) == seen.end());
      seen.push_back(s);
    }
  }
}
