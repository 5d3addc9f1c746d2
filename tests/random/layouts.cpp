// tests/random/layouts.cpp — the global tensor of a random operator is the same for every
// layout: on 1-d to 3-d meshes, even, uneven, nested and zero-size shapes, with Replicate,
// Shard and Partial placements, every rank's local is exactly its box of the unsharded draw,
// which is element-by-element the stream the header comment of random/draw.hpp describes
// (computed here independently for the uniform and bernoulli cases).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/host/distribute.hpp"
#include "spmd/host/random.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/random/draw.hpp"

#include "../common/failures.hpp"

namespace {

using spmd::index_t;
using spmd::random::distribution;
using spmd::random::draw;

/// Word j of the stream of (seed, offset), straight from the definition.
std::uint32_t word(std::uint64_t seed, std::uint64_t offset, std::uint64_t j) {
  const std::uint64_t w = offset + j;
  return spmd::random::philox_stream_block(seed, w / 4)[static_cast<int>(w % 4)];
}

/// The unsharded tensor: uniform f32 and bernoulli from the definition, the rest through the
/// per-element function draw_at (the bulk path under test is fill_run's).
template <class T>
std::vector<T> reference(const draw& d, index_t n) {
  std::vector<T> out(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    const auto j = static_cast<std::uint64_t>(i);
    if constexpr (std::is_same_v<T, float>) {
      if (d.dist == distribution::uniform) {
        const float x = static_cast<float>(word(d.seed, d.offset, j) & 0xFFFFFFu) * 0x1p-24f;
        out[i] = x * (static_cast<float>(d.b) - static_cast<float>(d.a)) + static_cast<float>(d.a);
        continue;
      }
    }
    if (d.dist == distribution::bernoulli) {
      out[i] = T(word(d.seed, d.offset, j) < d.threshold ? 1.0f : 0.0f);
      continue;
    }
    out[i] = spmd::random::draw_at<T>(d, j);
  }
  return out;
}

/// The elements of `box`, row-major: every global index tested for membership.
template <class T>
std::vector<T> box_of(const std::vector<T>& global_data, const spmd::shape_vec& global,
                      const spmd::local_box& box) {
  std::vector<T> out;
  for (index_t i = 0; i < static_cast<index_t>(global_data.size()); ++i) {
    index_t rest = i;
    bool inside = true;
    for (int d = global.size() - 1; d >= 0; --d) {
      const index_t c = rest % global[d];
      rest /= global[d];
      if (c < box.offset[d] || c >= box.offset[d] + box.shape[d]) inside = false;
    }
    if (inside) out.push_back(global_data[static_cast<std::size_t>(i)]);
  }
  return out;
}

template <class T>
bool same_bytes(const T* a, const T* b, index_t n) {
  return n == 0 || std::memcmp(a, b, static_cast<std::size_t>(n) * sizeof(T)) == 0;
}

/// Placement lists to sweep on a mesh of `mesh_dims` dims for a tensor of `rank` dims.
std::vector<std::string> placement_lists(int mesh_dims, int rank) {
  std::vector<std::string> one{"R", "P(sum)", "P(max)", "P(avg)"};
  for (int d = 0; d < rank; ++d) one.push_back("S(" + std::to_string(d) + ")");
  std::vector<std::string> out{""};
  for (int m = 0; m < mesh_dims; ++m) {
    std::vector<std::string> next;
    for (const std::string& prefix : out)
      for (const std::string& p : one) next.push_back(prefix + (m ? "," : "") + p);
    out = std::move(next);
  }
  // Nested shards of one dim in the other order (S(d)[k]: position k of dim d's order).
  if (mesh_dims >= 2 && rank >= 1) {
    out.push_back("S(0)[1],S(0)[0]" + std::string(mesh_dims == 3 ? ",R" : ""));
    if (mesh_dims == 3) out.push_back("S(0)[2],S(0)[0],S(0)[1]");
  }
  return out;
}

struct mesh_case {
  const char* mesh;
  std::vector<const char*> shapes;
};

template <class T>
void sweep(distribution dist, spmd_test::failures& f, int& layouts) {
  const std::vector<mesh_case> cases{
      {"2", {"7", "0", "3,5"}},
      {"3", {"10", "2,7"}},
      {"8", {"5,3", "17"}},
      {"2x2", {"5,3", "4,0", "3,3,2"}},
      {"2x3", {"7,5", "1,9"}},
      {"1x4", {"6,5"}},
      {"4x2", {"9,3"}},
      {"2x2x2", {"5,6", "3,2,5"}},
  };
  std::uint64_t seed = 1234;
  for (const mesh_case& mc : cases) {
    const spmd::mesh_shape_vec mesh = spmd::parse_mesh(mc.mesh);
    for (const char* shape_text : mc.shapes) {
      const spmd::shape_vec global = spmd::parse_shape(shape_text);
      index_t n = 1;
      for (index_t e : global) n *= e;
      for (const std::string& pl : placement_lists(mesh.size(), global.size())) {
        spmd::layout_spec spec;
        try {
          spec = spmd::checked_spec(mesh, spmd::parse_placements(pl), global.size());
        } catch (const std::invalid_argument&) {
          continue;  // two different partial ops: not a layout
        }
        const draw d{dist, ++seed, 4 * (seed % 5), dist == distribution::normal ? 0.5 : -2.0,
                     dist == distribution::normal ? 3.0 : 3.0, dist == distribution::bernoulli ? 0x60000000u : 0u};
        const std::vector<T> ref = reference<T>(d, n);
        const spmd::host::local_set<T> locals =
            spmd::host::random_locals<T>(spec, global, d, {0, spec.mesh_size()});
        ++layouts;
        const std::string where = std::string(spmd::host::element_name<T>()) + " mesh " + mc.mesh +
                                  " shape [" + shape_text + "] " + pl;
        // Every rank holds its box of the reference (or the identity of its partial group).
        for (index_t r = 0; r < spec.mesh_size(); ++r) {
          ++f.checks;
          if (spmd::host::holds_identity(spec, r)) {
            const T id = spmd::host::identity<T>(spmd::host::detail::partial_of(spec).op);
            for (index_t k = 0; k < locals.size(r); ++k)
              if (!same_bytes(&locals.data(r)[k], &id, 1)) {
                f.add(where + ": rank " + std::to_string(r) + " should hold the identity");
                break;
              }
            continue;
          }
          const std::vector<T> want =
              box_of(ref, global, spmd::box_at(spec, global, spmd::unravel(mesh, r)));
          if (static_cast<index_t>(want.size()) != locals.size(r) ||
              !same_bytes(locals.data(r), want.data(), locals.size(r)))
            f.add(where + ": rank " + std::to_string(r) + "'s local is not its box of the unsharded tensor");
        }
        // Assembled, the global tensor is the unsharded one (P(avg) of equal values is exact
        // only for power-of-two groups: its locals were checked above).
        if (!spmd::holds_partial(spec.placements, spmd::reduce_op::avg)) {
          ++f.checks;
          const std::vector<T> full = spmd::host::full_tensor(locals, spec, global);
          if (!same_bytes(full.data(), ref.data(), n)) f.add(where + ": the assembled tensor differs");
        }
        // Shards distinct: two ranks with different boxes of >= 2 elements differ.
        if (dist != distribution::bernoulli) {
          for (index_t a = 0; a < spec.mesh_size(); ++a)
            for (index_t b = a + 1; b < spec.mesh_size(); ++b) {
              const spmd::local_box ba = spmd::box_at(spec, global, spmd::unravel(mesh, a));
              const spmd::local_box bb = spmd::box_at(spec, global, spmd::unravel(mesh, b));
              if (ba == bb || locals.size(a) < 2 || locals.size(a) != locals.size(b)) continue;
              if (spmd::host::holds_identity(spec, a) || spmd::host::holds_identity(spec, b)) continue;
              ++f.checks;
              if (same_bytes(locals.data(a), locals.data(b), locals.size(a)))
                f.add(where + ": ranks " + std::to_string(a) + " and " + std::to_string(b) +
                      " hold different blocks with equal values");
            }
        }
      }
    }
  }
}

TEST_CASE("every layout's locals are their boxes of the one global draw", "[random][layouts]") {
  spmd_test::failures f;
  int layouts = 0;
  for (distribution dist : {distribution::uniform, distribution::normal, distribution::bernoulli}) {
    sweep<float>(dist, f, layouts);
    sweep<double>(dist, f, layouts);
    sweep<spmd::bfloat16>(dist, f, layouts);
    sweep<spmd::float16>(dist, f, layouts);
  }
  INFO(layouts << " layouts");
  CHECK(layouts > 1000);
  f.report_checked();
}

TEST_CASE("long runs (batched Philox blocks) give the per-element values", "[random][layouts]") {
  spmd_test::failures f;
  for (distribution dist : {distribution::uniform, distribution::normal, distribution::bernoulli})
    for (const std::uint64_t g : {0, 1, 2, 3, 5, 1000003})
      for (const index_t n : {67, 68, 69, 130, 131, 1001}) {
        const draw d{dist, 0x123456789abcdefull, 1u << 20, -1.0, 2.0, 0x40000000u};
        std::vector<float> a(static_cast<std::size_t>(n));
        std::vector<double> b(static_cast<std::size_t>(n));
        std::vector<spmd::bfloat16> c(static_cast<std::size_t>(n));
        spmd::host::fill_run<float>(d, g, n, a.data());
        spmd::host::fill_run<double>(d, g, n, b.data());
        spmd::host::fill_run<spmd::bfloat16>(d, g, n, c.data());
        for (index_t k = 0; k < n; ++k) {
          ++f.checks;
          const auto i = g + static_cast<std::uint64_t>(k);
          const float x = spmd::random::draw_at<float>(d, i);
          const double y = spmd::random::draw_at<double>(d, i);
          const spmd::bfloat16 z = spmd::random::draw_at<spmd::bfloat16>(d, i);
          if (!same_bytes(&a[k], &x, 1) || !same_bytes(&b[k], &y, 1) || !same_bytes(&c[k], &z, 1)) {
            f.add("run at " + std::to_string(g) + " length " + std::to_string(n) + " element " +
                  std::to_string(k));
            break;
          }
        }
      }
  f.report_checked();
}

TEST_CASE("a run that starts or ends inside a Philox block gives the per-element values",
          "[random][layouts]") {
  // fill_run computes whole blocks at once; every start and length around block edges.
  spmd_test::failures f;
  for (distribution dist : {distribution::uniform, distribution::normal, distribution::bernoulli}) {
    const draw d{dist, 99, 40, 0.0, 1.0, 0x80000000u};
    for (std::uint64_t g = 0; g < 9; ++g)
      for (index_t n = 0; n < 11; ++n) {
        float out[16];
        double outd[16];
        spmd::host::fill_run<float>(d, g, n, out);
        spmd::host::fill_run<double>(d, g, n, outd);
        for (index_t k = 0; k < n; ++k) {
          ++f.checks;
          const float a = spmd::random::draw_at<float>(d, g + static_cast<std::uint64_t>(k));
          const double b = spmd::random::draw_at<double>(d, g + static_cast<std::uint64_t>(k));
          if (!same_bytes(&out[k], &a, 1) || !same_bytes(&outd[k], &b, 1))
            f.add("run at " + std::to_string(g) + " length " + std::to_string(n) + " element " +
                  std::to_string(k));
        }
      }
  }
  f.report_checked();
}

}  // namespace
