// tests/cuda/step_table.cpp — the device side of a plan step, on the host: every step of every
// plan between pairs of layouts, lowered to a step table (spmd/backends/cuda/step_table.hpp)
// and run by the per-thread body for every block and thread of an emulated grid
// (grid_emulation.hpp: last to first, fewer threads than items so each thread strides), must
// give every rank the simulation's bits. Runs on any machine; no GPU involved.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "spmd/backends/cuda/grid_emulation.hpp"
#include "spmd/backends/cuda/step_body.hpp"
#include "spmd/backends/cuda/step_table.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/plan.hpp"
#include "run_table.hpp"
#include "spmd/backends/cuda/job_batch.hpp"

namespace {

using spmd::index_t;
using spmd::placement;
using spmd::placement_vec;
using spmd::reduce_op;
using spmd::shape_vec;

using spmd_test::vec;

template <class T>
std::vector<T> values(index_t n) {
  std::vector<T> g(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) g[static_cast<std::size_t>(i)] = static_cast<T>(((i * 37) % 101 - 50) * 0.37);
  if constexpr (!std::is_integral_v<T>) {
    if (n > 3) g[3] = T(-0.0f);
    if (n > 9) g[9] = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
  }
  return g;
}

long& fanout_steps() {
  static long n = 0;
  return n;
}

long& widened_steps() {
  static long n = 0;
  return n;
}
long& widened_reductions() {  // widened steps that reduce (16-byte lanes combined in group order)
  static long n = 0;
  return n;
}
long& spread_steps() {  // copy steps also run spread over spread_k items a thread
  static long n = 0;
  return n;
}
long& tiled_steps() {  // transposing copy steps run by tiles
  static long n = 0;
  return n;
}
long& tiled_uneven_steps() {  // ... with pieces of unequal runs in a group (a search by column)
  static long n = 0;
  return n;
}
long& tiled_searched_steps() {  // ... with groups of unequal tile counts (a search for the group)
  static long n = 0;
  return n;
}
long& uniform_steps() {  // ops found without a search
  static long n = 0;
  return n;
}
long& inline_steps() {  // finished tables the backend passes inline, also run from their arrays
  static long n = 0;
  return n;
}

/// One step on `in` by the emulated grid; false (with a message) where a rank differs.
template <class T>
long check_step(const spmd::plan_step& step, const shape_vec& global,
                const spmd::host::local_set<T>& in, std::string& why) {
  const spmd::step_schedule s = spmd::build_schedule(step, global);
  const spmd::cuda::step_table table = spmd::cuda::build_step_table(step, s, global);
  const index_t n = in.ranks();
  std::vector<spmd_test::aligned_vec<T>> fresh(static_cast<std::size_t>(n));
  std::vector<const T*> ins(static_cast<std::size_t>(n));
  std::vector<T*> outs(static_cast<std::size_t>(n));
  for (index_t r = 0; r < n; ++r) {
    ins[static_cast<std::size_t>(r)] = in.data(r);
    if (s.ranks[static_cast<std::size_t>(r)].how == spmd::disposition::keep) {
      outs[static_cast<std::size_t>(r)] = const_cast<T*>(in.data(r));
    } else {
      fresh[static_cast<std::size_t>(r)] = spmd_test::aligned_vec<T>(static_cast<std::size_t>(s.ranks[static_cast<std::size_t>(r)].elems), T(7));
      outs[static_cast<std::size_t>(r)] = fresh[static_cast<std::size_t>(r)].data();
    }
  }
  if (!table.fanout.empty()) ++fanout_steps();
  const spmd::host::local_set<T> want = spmd::sim::execute(step, global, in);
  long bad = 0;
  auto compare = [&](const char* which) {
    for (index_t r = 0; r < n; ++r) {
      const index_t k = want.size(r);
      if (k != s.ranks[static_cast<std::size_t>(r)].elems ||
          (k > 0 && std::memcmp(outs[static_cast<std::size_t>(r)], want.data(r), static_cast<std::size_t>(k) * sizeof(T)) != 0)) {
        ++bad;
        why = std::string(which) + ": " + spmd::step_kind_name(step.kind) + " differs at mesh index " + std::to_string(r);
      }
    }
  };
  // As built, element by element; then finished (16-byte units where it can, tiles, copies
  // spread over items a thread, ops found directly) as the backend runs it, into freshly
  // poisoned outputs; tiles forced, since the backend tiles only steps of tile_big items and
  // these are small.
  spmd_test::run_on_grid<T>(table, false, ins.data(), outs.data(), n);
  compare("the element-wise table");
  spmd::cuda::step_table done = table;
  const bool wide = spmd::cuda::finish(done, sizeof(T), spmd::cuda::tiling::always);
  if (wide) {
    ++widened_steps();
    if (spmd_test::has_code(done, spmd::op_code::reduce) || spmd_test::has_code(done, spmd::op_code::reduce_bcast))
      ++widened_reductions();
  }
  if (done.uniform > 0) ++uniform_steps();
  auto repoison = [&] {
    for (index_t r = 0; r < n; ++r)
      if (s.ranks[static_cast<std::size_t>(r)].how != spmd::disposition::keep)
        for (index_t i = 0; i < s.ranks[static_cast<std::size_t>(r)].elems; ++i) outs[static_cast<std::size_t>(r)][i] = T(7);
  };
  repoison();
  // A small step's launch over the backend's blocks, or over 8 or 64 at least (one item a
  // thread either way: what inline_spread_blocks may become), in turn.
  const index_t spreads[] = {spmd::cuda::inline_spread_blocks, 8, 64};
  spmd_test::run_on_grid<T>(done, wide, ins.data(), outs.data(), n, spmd_test::table_from::as_backend,
                            spreads[widened_steps() % 3]);
  compare(wide ? "the widened table" : "the finished table");
  if (spmd::cuda::fits_inline(done)) {  // run inline above: from the arrays, as a larger step
    ++inline_steps();
    repoison();
    spmd_test::run_on_grid<T>(done, wide, ins.data(), outs.data(), n, spmd_test::table_from::arrays);
    compare("the finished table read from its arrays");
  }
  if (wide && done.tile_blocks == 0 && spmd::cuda::spreadable(done)) {  // as a step of a million items would run
    ++spread_steps();
    spmd::cuda::step_table other = done;
    other.per_thread = spmd::cuda::spread_k;
    repoison();
    spmd_test::run_on_grid<T>(other, true, ins.data(), outs.data(), n);
    compare("the table spread");
  }
  if (done.tile_blocks > 0) {  // tiled: the same step spread instead must agree too
    ++tiled_steps();
    if (done.tile_uniform == 0) ++tiled_searched_steps();
    for (const auto& g : done.tiles)
      if (g.run == 0) {
        ++tiled_uneven_steps();
        break;
      }
    spmd::cuda::step_table deep = table;
    spmd::cuda::finish(deep, sizeof(T), spmd::cuda::tiling::never);
    repoison();
    spmd_test::run_on_grid<T>(deep, true, ins.data(), outs.data(), n);
    compare("the table finished without tiles");
  }
  return bad;
}

template <class T>
void sweep(const spmd::mesh_shape_vec& mesh, reduce_op op, const std::vector<shape_vec>& shapes,
           long& steps) {
  const auto ls = spmd_test::layouts(mesh.size(), op);
  for (const shape_vec& global : shapes) {
    const std::vector<T> data = values<T>(spmd::host::shape_elems(global));
    for (const placement_vec& a : ls)
      for (const placement_vec& b : ls) {
        const auto sa = spmd::make_spec(mesh, a, global.size()), sb = spmd::make_spec(mesh, b, global.size());
        if (!sa.ok() || !sb.ok()) continue;
        const auto p = spmd::make_plan(sa.spec, sb.spec, 1e6);
        if (p.error != spmd::plan_error::none) continue;
        spmd::host::local_set<T> cur = spmd::host::distribute<T>(data, sa.spec, global);
        for (int i = 0; i < p.value.steps.size(); ++i) {
          std::string why;
          const long bad = check_step<T>(p.value.steps[i], global, cur, why);
          INFO(why);
          CHECK(bad == 0);
          ++steps;
          cur = spmd::sim::execute(p.value.steps[i], global, cur);
        }
      }
  }
}

/// The S(0) -> S(1) step of a 2-d tensor on mesh 4 and the layout it starts from: the
/// transposing step the tile cases take.
struct transposing {
  spmd::layout_spec from;
  spmd::plan_step step;
};
transposing s0_to_s1_on_4() {
  placement_vec s0{}, s1{};
  s0.push_back(spmd::make_shard(0));
  s1.push_back(spmd::make_shard(1));
  const auto a = spmd::make_spec(vec<spmd::mesh_shape_vec>({4}), s0, 2);
  const auto b = spmd::make_spec(vec<spmd::mesh_shape_vec>({4}), s1, 2);
  REQUIRE((a.ok() && b.ok()));
  const auto p = spmd::make_plan(a.spec, b.spec, 1e6);
  REQUIRE(p.error == spmd::plan_error::none);
  REQUIRE(p.value.steps.size() == 1);
  return {a.spec, p.value.steps[0]};
}

}  // namespace

