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

namespace {

using spmd::index_t;
using spmd::placement;
using spmd::placement_vec;
using spmd::reduce_op;
using spmd::shape_vec;

template <class V = shape_vec>
V vec(std::initializer_list<index_t> xs) {
  V v{};
  for (index_t x : xs) v.push_back(x);
  return v;
}

std::vector<placement_vec> layouts(int mesh_dims, reduce_op op) {
  const std::vector<placement> one = {spmd::make_replicate(), spmd::make_shard(0),
                                      spmd::make_shard(1), spmd::make_partial(op)};
  std::vector<placement_vec> out{placement_vec{}};
  for (int m = 0; m < mesh_dims; ++m) {
    std::vector<placement_vec> next;
    for (const placement_vec& v : out)
      for (const placement& p : one) {
        placement_vec w = v;
        w.push_back(p);
        next.push_back(w);
      }
    out = next;
  }
  return out;
}

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

/// 16-byte aligned storage for n elements (the device pool's buffers are 256-byte aligned;
/// a widened step relies on it).
template <class T>
struct aligned_vec {
  std::vector<spmd::cuda::wide16> raw;
  explicit aligned_vec(std::size_t n = 0, T v = T()) : raw((n * sizeof(T) + 15) / 16 + 1) {
    for (std::size_t i = 0; i < n; ++i) data()[i] = v;
  }
  T* data() { return reinterpret_cast<T*>(raw.data()); }
};

/// One step on `in` by the emulated grid; false (with a message) where a rank differs.
template <class T>
long check_step(const spmd::plan_step& step, const shape_vec& global,
                const spmd::host::local_set<T>& in, std::string& why) {
  const spmd::step_schedule s = spmd::build_schedule(step, global);
  const spmd::cuda::step_table table = spmd::cuda::build_step_table(step, s, global);
  const index_t n = in.ranks();
  std::vector<aligned_vec<T>> fresh(static_cast<std::size_t>(n));
  std::vector<const T*> ins(static_cast<std::size_t>(n));
  std::vector<T*> outs(static_cast<std::size_t>(n));
  for (index_t r = 0; r < n; ++r) {
    ins[static_cast<std::size_t>(r)] = in.data(r);
    if (s.ranks[static_cast<std::size_t>(r)].how == spmd::disposition::keep) {
      outs[static_cast<std::size_t>(r)] = const_cast<T*>(in.data(r));
    } else {
      fresh[static_cast<std::size_t>(r)] = aligned_vec<T>(static_cast<std::size_t>(s.ranks[static_cast<std::size_t>(r)].elems), T(7));
      outs[static_cast<std::size_t>(r)] = fresh[static_cast<std::size_t>(r)].data();
    }
  }
  if (!table.fanout.empty()) ++fanout_steps();
  spmd::cuda::step_table wide = table;
  if (spmd::cuda::widen(wide, sizeof(T))) {  // the 16-byte path, where every op allows it
    ++widened_steps();
    std::vector<const spmd::cuda::wide16*> wi(ins.size());
    std::vector<spmd::cuda::wide16*> wo(outs.size());
    for (std::size_t r = 0; r < ins.size(); ++r) {
      wi[r] = reinterpret_cast<const spmd::cuda::wide16*>(ins[r]);
      wo[r] = reinterpret_cast<spmd::cuda::wide16*>(outs[r]);
    }
    const spmd::cuda::step_view v = wide.view();
    spmd::cuda::emulate_grid(3, 5, [&](index_t b, index_t t, index_t nb, index_t nt) {
      spmd::cuda::copy_thread<spmd::cuda::wide16>(v, b, t, nb, nt, wi.data(), wo.data());
    });
  } else {
    const spmd::cuda::step_view v = table.view();
    spmd::cuda::emulate_grid(3, 5, [&](index_t b, index_t t, index_t nb, index_t nt) {
      spmd::cuda::step_thread<T>(v, b, t, nb, nt, ins.data(), outs.data());
    });
  }
  const spmd::host::local_set<T> want = spmd::sim::execute(step, global, in);
  long bad = 0;
  for (index_t r = 0; r < n; ++r) {
    const index_t k = want.size(r);
    if (k != s.ranks[static_cast<std::size_t>(r)].elems ||
        (k > 0 && std::memcmp(outs[static_cast<std::size_t>(r)], want.data(r), static_cast<std::size_t>(k) * sizeof(T)) != 0)) {
      ++bad;
      why = std::string(spmd::step_kind_name(step.kind)) + " differs at mesh index " + std::to_string(r);
    }
  }
  return bad;
}

template <class T>
void sweep(const spmd::mesh_shape_vec& mesh, reduce_op op, const std::vector<shape_vec>& shapes,
           long& steps) {
  const auto ls = layouts(mesh.size(), op);
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

}  // namespace

TEST_CASE("a step table run by the emulated grid gives the simulation's bits", "[cuda][emulation]") {
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

TEST_CASE("copy steps widened to 16-byte units give the simulation's bits", "[cuda][emulation]") {
  // Shapes whose rows are multiples of 16 bytes for every element type: most gathers,
  // all_to_alls and chunks widen. (The inputs' buffers come from local_set's allocator,
  // aligned to 64 bytes.)
  long steps = 0;
  widened_steps() = 0;
  const std::vector<shape_vec> shapes = {vec({16, 32}), vec({8, 64}), vec({32, 8})};
  for (const auto& m : {vec<spmd::mesh_shape_vec>({4}), vec<spmd::mesh_shape_vec>({2, 2}),
                        vec<spmd::mesh_shape_vec>({2, 2, 2})}) {
    sweep<float>(m, reduce_op::sum, shapes, steps);
    sweep<spmd::bfloat16>(m, reduce_op::max, shapes, steps);
    sweep<double>(m, reduce_op::sum, {vec({16, 32})}, steps);
    sweep<std::int64_t>(m, reduce_op::sum, {vec({8, 64})}, steps);
  }
  INFO(widened_steps() << " of " << steps << " steps widened");
  CHECK(widened_steps() > 100);
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
  t.ops[0].code = spmd::op_code::fill;
  CHECK_FALSE(spmd::cuda::widen(t, 4));
  t.ops[0].code = spmd::op_code::copy;
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
