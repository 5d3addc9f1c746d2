// tests/cuda/block_bodies.cpp — the device factories and distribute_device_tensor on the host
// (backends/cuda/device_factories.hpp): the jobs and the slicing table the backend launches,
// built by the same functions (block_jobs.hpp) and run by the same per-thread bodies
// (block_body.hpp, step_body.hpp) over an emulated grid, must give every rank the bits of
// host::generate and host::distribute — the simulation's factories and distribute_tensor —
// for every element type, Partial op, mesh and layout, uneven and empty blocks included; the
// random draws' one-launch jobs must give host::random_locals' and host::dropout_block's.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "spmd/backends/cuda/block_body.hpp"
#include "spmd/backends/cuda/block_jobs.hpp"
#include "spmd/backends/cuda/grid_emulation.hpp"
#include "spmd/backends/cuda/job_batch.hpp"
#include "spmd/backends/cuda/random_run.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/host/random.hpp"
#include "run_table.hpp"

namespace {

namespace cu = spmd::cuda;
using spmd::index_t;
using spmd::placement;
using spmd::placement_vec;
using spmd::reduce_op;
using spmd::shape_vec;

using spmd_test::vec;

/// Global values with signed zeros, a NaN, values too large to scale and small integers.
template <class T>
std::vector<T> values(index_t n) {
  std::vector<T> g(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = static_cast<T>(((i * 37) % 101 - 50) * 0.37);
  if constexpr (!std::is_integral_v<T>) {
    if (n > 3) g[3] = T(-0.0f);
    if (n > 5) g[5] = T(0.0f);
    if (n > 9) g[9] = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
    if (n > 11) g[11] = std::numeric_limits<T>::max();
  } else {
    if (n > 4) g[4] = std::numeric_limits<T>::lowest();
    if (n > 6) g[6] = std::numeric_limits<T>::max();
  }
  return g;
}

/// A launch over job batch b, as kernels/ops.cuh's jobs_kernel runs it: each thread finds its
/// item's job and runs body(job, geometry, item within the job).
template <class P, class G, class F>
void run_jobs(const cu::job_batch<P, G>& b, F&& body) {
  cu::emulate_grid(3, 5, [&](index_t blk, index_t th, index_t nb, index_t nt) {
    for (index_t i = blk * nt + th; i < b.items(); i += nb * nt) {
      const int k = b.job_of(i);
      body(b.ptr[k], b.geom[b.geom_of[k]], i - b.begin[k]);
    }
  });
}

placement_vec pvec(std::initializer_list<placement> ps) {
  placement_vec v{};
  for (const placement& p : ps) v.push_back(p);
  return v;
}

bool op_allowed(reduce_op op, bool integral) {
  return !(integral && op == reduce_op::avg);
}

struct counts {
  long random = 0, random_runs = 0, cases = 0, partial_splits = 0, fanout = 0, widened = 0, spread = 0, unaligned = 0, launches = 0;
};

/// The held ranks' blocks of generate_on_device's jobs, run on the grid, against
/// host::generate with the factories' element functions.
template <class T>
long check_generate(const spmd::layout_spec& spec, const shape_vec& global, spmd::host::held_range held, bool index,
                    T value, counts& c, std::string& why) {
  const auto part = spmd::host::detail::partial_of(spec);
  const std::vector<cu::block_place> places = cu::block_places(spec, global);
  const T identity = spmd::host::identity<T>(part.op);
  const cu::fill_kind kind = index ? cu::fill_kind::index : cu::fill_kind::constant;
  const spmd::host::local_set<T> want =
      index ? spmd::host::generate<T>(spec, global, spmd::runtime::detail::index_value<T>{}, held)
            : spmd::host::generate<T>(spec, global, spmd::runtime::detail::constant_value<T>{value}, held);
  long bad = 0;
  for (const int shift : {0, 1}) {  // blocks 16-byte aligned (whole items stored at once), and not
    std::vector<spmd_test::aligned_vec<T>> got(places.size());
    for (const index_t r : held.indices())
      got[static_cast<std::size_t>(r)] = spmd_test::aligned_vec<T>(static_cast<std::size_t>(places[static_cast<std::size_t>(r)].elems) + 2);
    auto out = [&](index_t r) { return got[static_cast<std::size_t>(r)].data() + shift; };
    auto jobs = cu::make_job_launcher<cu::block_job<T>, cu::block_geom>([&](const auto& b) {
      ++c.launches;
      run_jobs(b, [&](const cu::block_job<T>& j, const cu::block_geom& g, index_t e) {
        cu::generate_item<T>(j, g, e, kind, value, identity);
      });
    });
    cu::add_blocks(jobs, places, held.indices(), [&](index_t r, const cu::block_place& p) {  // as generate_on_device
      return cu::block_job<T>{out(r), p.elems, p.base, p.part, p.identity};
    });
    jobs.finish();
    for (const index_t r : held.indices()) {
      const index_t k = want.size(r);
      if (k != places[static_cast<std::size_t>(r)].elems || !(want.shape(r) == places[static_cast<std::size_t>(r)].shape) ||
          (k > 0 && std::memcmp(out(r), want.data(r), static_cast<std::size_t>(k) * sizeof(T)) != 0) ||
          !spmd_test::untouched(out(r) + k)) {
        ++bad;
        why = std::string(index ? "arange" : "full") + " differs at mesh index " + std::to_string(r) +
              (shift ? " (unaligned)" : "");
      }
    }
  }
  ++c.cases;
  return bad;
}

/// The slicing table and the Partial split of distribute_on_device, run on the grid (element
/// by element, then finished as the backend runs it, then from an input that is not 16-byte
/// aligned, then spread as a large tensor's), against host::distribute.
template <class T>
long check_distribute(const spmd::layout_spec& spec, const shape_vec& global, spmd::host::held_range held,
                      const std::vector<T>& data, counts& c, std::string& why) {
  const auto part = spmd::host::detail::partial_of(spec);
  const index_t group = spmd::group_size(spec.mesh, part.mask);
  const std::vector<cu::block_place> places = cu::block_places(spec, global);
  const spmd::host::local_set<T> want = spmd::host::distribute<T>(data, spec, global, held);
  const index_t n = spec.mesh_size();
  spmd_test::aligned_vec<T> in_aligned(data.size() + 1);
  std::memcpy(static_cast<void*>(in_aligned.data()), data.data(), data.size() * sizeof(T));
  spmd_test::aligned_vec<T> in_shifted(data.size() + 1);  // one element past a 16-byte boundary
  std::memcpy(static_cast<void*>(in_shifted.data() + 1), data.data(), data.size() * sizeof(T));
  long bad = 0;
  for (int variant = 0; variant < 4; ++variant) {
    const T* src = variant == 2 ? in_shifted.data() + 1 : in_aligned.data();
    cu::step_table t = cu::distribute_table(spec, global, held);
    if (!t.fanout.empty()) ++c.fanout;
    bool wide = false;
    if (variant == 1) {  // as distribute_on_device finishes an aligned input's table
      wide = cu::finish(t, sizeof(T));
      if (wide) ++c.widened;
    } else if (variant == 3) {  // as it finishes a tensor of a million 16-byte items or more
      wide = cu::finish(t, sizeof(T));
      if (!wide || t.tile_blocks > 0 || !cu::spreadable(t)) continue;
      t.per_thread = cu::spread_k;
      ++c.spread;
    } else if (variant == 2) {
      cu::mark_uniform(t);
      ++c.unaligned;
    }
    std::vector<spmd_test::aligned_vec<T>> got(places.size());
    std::vector<const T*> ins(static_cast<std::size_t>(n), src);
    std::vector<T*> outs(static_cast<std::size_t>(n), nullptr);
    for (const index_t r : held.indices()) {
      got[static_cast<std::size_t>(r)] = spmd_test::aligned_vec<T>(static_cast<std::size_t>(places[static_cast<std::size_t>(r)].elems));
      outs[static_cast<std::size_t>(r)] = got[static_cast<std::size_t>(r)].data();
    }
    spmd_test::run_on_grid<T>(t, wide, ins.data(), outs.data(), n);
    if (part.mask != 0 && group > 1) {
      ++c.partial_splits;
      auto jobs = cu::make_job_launcher<cu::block_job<T>, cu::no_geom>([&](const auto& b) {
        run_jobs(b, [&](const cu::block_job<T>& j, const cu::no_geom&, index_t e) {
          cu::split_item<T>(j, e, part.op, group);
        });
      });
      cu::add_blocks(jobs, places, held.indices(), [&](index_t r, const cu::block_place& p) {
        return cu::block_job<T>{outs[static_cast<std::size_t>(r)], p.elems, p.base, p.part, false};
      });
      jobs.finish();
    }
    for (const index_t r : held.indices()) {
      const index_t k = want.size(r);
      if (k != places[static_cast<std::size_t>(r)].elems ||
          (k > 0 && std::memcmp(outs[static_cast<std::size_t>(r)], want.data(r), static_cast<std::size_t>(k) * sizeof(T)) != 0)) {
        ++bad;
        why = "distribute (variant " + std::to_string(variant) + ") differs at mesh index " + std::to_string(r);
      }
    }
  }
  ++c.cases;
  return bad;
}

/// A random draw's and a dropout's jobs, run on the grid, against the simulation's host
/// functions (host::random_locals, host::dropout_block).
template <class T>
long check_random(const spmd::layout_spec& spec, const shape_vec& global, spmd::host::held_range held, counts& c,
                  std::string& why) {
  namespace rnd = spmd::random;
  const auto part = spmd::host::detail::partial_of(spec);
  const T identity = spmd::host::identity<T>(part.op);
  const std::vector<cu::block_place> places = cu::block_places(spec, global);
  long bad = 0;
  const rnd::draw draws[] = {{rnd::distribution::uniform, 7, 12, -2.0, 3.0, 0},
                             {rnd::distribution::uniform, 11, 20, 0.0, 1.0, 0},  // [0, 1): the unit body
                             {rnd::distribution::normal, 9, 4, 0.5, 2.0, 0},
                             {rnd::distribution::bernoulli, 3, 8, 0.3, 0, 1288490188u}};
  // Blocks 16-byte aligned in every other case, one element past in the rest.
  const int shift = static_cast<int>(c.random % 2);
  auto out = [&](std::vector<spmd_test::aligned_vec<T>>& got, index_t r) { return got[static_cast<std::size_t>(r)].data() + shift; };
  // The body kernels/random.cuh launches for the batch (random_run_item made for the draw's
  // distribution where every block is a run), or random_item's whatever the blocks (general).
  auto run_body = [&](const cu::job_batch<cu::block_job<T>, cu::block_geom>& b, const rnd::draw& d, bool general) {
    if (const cu::random_body body = general ? cu::random_body::any : cu::random_body_for(b, d); body != cu::random_body::any) {
      ++c.random_runs;
      return cu::with_run_body(body, [&]<cu::random_body B>() {
        run_jobs(b, [&](const cu::block_job<T>& j, const cu::block_geom&, index_t e) { cu::random_run_item<T, B>(j, e, d, identity); });
      });
    }
    run_jobs(b, [&](const cu::block_job<T>& j, const cu::block_geom& g, index_t e) { cu::random_item<T>(j, g, e, d, identity); });
  };
  for (const rnd::draw& d : draws)
    for (const bool general : {true, false}) {
      std::vector<spmd_test::aligned_vec<T>> got(places.size());
      for (const index_t r : held.indices())
        got[static_cast<std::size_t>(r)] = spmd_test::aligned_vec<T>(static_cast<std::size_t>(places[static_cast<std::size_t>(r)].elems) + 2);
      auto jobs = cu::make_job_launcher<cu::block_job<T>, cu::block_geom>([&](const auto& b) { run_body(b, d, general); });
      cu::add_blocks<cu::random_item_elems>(jobs, places, held.indices(), [&](index_t r, const cu::block_place& p) {  // as fill_random
        return cu::block_job<T>{out(got, r), p.elems, p.base, p.part, p.identity};
      });
      jobs.finish();
      const spmd::host::local_set<T> want = spmd::host::random_locals<T>(spec, global, d, held);
      for (const index_t r : held.indices()) {
        const index_t k = want.size(r);
        if ((k > 0 && std::memcmp(out(got, r), want.data(r), static_cast<std::size_t>(k) * sizeof(T)) != 0) ||
            !spmd_test::untouched(out(got, r) + k)) {
          ++bad;
          why = "random draw " + std::to_string(static_cast<int>(d.dist)) + (general ? " (random_item)" : " (the launched body)") +
                " differs at mesh index " + std::to_string(r);
        }
      }
    }
  // Dropout of each rank's block of the global values.
  const rnd::draw d{rnd::distribution::dropout, 5, 16, 0.25, 0, 1073741824u};
  const spmd::host::local_set<T> x = spmd::host::distribute<T>(values<T>(spmd::host::shape_elems(global)), spec, global, held);
  std::vector<spmd_test::aligned_vec<T>> got(places.size());
  for (const index_t r : held.indices())
    got[static_cast<std::size_t>(r)] = spmd_test::aligned_vec<T>(static_cast<std::size_t>(places[static_cast<std::size_t>(r)].elems) + 2);
  auto jobs = cu::make_job_launcher<cu::block_io_job<T>, cu::block_geom>([&](const auto& b) {
    run_jobs(b, [&](const cu::block_io_job<T>& j, const cu::block_geom& g, index_t e) { cu::dropout_item<T>(j, g, e, d); });
  });
  cu::add_blocks<cu::random_item_elems>(jobs, places, held.indices(), [&](index_t r, const cu::block_place& p) {  // as the backend's dropout
    return cu::block_io_job<T>{out(got, r), x.data(r), p.elems, p.base};
  });
  jobs.finish();
  for (const index_t r : held.indices()) {
    const index_t k = x.size(r);
    std::vector<T> want(static_cast<std::size_t>(k));
    spmd::host::dropout_block<T>(d, spmd::box_at(spec, global, spmd::unravel(spec.mesh, r)), global, x.data(r), want.data());
    if ((k > 0 && std::memcmp(out(got, r), want.data(), static_cast<std::size_t>(k) * sizeof(T)) != 0) ||
        !spmd_test::untouched(out(got, r) + k)) {
      ++bad;
      why = "dropout differs at mesh index " + std::to_string(r);
    }
  }
  ++c.random;
  return bad;
}

template <class T>
void sweep(const spmd::mesh_shape_vec& mesh, const std::vector<shape_vec>& shapes, counts& c) {
  constexpr bool integral = std::is_integral_v<T>;
  for (reduce_op op : {reduce_op::sum, reduce_op::avg, reduce_op::max, reduce_op::min, reduce_op::product}) {
    if (!op_allowed(op, integral)) continue;
    for (const placement_vec& pv : spmd_test::layouts(mesh.size(), op, 3))
      for (const shape_vec& global : shapes) {
        const auto s = spmd::make_spec(mesh, pv, global.size());
        if (!s.ok()) continue;
        const bool partial = spmd::host::detail::partial_of(s.spec).mask != 0;
        if (!partial && op != reduce_op::sum) continue;  // the same layouts again
        const std::vector<T> data = values<T>(spmd::host::shape_elems(global));
        const spmd::host::held_range all{0, s.spec.mesh_size()};
        std::string why;
        long bad = check_generate<T>(s.spec, global, all, false, T(3), c, why);
        bad += check_generate<T>(s.spec, global, all, true, T(0), c, why);
        bad += check_distribute<T>(s.spec, global, all, data, c, why);
        if constexpr (!integral)
          bad += check_random<T>(s.spec, global, all, c, why);
        // One process's ranks (the NCCL backend holds one): the others' blocks are not made.
        const spmd::host::held_range one{s.spec.mesh_size() - 1, s.spec.mesh_size()};
        bad += check_generate<T>(s.spec, global, one, true, T(0), c, why);
        bad += check_distribute<T>(s.spec, global, one, data, c, why);
        INFO(why);
        CHECK(bad == 0);
      }
  }
}

}  // namespace

TEST_CASE("device factories and distribute_device_tensor give host::generate's and host::distribute's bits",
          "[cuda][emulation][sweep]") {
  counts c;
  const std::vector<shape_vec> shapes = {vec({8, 12}), vec({5, 7}), vec({1, 3}), vec({3, 0}), vec({2, 3, 8}),
                                         vec({16, 8})};
  for (const auto& m : {vec<spmd::mesh_shape_vec>({4}), vec<spmd::mesh_shape_vec>({2, 3})}) {
    sweep<float>(m, shapes, c);
    sweep<std::int32_t>(m, shapes, c);
  }
  sweep<float>(vec<spmd::mesh_shape_vec>({2, 2, 2}), {vec({5, 7}), vec({4, 8, 2})}, c);
  sweep<double>(vec<spmd::mesh_shape_vec>({3}), shapes, c);
  sweep<spmd::bfloat16>(vec<spmd::mesh_shape_vec>({2, 2}), shapes, c);
  sweep<spmd::float16>(vec<spmd::mesh_shape_vec>({2, 2}), shapes, c);
  sweep<std::int64_t>(vec<spmd::mesh_shape_vec>({2, 2}), shapes, c);
  INFO(c.cases << " cases, " << c.random << " random (" << c.random_runs << " by random_run_item), " << c.partial_splits << " split, " << c.fanout << " fan-out tables, " << c.widened
               << " widened, " << c.spread << " spread, " << c.unaligned << " unaligned");
  CHECK(c.cases > 5000);
  CHECK(c.random > 500);
  CHECK(c.random_runs > 1000);  // random_run_item, the body of blocks that are runs
  CHECK(c.partial_splits > 500);
  CHECK(c.fanout > 200);
  CHECK(c.widened > 200);
  CHECK(c.spread > 20);
}

TEST_CASE("random draws over blocks of several groups of items: random_run_item's side-by-side pieces",
          "[cuda][emulation]") {
  // Blocks of 256 elements or more hold whole groups (random_run_group items side by side)
  // before a short last one; uneven rows start blocks inside a Philox block (random_item).
  counts c;
  std::string why;
  long bad = 0;
  const placement s0 = spmd::make_shard(0), r = spmd::make_replicate(), p = spmd::make_partial(reduce_op::sum);
  const std::vector<std::pair<spmd::mesh_shape_vec, placement_vec>> layouts = {
      {vec<spmd::mesh_shape_vec>({4}), pvec({s0})},     {vec<spmd::mesh_shape_vec>({4}), pvec({r})},
      {vec<spmd::mesh_shape_vec>({2, 2}), pvec({p, s0})}, {vec<spmd::mesh_shape_vec>({2, 2}), pvec({s0, s0})},
      {vec<spmd::mesh_shape_vec>({2, 2}), pvec({spmd::make_shard(1), s0})}};
  for (const auto& [mesh, pv] : layouts)
    for (const shape_vec& global : {vec({64, 40}), vec({2052}), vec({33, 68}), vec({9, 101})}) {
      const auto s = spmd::make_spec(mesh, pv, global.size());
      if (!s.ok()) continue;
      const spmd::host::held_range all{0, s.spec.mesh_size()};
      for (int twice = 0; twice < 2; ++twice) {  // c.random's parity shifts each type's blocks in turn
        bad += check_random<float>(s.spec, global, all, c, why);
        bad += check_random<spmd::bfloat16>(s.spec, global, all, c, why);
        bad += check_random<double>(s.spec, global, all, c, why);
      }
    }
  INFO(why);
  CHECK(bad == 0);
  CHECK(c.random_runs > 100);
}

TEST_CASE("the device factories' jobs: one launch for 8 ranks, uneven blocks sharing geometries", "[cuda][emulation]") {
  // mesh 2x4, Shard(0) over 4 and Shard(1) over 2 of a 10 x 7 tensor: four block shapes.
  const auto s = spmd::make_spec(vec<spmd::mesh_shape_vec>({2, 4}), pvec({spmd::make_shard(1), spmd::make_shard(0)}), 2);
  REQUIRE(s.ok());
  counts c;
  std::string why;
  CHECK(check_generate<float>(s.spec, vec({10, 7}), {0, 8}, true, 0.0f, c, why) == 0);
  CHECK(c.launches == 2);  // one for each of check_generate's two runs (aligned blocks, and not)
}

TEST_CASE("a wrong Partial position, identity or table is caught", "[cuda][emulation]") {
  // Mutations of what the backend launches, each of which the sweep's comparison must see.
  const auto s = spmd::make_spec(vec<spmd::mesh_shape_vec>({2, 2}),
                                 pvec({spmd::make_partial(reduce_op::sum), spmd::make_shard(0)}), 2);
  REQUIRE(s.ok());
  const shape_vec global = vec({6, 4});
  std::vector<float> data = values<float>(25);  // one element more: the shifted table reads it
  const std::vector<cu::block_place> places = cu::block_places(s.spec, global);
  const std::vector<float> exact(data.begin(), data.begin() + 24);
  const spmd::host::local_set<float> want = spmd::host::distribute<float>(exact, s.spec, global);
  std::vector<const float*> ins(4, data.data());
  std::vector<std::vector<float>> got(4);
  std::vector<float*> outs(4);
  auto run = [&](const cu::step_table& t) {
    for (std::size_t r = 0; r < 4; ++r) {
      got[r].assign(static_cast<std::size_t>(places[r].elems), -1.0f);
      outs[r] = got[r].data();
    }
    spmd_test::run_on_grid<float>(t, false, ins.data(), outs.data(), 4);
  };
  auto same = [&](std::size_t r) { return std::memcmp(outs[r], want.data(static_cast<index_t>(r)), 12 * sizeof(float)) == 0; };
  // The split with every rank at position 0: mesh index 2 (position 1 of its group) differs.
  run(cu::distribute_table(s.spec, global, {0, 4}));
  for (std::size_t r = 0; r < 4; ++r)
    for (index_t e = 0; e < places[r].elems; ++e)
      outs[r][e] = spmd::host::detail::partial_part(reduce_op::sum, outs[r][e], 0, 2, e);
  CHECK(same(0));
  CHECK_FALSE(same(2));
  // The right positions: every rank right.
  run(cu::distribute_table(s.spec, global, {0, 4}));
  for (std::size_t r = 0; r < 4; ++r)
    for (index_t e = 0; e < places[r].elems; ++e)
      outs[r][e] = spmd::host::detail::partial_part(reduce_op::sum, outs[r][e], places[r].part, 2, e);
  for (std::size_t r = 0; r < 4; ++r) CHECK(same(r));
  // A table reading one element off: caught.
  cu::step_table shifted = cu::distribute_table(s.spec, global, {0, 4});
  for (auto& o : shifted.ops) ++o.geo.soff;
  run(shifted);
  for (std::size_t r = 0; r < 4; ++r)
    for (index_t e = 0; e < places[r].elems; ++e)
      outs[r][e] = spmd::host::detail::partial_part(reduce_op::sum, outs[r][e], places[r].part, 2, e);
  CHECK_FALSE(same(0));
  // Factories: a sum group's second member holds the identity; without the flag it differs.
  const auto sum = spmd::make_spec(vec<spmd::mesh_shape_vec>({2}), pvec({spmd::make_partial(reduce_op::sum)}), 1);
  REQUIRE(sum.ok());
  const std::vector<cu::block_place> p1 = cu::block_places(sum.spec, vec({3}));
  REQUIRE(p1[1].identity);
  const spmd::host::local_set<float> gen =
      spmd::host::generate<float>(sum.spec, vec({3}), spmd::runtime::detail::constant_value<float>{5.0f});
  const float id = spmd::host::identity<float>(reduce_op::sum);  // -0: the sum's identity, bit for bit
  float x[3];
  REQUIRE(cu::block_items(3) == 1);
  cu::generate_item<float>({x, 3, p1[1].base, p1[1].part, false}, p1[1].geom, 0, cu::fill_kind::constant, 5.0f, id);
  CHECK(std::memcmp(x, gen.data(1), sizeof x) != 0);
  cu::generate_item<float>({x, 3, p1[1].base, p1[1].part, true}, p1[1].geom, 0, cu::fill_kind::constant, 5.0f, id);
  CHECK(std::memcmp(x, gen.data(1), sizeof x) == 0);
}