TEST_CASE("a step table run by the emulated grid gives the simulation's bits", "[cuda][emulation][sweep]") {
  long steps = 0;
  const std::vector<shape_vec> shapes = {vec({8, 12}), vec({5, 7}), vec({1, 3}), vec({3, 0})};
  for (reduce_op op : {reduce_op::sum, reduce_op::avg, reduce_op::max})
    for (const auto& m : {vec<spmd::mesh_shape_vec>({4}), vec<spmd::mesh_shape_vec>({2, 3}),
                          vec<spmd::mesh_shape_vec>({2, 2, 2})}) {
      sweep<float>(m, op, shapes, steps);
      if (op != reduce_op::avg) sweep<std::int32_t>(m, op, {vec({5, 7})}, steps);
    }
  sweep<spmd::bfloat16>(vec<spmd::mesh_shape_vec>({2, 2}), reduce_op::sum, shapes, steps);
  sweep<spmd::float16>(vec<spmd::mesh_shape_vec>({2, 2}), reduce_op::avg, shapes, steps);
  sweep<double>(vec<spmd::mesh_shape_vec>({3}), reduce_op::max, shapes, steps);
  INFO(steps << " steps, " << fanout_steps() << " with fan-out copies");
  CHECK(steps > 1000);
  CHECK(fanout_steps() > 100);
}

TEST_CASE("steps widened to 16-byte units give the simulation's bits", "[cuda][emulation][sweep]") {
  // Shapes whose rows are multiples of 16 bytes for every element type: most gathers,
  // all_to_alls, chunks and reductions widen, and many copy steps spread.
  // (The inputs' buffers come from local_set's allocator, aligned to 64 bytes.)
  long steps = 0;
  widened_steps() = widened_reductions() = spread_steps() = uniform_steps() = tiled_steps() = tiled_uneven_steps() =
      inline_steps() = 0;
  const std::vector<shape_vec> shapes = {vec({16, 32}), vec({8, 64}), vec({32, 8})};
  for (const auto& m : {vec<spmd::mesh_shape_vec>({4}), vec<spmd::mesh_shape_vec>({2, 2}),
                        vec<spmd::mesh_shape_vec>({2, 2, 2})}) {
    sweep<float>(m, reduce_op::sum, shapes, steps);
    sweep<float>(m, reduce_op::avg, {vec({8, 64})}, steps);
    sweep<spmd::bfloat16>(m, reduce_op::max, shapes, steps);
    sweep<spmd::float16>(m, reduce_op::min, {vec({16, 32})}, steps);
    sweep<double>(m, reduce_op::sum, {vec({16, 32})}, steps);
    sweep<std::int64_t>(m, reduce_op::product, {vec({8, 64})}, steps);
    sweep<std::int32_t>(m, reduce_op::sum, {vec({8, 64})}, steps);
  }
  INFO(widened_steps() << " of " << steps << " steps widened, " << widened_reductions() << " of them reducing, "
                       << spread_steps() << " spread, " << tiled_steps() << " tiled (" << tiled_uneven_steps()
                       << " with unequal runs); " << uniform_steps()
                       << " with ops of one size, " << inline_steps() << " inline");
  CHECK(widened_steps() > 500);
  CHECK(inline_steps() > 200);
  CHECK(tiled_steps() > 50);
  CHECK(widened_reductions() > 200);
  CHECK(spread_steps() > 100);
  CHECK(uniform_steps() > 500);
}

TEST_CASE("an S(0)->S(1) step in 16-byte items, spread or not, and a wrong table is caught", "[cuda][emulation]") {
  // mesh 4, 8 x 64 floats: each rank's 2 rows go in 4 runs of 16 floats (64 bytes) to the 4
  // ranks: 16 ops of 8 items (16 bytes) each once widened; too few items to spread.
  const transposing tr = s0_to_s1_on_4();
  const shape_vec global = vec({8, 64});
  const spmd::plan_step& step = tr.step;
  const spmd::step_schedule s = spmd::build_schedule(step, global);
  spmd::cuda::step_table t = spmd::cuda::build_step_table(step, s, global);
  const spmd::cuda::step_table built = t;
  REQUIRE(spmd::cuda::finish(t, 4));  // 128 items, under tile_big: not tiled (tiles: the next case)
  CHECK(t.tile_blocks == 0);
  CHECK(t.per_thread == 1);
  CHECK(spmd::cuda::spreadable(t));
  CHECK(t.ops.size() == 16);
  CHECK(t.uniform == 8);
  CHECK(t.items == 128);
  const std::vector<float> data = values<float>(512);
  const spmd::host::local_set<float> in = spmd::host::distribute<float>(data, tr.from, global);
  const spmd::host::local_set<float> want = spmd::sim::execute(step, global, in);
  auto differs = [&](const spmd::cuda::step_table& m) {
    std::vector<spmd_test::aligned_vec<float>> out(4);
    std::vector<const float*> ip(4);
    std::vector<float*> op(4);
    for (index_t r = 0; r < 4; ++r) {
      out[static_cast<std::size_t>(r)] = spmd_test::aligned_vec<float>(static_cast<std::size_t>(want.size(r)), 7.f);
      ip[static_cast<std::size_t>(r)] = in.data(r);
      op[static_cast<std::size_t>(r)] = out[static_cast<std::size_t>(r)].data();
    }
    spmd_test::run_on_grid<float>(m, true, ip.data(), op.data(), 4);
    for (index_t r = 0; r < 4; ++r)
      if (std::memcmp(op[static_cast<std::size_t>(r)], want.data(r), static_cast<std::size_t>(want.size(r)) * 4) != 0)
        return true;
    return false;
  };
  CHECK_FALSE(differs(t));
  // Mutations the emulation must catch: the wrong op size for the direct look-up, a piece
  // read one unit off. Spread over four items a thread, the same bits.
  spmd::cuda::step_table m1 = t;
  m1.uniform = 16;  // (larger than the ops' size: a smaller one would find ops past the last)
  CHECK(differs(m1));
  spmd::cuda::step_table m2 = t;
  m2.per_thread = spmd::cuda::spread_k;
  CHECK_FALSE(differs(m2));
  spmd::cuda::step_table m3 = t;
  m3.ops[0].geo.soff += 1;
  CHECK(differs(m3));
  // Without the direct look-up (uniform 0) the search finds the same ops.
  spmd::cuda::step_table searched = t;
  searched.uniform = 0;
  CHECK_FALSE(differs(searched));
  // Finished with tiles (as the backend does from tile_big items), the step runs by tiles:
  // one group per source, rows of 16 units (the 4 pieces of 4), one tile each; a source's
  // ops sorted by column.
  spmd::cuda::step_table tiled = built;
  REQUIRE(spmd::cuda::finish(tiled, 4, spmd::cuda::tiling::always));
  REQUIRE(tiled.tiles.size() == 4);
  CHECK(tiled.tile_blocks == 4);
  CHECK(tiled.tile_uniform == 1);
  CHECK(tiled.per_thread == 1);
  for (const auto& g : tiled.tiles) {
    CHECK(g.width == 16);
    CHECK(g.rows == 2);
    CHECK(g.pitch % 8 == 4 % 8);  // rows padded so a piece's units fall in distinct banks
    CHECK(g.op_end - g.op_begin == 4);
    CHECK(g.run == 4);
    for (index_t q = g.op_begin; q < g.op_end; ++q) {
      CHECK(tiled.ops[static_cast<std::size_t>(q)].src == g.src);
      CHECK(tiled.ops[static_cast<std::size_t>(q)].geo.soff - g.lo == 4 * (q - g.op_begin));
    }
  }
  CHECK_FALSE(differs(tiled));
  // Mutations: a piece written to its neighbour's rank, rows packed tighter than loaded, a
  // tile short of its group's rows. (A piece's column moved would break the sort by column
  // that the store's look-up relies on, and write out of bounds rather than wrong bits.)
  spmd::cuda::step_table t1 = tiled;
  t1.ops[1].dst = t1.ops[2].dst;
  CHECK(differs(t1));
  spmd::cuda::step_table t2 = tiled;
  t2.tiles[2].pitch = t2.tiles[2].width - 1;
  CHECK(differs(t2));
  spmd::cuda::step_table t3 = tiled;
  t3.tiles[0].tile_rows = 1;
  spmd::cuda::derive_divisors(t3.tiles[0]);
  CHECK(differs(t3));
  spmd::cuda::step_table t4 = tiled;  // two tiles a group: blocks 1 and 3 find the wrong group
  t4.tile_uniform = 2;
  CHECK(differs(t4));
}

TEST_CASE("a small step's launch: one item a thread, blocks of a warp or more, over as many blocks as asked",
          "[cuda][emulation]") {
  for (index_t spread : {index_t{1}, index_t{8}, index_t{64}})
    for (index_t items : {1, 31, 32, 33, 255, 256, 257, 1000, 2048, 32768}) {
      INFO("spread " << spread << ", items " << items);
      spmd::cuda::inline_table x;
      x.view.items = items;
      x.threads = spmd::cuda::inline_threads(items, spread);
      const spmd::cuda::launch_shape g = spmd::cuda::inline_launch(x);
      CHECK(g.threads >= 32);
      CHECK(g.threads <= spmd::cuda::step_block_threads);
      CHECK((g.threads & (g.threads - 1)) == 0);
      CHECK(g.blocks * g.threads >= items);                  // every item has a thread
      CHECK((g.blocks - 1) * g.threads < items);             // and no block is idle
      // the fewest threads a block that cover the items in `spread` blocks: so more than
      // spread / 2 blocks, unless a block is a warp or as large as it may be
      CHECK((g.threads == 32 || g.threads == spmd::cuda::step_block_threads || g.threads / 2 * spread < items));
      CHECK((g.threads == 32 || g.threads == spmd::cuda::step_block_threads || 2 * g.blocks > spread));
    }
  CHECK(spmd::cuda::inline_threads(256, 8) == 32);  // the 4 KiB P->R of mesh 8: 8 blocks of a warp

  // SPMD_CUDA_SMALL_STEP_BLOCKS: a count from 1 to 1024, or an error that names the value.
  CHECK(spmd::cuda::parse_small_step_blocks("1") == 1);
  CHECK(spmd::cuda::parse_small_step_blocks("8") == 8);
  CHECK(spmd::cuda::parse_small_step_blocks("1024") == 1024);
  for (const char* bad : {"", "0", "-8", "1025", "8x", " 8", "eight", "99999999999999999999"}) {
    INFO("'" << bad << "'");
    CHECK_THROWS_WITH(spmd::cuda::parse_small_step_blocks(bad),
                      Catch::Contains(std::string("SPMD_CUDA_SMALL_STEP_BLOCKS=") + bad + " is not a count of blocks"));
  }

  // P->R on mesh 8, 4 KiB of floats (bench/step_kernels' small case): 256 items of 16 bytes
  // from an inline table; the same bits over 1, 8 and 64 blocks at least. (The body is a
  // grid-stride loop, so any grid gives them; what the launch shape decides is speed.)
  placement_vec p{}, r{};
  p.push_back(spmd::make_partial(reduce_op::sum));
  r.push_back(spmd::make_replicate());
  const auto mesh = vec<spmd::mesh_shape_vec>({8});
  const shape_vec global = vec({16, 64});
  const auto a = spmd::make_spec(mesh, p, 2), b = spmd::make_spec(mesh, r, 2);
  REQUIRE((a.ok() && b.ok()));
  const auto plan = spmd::make_plan(a.spec, b.spec, 4096);
  REQUIRE(plan.error == spmd::plan_error::none);
  REQUIRE(plan.value.steps.size() == 1);
  const spmd::plan_step& step = plan.value.steps[0];
  const spmd::step_schedule sched = spmd::build_schedule(step, global);
  spmd::cuda::step_table t = spmd::cuda::build_step_table(step, sched, global);
  REQUIRE(spmd::cuda::finish(t, 4));
  REQUIRE(spmd::cuda::fits_inline(t));
  CHECK(t.items == 256);
  spmd::host::local_set<float> in(8, {0, 8});
  for (index_t k = 0; k < 8; ++k) {
    in.assign(k, global);
    const std::vector<float> v = values<float>(1024 + k);
    std::memcpy(in.data(k), v.data() + k, 1024 * sizeof(float));
  }
  const spmd::host::local_set<float> want = spmd::sim::execute(step, global, in);
  auto run = [&](index_t spread) {  // as the sweep runs a step (check_step), over `spread` blocks
    std::vector<spmd_test::aligned_vec<float>> out(8);
    std::vector<const float*> ip(8);
    std::vector<float*> op(8);
    for (index_t k = 0; k < 8; ++k) {
      out[static_cast<std::size_t>(k)] = spmd_test::aligned_vec<float>(1024, 7.f);
      ip[static_cast<std::size_t>(k)] = in.data(k);
      op[static_cast<std::size_t>(k)] = out[static_cast<std::size_t>(k)].data();
    }
    spmd_test::run_on_grid<float>(t, true, ip.data(), op.data(), 8, spmd_test::table_from::as_backend, spread);
    bool same = true;
    for (index_t k = 0; k < 8; ++k)
      same = same && std::memcmp(op[static_cast<std::size_t>(k)], want.data(k), 1024 * sizeof(float)) == 0;
    return same;
  };
  for (index_t spread : {index_t{1}, index_t{8}, index_t{64}}) {
    INFO("spread " << spread);
    CHECK(run(spread));
  }
}

TEST_CASE("the backend tiles a transposing step from tile_big 16-byte items", "[cuda]") {
  // S(0) -> S(1) on mesh 4 of rows x 64 floats: pieces of 16 floats (4 items), rows * 16
  // items once widened.
  const transposing tr = s0_to_s1_on_4();
  const auto finished = [&](index_t rows, spmd::cuda::tiling how) {
    const shape_vec global = vec({rows, 64});
    const spmd::step_schedule sch = spmd::build_schedule(tr.step, global);
    spmd::cuda::step_table t = spmd::cuda::build_step_table(tr.step, sch, global);
    REQUIRE(spmd::cuda::finish(t, 4, how));
    return t;
  };
  const index_t at = spmd::cuda::tile_big / 16;  // rows of exactly tile_big items
  CHECK(finished(at, spmd::cuda::tiling::by_size).tile_blocks > 0);
  CHECK(finished(at - 4, spmd::cuda::tiling::by_size).tile_blocks == 0);
  CHECK(finished(at - 4, spmd::cuda::tiling::always).tile_blocks > 0);
  CHECK(finished(at, spmd::cuda::tiling::never).tile_blocks == 0);
  CHECK(finished(at, spmd::cuda::tiling::never).per_thread == 1);  // under spread_big: not spread
}

TEST_CASE("transposing steps run by tiles give the simulation's bits, several tiles per source", "[cuda][emulation]") {
  // 512 x 64 floats: 128 rows per source on mesh 4, 51 rows a tile at a pitch of 20 units:
  // three tiles a source, the last one short; and the same on 2 x 2 and with bf16's 8-unit rows.
  long steps = 0;
  tiled_steps() = 0;
  const transposing tr = s0_to_s1_on_4();
  const shape_vec global = vec({512, 64});
  const spmd::step_schedule sch = spmd::build_schedule(tr.step, global);
  spmd::cuda::step_table t = spmd::cuda::build_step_table(tr.step, sch, global);
  REQUIRE(spmd::cuda::finish(t, 4, spmd::cuda::tiling::always));
  REQUIRE(t.tiles.size() == 4);
  CHECK(t.tiles[0].tile_rows == 51);
  CHECK(t.tile_blocks == 12);
  CHECK(t.tile_uniform == 3);
  const std::vector<float> data = values<float>(512 * 64);
  std::string why;
  CHECK(check_step<float>(tr.step, global, spmd::host::distribute<float>(data, tr.from, global), why) == 0);
  INFO(why);
  sweep<float>(vec<spmd::mesh_shape_vec>({2, 2}), reduce_op::sum, {vec({128, 64})}, steps);
  sweep<spmd::bfloat16>(vec<spmd::mesh_shape_vec>({4}), reduce_op::sum, {vec({96, 64})}, steps);
  CHECK(tiled_steps() >= 4);
  // Uneven pieces: 10 doubles a row on mesh 3 are pieces of 4, 4 and 2 (2, 2 and 1 units), so
  // a tile's store finds a unit's op by a search over the columns.
  // 613 rows on mesh 3 are 205, 205 and 203 rows a source, 102 rows a tile: 3, 3 and 2 tiles,
  // so a block finds its group by a search.
  tiled_uneven_steps() = tiled_searched_steps() = 0;
  sweep<double>(vec<spmd::mesh_shape_vec>({3}), reduce_op::sum, {vec({24, 10}), vec({613, 10})}, steps);
  CHECK(tiled_uneven_steps() >= 2);
  CHECK(tiled_searched_steps() >= 1);
}

TEST_CASE("widen refuses what 16-byte units cannot express", "[cuda][emulation]") {
  spmd::cuda::step_table t;
  spmd::run_geom g{};
  g.run = 6;  // 6 floats: not a multiple of 4
  t.ops.push_back({spmd::op_code::copy, 0, 1, g, 0});
  t.items = 6;
  CHECK_FALSE(spmd::cuda::widen(t, 4));
  CHECK(t.items == 6);
  t.ops[0].geo.run = 8;
  t.ops[0].geo.soff = 2;  // misaligned source offset
  CHECK_FALSE(spmd::cuda::widen(t, 4));
  t.ops[0].geo.soff = 4;
  t.ops[0].geo.s_inner = 2;  // a strided run
  CHECK_FALSE(spmd::cuda::widen(t, 4));
  t.ops[0].geo.s_inner = 1;
  CHECK_FALSE(spmd::cuda::widen(t, 16));  // one element is a unit already
  t.ops[0].code = spmd::op_code::reduce;  // every op code widens
  CHECK(spmd::cuda::widen(t, 4));
  CHECK(t.items == 2);
  CHECK(t.ops[0].geo.soff == 1);
}

TEST_CASE("the complement of a box is covered once", "[cuda][emulation]") {
  const spmd::local_box outer{vec({6, 5}), vec({0, 0})}, inner{vec({2, 3}), vec({1, 2})};
  std::vector<int> hits(30, 0);
  for (const auto& b : spmd::cuda::detail::complement(outer, inner))
    for (index_t i = 0; i < b.shape[0]; ++i)
      for (index_t j = 0; j < b.shape[1]; ++j) ++hits[static_cast<std::size_t>((b.offset[0] + i) * 5 + b.offset[1] + j)];
  for (index_t i = 0; i < 6; ++i)
    for (index_t j = 0; j < 5; ++j) {
      const bool in = i >= 1 && i < 3 && j >= 2 && j < 5;
      CHECK(hits[static_cast<std::size_t>(i * 5 + j)] == (in ? 0 : 1));
    }
}

TEST_CASE("a region copied in 16-byte units moves the same elements", "[cuda][emulation]") {
  // The NCCL transport's pack and unpack (region_copy) take this path when the region and
  // both pointers allow: every element lands where the element-wise copy puts it.
  spmd::run_geom g{};
  g.nd = 2;
  g.run = 8;  // floats: two units
  g.ext[0] = 3;
  g.ext[1] = 5;
  g.sstr[0] = 5 * 64;
  g.sstr[1] = 64;
  g.dstr[0] = 5 * 8;
  g.dstr[1] = 8;
  g.soff = 16;
  g.doff = 4;
  REQUIRE(spmd::cuda::widenable(g, 4));
  const spmd::run_geom w = spmd::cuda::widened(g, 4);
  CHECK(w.count() * 4 == g.count());
  spmd_test::aligned_vec<float> src(3 * 5 * 64 + 16), a(3 * 5 * 8 + 4, -1.f), b(3 * 5 * 8 + 4, -1.f);
  for (index_t i = 0; i < 3 * 5 * 64 + 16; ++i) src.data()[i] = static_cast<float>(i);
  for (index_t e = 0; e < g.count(); ++e) {
    index_t s = 0, d = 0;
    spmd::cuda::region_offsets(g, e, s, d);
    a.data()[d] = src.data()[s];
  }
  const auto* ws = reinterpret_cast<const spmd::cuda::wide16*>(src.data());
  auto* wd = reinterpret_cast<spmd::cuda::wide16*>(b.data());
  for (index_t e = 0; e < w.count(); ++e) {
    index_t s = 0, d = 0;
    spmd::cuda::region_offsets(w, e, s, d);
    wd[d] = ws[s];
  }
  CHECK(std::memcmp(a.data(), b.data(), (3 * 5 * 8 + 4) * sizeof(float)) == 0);
  g.soff = 2;  // not a whole unit
  CHECK_FALSE(spmd::cuda::widenable(g, 4));
}

TEST_CASE("an operator's jobs: every item of every rank found once, geometries shared", "[cuda][emulation]") {
  // What the operators' one-launch kernel does per thread (kernels/ops.cuh: jobs_kernel),
  // over an emulated grid: item i belongs to job job_of(i), at i - begin[job].
  struct ptrs {
    int* out;
    int rank;
  };
  struct geom {
    index_t cols = 0;
    bool operator==(const geom&) const = default;
  };
  spmd::cuda::job_batch<ptrs, geom> b;
  std::vector<std::vector<int>> out(6);
  const index_t sizes[6] = {5, 0, 7, 1, 5, 12};  // an empty job is left out
  for (int r = 0; r < 6; ++r) {
    out[static_cast<std::size_t>(r)].assign(static_cast<std::size_t>(sizes[r]), -1);
    REQUIRE(b.fits(geom{sizes[r] % 2}));
    b.add({out[static_cast<std::size_t>(r)].data(), r}, geom{sizes[r] % 2}, sizes[r]);
  }
  CHECK(b.jobs == 5);
  CHECK(b.geoms == 2);  // two distinct geometries among five jobs
  CHECK(b.items() == 30);
  spmd::cuda::emulate_grid(2, 3, [&](index_t blk, index_t th, index_t nb, index_t nt) {
    for (index_t i = blk * nt + th; i < b.items(); i += nb * nt) {
      const int k = b.job_of(i);
      int* o = b.ptr[k].out;
      o[i - b.begin[k]] = o[i - b.begin[k]] == -1 ? b.ptr[k].rank * 100 + static_cast<int>(i - b.begin[k]) : -2;
    }
  });
  for (int r = 0; r < 6; ++r)
    for (index_t e = 0; e < sizes[r]; ++e) CHECK(out[static_cast<std::size_t>(r)][static_cast<std::size_t>(e)] == r * 100 + e);
  // A fifth distinct geometry does not fit; a known one does.
  spmd::cuda::job_batch<ptrs, geom> c;
  for (index_t g = 0; g < spmd::cuda::job_batch<ptrs, geom>::max_geoms; ++g) c.add({nullptr, 0}, geom{g}, 1);
  CHECK_FALSE(c.fits(geom{99}));
  CHECK(c.fits(geom{0}));
  // The launcher flushes a full batch and launches the rest at the end.
  int launched = 0;
  index_t items = 0;
  auto jobs = spmd::cuda::make_job_launcher<ptrs, geom>([&](const auto& batch) {
    ++launched;
    items += batch.items();
  });
  for (index_t g = 0; g < 6; ++g) jobs.add({nullptr, 0}, geom{g}, 2);
  jobs.finish();
  CHECK(launched == 2);
  CHECK(items == 12);
}
