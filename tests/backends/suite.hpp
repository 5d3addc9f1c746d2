// tests/backends/suite.hpp — the typed suite: the same cases on every backend, each rank's
// result compared with the simulation's, bit for bit.
//
// A runner says what its backend is: `backend` (the runtime's backend type), `held(n)`
// (the mesh indices this process holds on a mesh of n ranks), `execute(plan, global, in)`
// (the value-level path), `world()` (how many processes). run_sim.cpp runs it on the
// simulation itself (every rank in the process), run_mpi.cpp under mpirun.
//
// No check stops a case half way (a failed check is counted and printed), so every rank
// reaches every collective: a stopped rank would leave the others waiting.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <unistd.h>

#include <cstdio>

#include "spmd/backends/sim/sim.hpp"
#include "spmd/io/checkpoint.hpp"
#include "spmd/runtime/module.hpp"
#include "spmd/io/placement_text.hpp"
#include "spmd/plan.hpp"
#include "spmd/runtime/ops/cat.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/local_map.hpp"
#include "spmd/runtime/ops/matmul.hpp"
#include "spmd/runtime/ops/nn.hpp"
#include "spmd/runtime/ops/reduction.hpp"
#include "spmd/runtime/ops/tp.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace suite {

using spmd::index_t;
using spmd::layout_spec;
using spmd::placement;
using spmd::placement_vec;
using spmd::reduce_op;
using spmd::shape_vec;
namespace host = spmd::host;

struct report {
  int rank = 0;  // this process (for messages)
  long checks = 0;
  long failures = 0;
  void check(bool ok, const std::string& what) {
    ++checks;
    if (ok) return;
    if (++failures <= 20) std::fprintf(stderr, "[rank %d] FAILED: %s\n", rank, what.c_str());
  }
};

/// Bit for bit, except that with `any_nan` a NaN matches any NaN: a GPU's arithmetic makes
/// the canonical NaN (0x7fffffff for float) where x86 keeps an operand's payload, and which
/// NaN comes out is not part of spmd's promise (docs/numerics.md). `why` (optional) gets the
/// first differing element and both bit patterns.
template <class T>
bool same_bits(spmd::host::strided_view<const T> a, spmd::host::strided_view<const T> b,
               bool any_nan = false, std::string* why = nullptr) {
  const auto ea = a.extents(), eb = b.extents();
  if (!std::equal(ea.begin(), ea.end(), eb.begin(), eb.end())) {
    if (why) *why = "shapes differ";
    return false;
  }
  if (a.size() == 0 || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0) return true;
  for (index_t k = 0; k < a.size(); ++k) {
    const T x = a.data()[k], y = b.data()[k];
    if (std::memcmp(&x, &y, sizeof(T)) == 0) continue;
    if constexpr (!std::is_integral_v<T>)
      if (any_nan && x != x && y != y) continue;
    if (why) {
      auto bits = [](const T& v) {
        unsigned long long u = 0;
        std::memcpy(&u, &v, sizeof(T));
        char t[32];
        std::snprintf(t, sizeof t, "0x%llx", u);
        return std::string(t);
      };
      *why = "element " + std::to_string(k) + ": " + bits(x) + " (" +
             std::to_string(static_cast<double>(x)) + ") vs " + bits(y) + " (" +
             std::to_string(static_cast<double>(y)) + ")";
    }
    return false;
  }
  return true;
}

/// True when backend B's arithmetic runs on a device (NaN payloads are the hardware's).
template <class B>
inline constexpr bool device_arith = !spmd::runtime::host_memory<B>;

template <class T>
std::string type_name() {
  return spmd::host::element_name<T>();
}

/// An svec from a list (svec's own braces are {data, size}).
template <class V = shape_vec>
V vec(std::initializer_list<index_t> xs) {
  V v{};
  for (index_t x : xs) v.push_back(x);
  return v;
}

inline std::string spec_text(const layout_spec& s) {
  std::string t = "[";
  for (int m = 0; m < s.placements.size(); ++m) {
    const placement& p = s.placements[m];
    t += m ? ", " : "";
    if (p.is_replicate()) t += "R";
    else if (p.is_shard()) t += "S(" + std::to_string(p.dim) + ")";
    else t += std::string("P(") + spmd::reduce_op_name(p.op) + ")";
  }
  return t + "]";
}

/// Global values that exercise the bits: signs, -0, and NaN and inf for floating types.
template <class T>
std::vector<T> global_values(index_t n) {
  std::vector<T> g(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    const long v = (i * 37) % 101 - 50;
    if constexpr (std::is_integral_v<T>) g[static_cast<std::size_t>(i)] = static_cast<T>(v);
    else g[static_cast<std::size_t>(i)] = static_cast<T>(static_cast<double>(v) * 0.37);
  }
  if constexpr (!std::is_integral_v<T>) {
    if (n > 3) g[3] = T(-0.0f);
    if (n > 17) g[17] = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
    if (n > 23) g[23] = static_cast<T>(std::numeric_limits<float>::infinity());
  }
  return g;
}

// ---------------------------------------------------------------------------
// Value level: every pair of layouts, plans made at run time
// ---------------------------------------------------------------------------

/// Every placement vector over R, S(0), S(1), P(op) for the ops given (one op per layout).
inline std::vector<placement_vec> layouts(int mesh_dims, std::vector<reduce_op> ops) {
  std::vector<placement> one = {spmd::make_replicate(), spmd::make_shard(0), spmd::make_shard(1)};
  for (reduce_op op : ops) one.push_back(spmd::make_partial(op));
  std::vector<placement_vec> out{placement_vec{}};
  for (int m = 0; m < mesh_dims; ++m) {
    std::vector<placement_vec> next;
    for (const placement_vec& v : out)
      for (const placement& p : one) {
        bool clash = false;
        for (const placement& q : v)
          if (q.is_partial() && p.is_partial() && q.op != p.op) clash = true;
        if (clash) continue;
        placement_vec w = v;
        w.push_back(p);
        next.push_back(w);
      }
    out = next;
  }
  return out;
}

/// Redistribute every pair (src, dst) of `ls` (every `stride`-th pair) on `mesh` for each
/// global shape: this backend's locals against the simulation's.
template <class Runner, class T>
void sweep(report& rep, const spmd::mesh_shape_vec& mesh, const std::vector<placement_vec>& ls,
           const std::vector<shape_vec>& shapes, long stride = 1) {
  const index_t n = [&] {
    index_t k = 1;
    for (index_t e : mesh) k *= e;
    return k;
  }();
  if (n > Runner::world()) return;
  long pair = 0;
  for (const shape_vec& global : shapes) {
    const std::vector<T> data = global_values<T>(host::shape_elems(global));
    for (const placement_vec& src : ls) {
      const auto s = spmd::make_spec(mesh, src, global.size());
      if (!s.ok()) continue;
      if (std::is_integral_v<T> && spmd::holds_partial(src, reduce_op::avg)) continue;
      const host::local_set<T> sim_in = host::distribute<T>(data, s.spec, global);
      const host::local_set<T> in = host::distribute<T>(data, s.spec, global, Runner::held(n));
      for (const placement_vec& dst : ls) {
        if (pair++ % stride != 0) continue;
        const auto d = spmd::make_spec(mesh, dst, global.size());
        if (!d.ok()) continue;
        if (std::is_integral_v<T> && spmd::holds_partial(dst, reduce_op::avg)) continue;
        const auto p = spmd::make_plan(s.spec, d.spec, 1e6);
        if (p.error != spmd::plan_error::none) continue;
        const host::local_set<T> want = spmd::sim::execute(p.value, global, sim_in);
        const host::local_set<T> got = Runner::execute(p.value, global, in);
        for (const index_t i : got.held()) {
          std::string why;
          rep.check(same_bits<T>(got.view(i), want.view(i), device_arith<typename Runner::backend>, &why),
                    "redistribute " + type_name<T>() + " " + spec_text(s.spec) + " -> " +
                        spec_text(d.spec) + " on " + std::to_string(n) + " ranks, global " +
                        spmd::host::detail::shape_text(global) + ", mesh index " +
                        std::to_string(i) + ": " + why);
        }
      }
    }
  }
}

template <class Runner>
void value_level(report& rep) {
  const std::vector<shape_vec> shapes = {vec({8, 12}), vec({5, 7}), vec({3, 0}),
                                         vec({1, 3})};
  const std::vector<reduce_op> ops = {reduce_op::sum, reduce_op::max, reduce_op::avg};
  // Every element type on 1-d meshes, float and int32 on 2-d, float on 3-d (sampled).
  for (index_t k : {2, 3, 4, 8}) {
    const spmd::mesh_shape_vec m = vec<spmd::mesh_shape_vec>({k});
    const auto ls = layouts(1, ops);
    sweep<Runner, float>(rep, m, ls, shapes);
    sweep<Runner, double>(rep, m, ls, shapes);
    sweep<Runner, spmd::bfloat16>(rep, m, ls, shapes);
    sweep<Runner, spmd::float16>(rep, m, ls, shapes);
    sweep<Runner, std::int32_t>(rep, m, ls, shapes);
    sweep<Runner, std::int64_t>(rep, m, ls, shapes);
    // Pieces large enough to travel as MPI derived datatypes (backends/mpi/execute.hpp).
    sweep<Runner, float>(rep, m, layouts(1, {reduce_op::sum}), {vec({512, 384}), vec({300, 259})});
  }
  for (const spmd::mesh_shape_vec& m :
       {vec<spmd::mesh_shape_vec>({2, 2}), vec<spmd::mesh_shape_vec>({1, 4}), vec<spmd::mesh_shape_vec>({2, 4}),
        vec<spmd::mesh_shape_vec>({4, 2}), vec<spmd::mesh_shape_vec>({2, 3})}) {
    const auto ls = layouts(2, ops);
    sweep<Runner, float>(rep, m, ls, shapes);
    sweep<Runner, std::int32_t>(rep, m, layouts(2, {reduce_op::sum, reduce_op::max}),
                                {vec({5, 7})}, 3);
  }
  sweep<Runner, float>(rep, vec<spmd::mesh_shape_vec>({2, 2, 2}), layouts(3, {reduce_op::sum}),
                       {vec({8, 12}), vec({5, 7})}, 7);
}

// ---------------------------------------------------------------------------
// Typed level: DTensor's API, operators, TP blocks, local_map
// ---------------------------------------------------------------------------

/// same_locals' comparisons, per element type: each rank's local of the backend (`got`, with
/// the simulation's shape and block beside it) and both full tensors. Out of the template
/// over the dtensor types, which instantiated it once per layout (159 copies, 5 % of the
/// typed suite's code at -O0).
template <class T>
void same_locals_of(report& rep, const std::vector<index_t>& indices,
                    const std::vector<host::host_tensor<T>>& got,
                    const std::vector<host::strided_view<const T>>& want, const std::vector<T>* full_b,
                    const std::vector<T>* full_s, bool any_nan, const std::string& what) {
  for (std::size_t k = 0; k < indices.size(); ++k) {
    const shape_vec& shape = want[k].extents();
    std::string why = "shapes differ";
    rep.check(std::equal(got[k].shape.begin(), got[k].shape.end(), shape.begin(), shape.end()) &&
                  static_cast<index_t>(got[k].data.size()) == want[k].size() &&
                  same_bits<T>(host::strided_view<const T>(got[k].data.data(), shape), want[k], any_nan, &why),
              what + ", mesh index " + std::to_string(indices[k]) + ": " + why);
  }
  if (full_b != nullptr) {
    const auto as_view = [](const std::vector<T>& v) {
      return host::strided_view<const T>(v.data(), vec({static_cast<index_t>(v.size())}));
    };
    std::string why = "sizes differ";
    rep.check(full_b->size() == full_s->size() && same_bits<T>(as_view(*full_b), as_view(*full_s), any_nan, &why),
              what + ": full_tensor: " + why);
  }
}

/// Every local this process holds of a (backend B) against the simulation's s (read through
/// to_local, so that device memory comes back to the host first).
template <class DB, class DS>
void same_locals(report& rep, const DB& b, const DS& s, const std::string& what) {
  using T = typename DB::value_type;
  using M = typename DB::mesh_type;
  static_assert(std::is_same_v<typename DB::layout_type, typename DS::layout_type>);
  std::vector<index_t> indices;
  std::vector<host::host_tensor<T>> got;
  std::vector<host::strided_view<const T>> want;
  for (const index_t i : b.locals().held()) {
    indices.push_back(i);
    got.push_back(b.to_local(M::rank_at(i)));
    want.push_back(s.locals().view(i));
  }
  std::vector<T> fb, fs;
  const bool full = b.locals().held_ranks().count() > 0;
  if (full) fb = b.full_tensor(), fs = s.full_tensor();
  same_locals_of<T>(rep, indices, got, want, full ? &fb : nullptr, full ? &fs : nullptr,
                    device_arith<typename DB::backend_type>, what);
}

/// Where a backend's math library may round differently (a device's exp, tanh, erf, cuBLAS's
/// order of sums; the host's float rows of softmax and layer_norm, docs/numerics.md): every
/// local within a relative tolerance of the simulation's — 1e-5 for
/// float, 1e-12 for double, 1e-2 for the 16-bit floats (two bfloat16 steps) — NaN where it has
/// NaN.
/// Host backends run the same code as the simulation: bit for bit, as same_locals.
template <class DB, class DS>
void close_locals(report& rep, const DB& b, const DS& s, const std::string& what) {
  using T = typename DB::value_type;
  using M = typename DB::mesh_type;
  if constexpr (spmd::runtime::host_memory<typename DB::backend_type>) {
    same_locals(rep, b, s, what);
  } else {
    const double tol = std::is_same_v<T, float> ? 1e-5 : std::is_same_v<T, double> ? 1e-12 : 1e-2;
    for (const index_t i : b.locals().held()) {
      const host::host_tensor<T> got = b.to_local(M::rank_at(i));
      const auto want = s.locals().view(i);
      bool ok = static_cast<index_t>(got.data.size()) == want.size();
      std::string why = ok ? "" : ": sizes differ";
      for (index_t k = 0; ok && k < want.size(); ++k) {
        const double g = static_cast<double>(got.data[static_cast<std::size_t>(k)]),
                     w = static_cast<double>(want.data()[k]);
        // Equal (infinities too), both NaN, or finite and within tol.
        ok = g == w || (std::isnan(g) && std::isnan(w)) ||
             std::fabs(g - w) <= tol * std::max(1.0, std::fabs(w));
        if (!ok) why = ": element " + std::to_string(k) + ": " + std::to_string(g) + " vs " + std::to_string(w);
      }
      rep.check(ok, what + " (within " + std::to_string(tol) + "), mesh index " + std::to_string(i) + why);
    }
  }
}

/// Random operators: every backend draws the simulation's bits (random/draw.hpp), each rank
/// its own block, and its generator ends where the simulation's does.
template <class B, class Mesh>
void random_cases(report& rep) {
  using namespace spmd;
  using R = spmd::runtime::random_factories<B>;
  using F = spmd::runtime::factories<B>;
  namespace rt = spmd::runtime;
  using LR = layout<Mesh, placements<shard<1>, shard<0>>, extents<9, 7>>;
  using LP = layout<Mesh, placements<partial<reduce_op::sum>, shard<0>>, extents<9, 7>>;
  using LU = layout<Mesh, placements<replicate, shard<0>>, extents<3, 0>>;  // zero-size
  spmd::generator gb(77), gs(77);
  same_locals(rep, R::template rand<float, LR>(gb, LR{}), sim::rand<float, LR>(gs), "rand f32 S(1),S(0)");
  same_locals(rep, R::template randn<double, LP>(gb, LP{}), sim::randn<double, LP>(gs), "randn f64 P(sum),S(0)");
  same_locals(rep, R::template randn<spmd::bfloat16, LR>(gb, LR{}), sim::randn<spmd::bfloat16, LR>(gs),
              "randn bf16");
  same_locals(rep, R::template rand<spmd::float16, LU>(gb, LU{}), sim::rand<spmd::float16, LU>(gs),
              "rand f16 zero-size");
  auto xb = F::template full<float, LR>(1.0f);
  auto xs = sim::full<float, LR>(1.0f);
  same_locals(rep, rt::uniform_(xb, -1.0, 3.0, gb), rt::uniform_(xs, -1.0, 3.0, gs), "uniform_");
  same_locals(rep, rt::normal_(xb, 2.0, 0.5, gb), rt::normal_(xs, 2.0, 0.5, gs), "normal_");
  same_locals(rep, rt::dropout(xb, 0.25, gb), rt::dropout(xs, 0.25, gs), "dropout");
  same_locals(rep, rt::bernoulli_(xb, 0.4, gb), rt::bernoulli_(xs, 0.4, gs), "bernoulli_");
  rep.check(gb.get_state() == gs.get_state(), "random: the generators end in the same state");
}

/// A checkpoint: a module saved by backend B under one partition and loaded by B under
/// another equals, rank by rank, what the simulation loads from the same file; the file
/// holds the module's global values.
struct suite_model {
  BOOST_HANA_DEFINE_STRUCT(suite_model,
    (spmd::tensor<float, spmd::extents<7, 5>>, a),
    (spmd::tensor<double, spmd::extents<6>>, b),
    (spmd::tensor<std::int64_t, spmd::extents<3, 4>>, c));
};
template <spmd::fixed_string Name, class M>
struct suite_save_plan {};
template <class M>
struct suite_save_plan<"a", M> {
  using type = spmd::placements<spmd::shard<0>, spmd::shard<1>>;
};
template <class M>
struct suite_save_plan<"c", M> {
  using type = spmd::placements<spmd::partial<spmd::reduce_op::sum>, spmd::shard<0>>;
};
template <spmd::fixed_string Name, class M>
struct suite_load_plan {};
template <class M>
struct suite_load_plan<"a", M> {
  using type = spmd::placements<spmd::shard<1>, spmd::shard<0>>;
};
template <class M>
struct suite_load_plan<"b", M> {
  using type = spmd::placements<spmd::replicate, spmd::shard<0>>;
};

template <class B, class Mesh>
void checkpoint_cases(report& rep) {
  using namespace spmd;
  // Every process of a job must name the same file: no pid where B has a process per rank.
  std::string path = "/tmp/spmd_suite_" + std::string(B::name) + "_" + std::to_string(Mesh::size);
  if constexpr (!requires { B::process_rank(); }) path += "_" + std::to_string(::getpid());
  path += ".safetensors";
  suite_model m;
  for (std::size_t i = 0; i < m.a.data.size(); ++i) m.a.data[i] = 0.25f * static_cast<float>(i) - 2;
  for (std::size_t i = 0; i < m.b.data.size(); ++i) m.b.data[i] = 1.0 / (3.0 + static_cast<double>(i));
  for (std::size_t i = 0; i < m.c.data.size(); ++i) m.c.data[i] = static_cast<std::int64_t>(i * i) - 7;
  io::save(path, runtime::distribute_module_on<suite_save_plan, Mesh, B>(m));
  const auto lb = io::load_module<suite_load_plan, Mesh, B, suite_model>(path);
  const auto ls = io::load_module<suite_load_plan, Mesh, sim::backend, suite_model>(path);
  same_locals(rep, lb.template get<"a">(), ls.template get<"a">(), "checkpoint a S(1),S(0)");
  same_locals(rep, lb.template get<"b">(), ls.template get<"b">(), "checkpoint b R,S(0)");
  same_locals(rep, lb.template get<"c">(), ls.template get<"c">(), "checkpoint c R,R (saved from P(sum))");
  const suite_model back = ls.full_module();
  rep.check(back.a.data == m.a.data && back.b.data == m.b.data && back.c.data == m.c.data,
            "checkpoint: the file holds the module's values");
  spmd::io::detail::barrier<B>();  // every process has read the file
  if (spmd::io::detail::process_rank<B>() == 0) std::remove(path.c_str());
}

template <class B, class Mesh>
void typed_cases(report& rep) {
  using namespace spmd;
  using F = spmd::runtime::factories<B>;
  namespace rt = spmd::runtime;
  using L = layout<Mesh, placements<shard<0>, partial<reduce_op::sum>>, extents<7, 5>>;
  const std::vector<float> g = global_values<float>(35);
  const auto xb = F::template distribute_tensor<L>(g);
  const auto xs = sim::distribute_tensor<L>(g);
  same_locals(rep, xb, xs, "distribute_tensor S(0),P(sum)");
  same_locals(rep, rt::redistribute<placements<replicate, shard<1>>>(xb),
              rt::redistribute<placements<replicate, shard<1>>>(xs), "redistribute -> R,S(1)");
  same_locals(rep, rt::redistribute<placements<shard<1>, shard<0>>>(xb),
              rt::redistribute<placements<shard<1>, shard<0>>>(xs), "redistribute -> S(1),S(0)");
  same_locals(rep, rt::redistribute<placements<replicate, replicate>>(xb, spmd::runtime::forward_dtype_t<spmd::bfloat16>{}),
              rt::redistribute<placements<replicate, replicate>>(xs, spmd::runtime::forward_dtype_t<spmd::bfloat16>{}),
              "redistribute forward_dtype<bf16> -> R,R");
  {  // moved-from input reuses buffers
    auto cb = xb;
    auto cs = xs;
    same_locals(rep, rt::redistribute<placements<shard<0>, shard<1>>>(std::move(cb)),
                rt::redistribute<placements<shard<0>, shard<1>>>(std::move(cs)),
                "redistribute (rvalue) -> S(0),S(1)");
  }
  {  // from_local: every held rank passes the simulation's local
    auto yb = F::template from_local<float>(
        L{}, [&](index_t, index_t r) { return xs.to_local(r); }, "from_local");
    same_locals(rep, yb, xs, "from_local");
  }
  {  // factories on a P(max) layout (every rank holds the value)
    using LM = layout<Mesh, placements<partial<reduce_op::max>, shard<1>>, extents<4, 6>>;
    same_locals(rep, F::template full<double, LM>(2.5), sim::full<double, LM>(2.5), "full P(max)");
    same_locals(rep, F::template arange<std::int64_t, LM>(), sim::arange<std::int64_t, LM>(),
                "arange i64 P(max)");
    using LS = layout<Mesh, placements<partial<reduce_op::sum>, shard<1>>, extents<4, 6>>;
    same_locals(rep, F::template arange<float, LS>(), sim::arange<float, LS>(), "arange P(sum)");
  }
  random_cases<B, Mesh>(rep);
  checkpoint_cases<B, Mesh>(rep);
}

/// The operators, the TP blocks and local_map against the simulation.
template <class B, class Mesh>
void typed_op_cases(report& rep) {
  using namespace spmd;
  using F = spmd::runtime::factories<B>;
  namespace rt = spmd::runtime;
  {  // operators
    using LX = layout<Mesh, placements<shard<0>, replicate>, extents<6, 8>>;
    using LW = layout<Mesh, placements<replicate, shard<1>>, extents<8, 4>>;
    const std::vector<float> gx = global_values<float>(48), gw = global_values<float>(32);
    const auto x = F::template distribute_tensor<LX>(gx);
    const auto xS = sim::distribute_tensor<LX>(gx);
    const auto w = F::template distribute_tensor<LW>(gw);
    const auto wS = sim::distribute_tensor<LW>(gw);
    same_locals(rep, rt::relu(x) + x, rt::relu(xS) + xS, "relu(x) + x");
    close_locals(rep, rt::matmul(x, w), rt::matmul(xS, wS), "matmul");
    close_locals(rep, rt::sum<1>(rt::matmul(x, w)), rt::sum<1>(rt::matmul(xS, wS)), "sum<1>(x @ w)");
    same_locals(rep, rt::max<0>(x), rt::max<0>(xS), "max<0>(x)");
    close_locals(rep, rt::softmax<1>(x), rt::softmax<1>(xS), "softmax<1>");
    same_locals(rep, rt::transpose<0, 1>(x), rt::transpose<0, 1>(xS), "transpose");
    same_locals(rep, rt::cat<0>(x, x), rt::cat<0>(xS, xS), "cat<0>");
    same_locals(rep, rt::maximum(x, 0.5f) * 2.0f, rt::maximum(xS, 0.5f) * 2.0f, "maximum * 2");
    close_locals(rep, rt::gelu(x) - rt::tanh(x), rt::gelu(xS) - rt::tanh(xS), "gelu - tanh");
    close_locals(rep, rt::exp(x) / (rt::sqrt(rt::abs(x)) + 1.0f),
                rt::exp(xS) / (rt::sqrt(rt::abs(xS)) + 1.0f), "exp / (sqrt(abs) + 1)");
    close_locals(rep, rt::log(rt::abs(x) + 1.0f) - rt::sigmoid(x),
                rt::log(rt::abs(xS) + 1.0f) - rt::sigmoid(xS), "log(abs + 1) - sigmoid");
    same_locals(rep, rt::minimum(x, rt::neg(x)), rt::minimum(xS, rt::neg(xS)), "minimum(x, -x)");
    same_locals(rep, rt::mean<1>(x), rt::mean<1>(xS), "mean<1>");
    same_locals(rep, rt::min<0>(x), rt::min<0>(xS), "min<0>");
    same_locals(rep, rt::prod<1>(x), rt::prod<1>(xS), "prod<1>");
    close_locals(rep, rt::log_softmax<1>(x), rt::log_softmax<1>(xS), "log_softmax<1>");
    close_locals(rep, rt::layer_norm<1>(x), rt::layer_norm<1>(xS), "layer_norm<1>");
    {
      using LG = layout<Mesh, placements<replicate, replicate>, extents<8>>;
      const std::vector<float> gg = global_values<float>(8);
      close_locals(rep,
                  rt::layer_norm<1>(x, F::template distribute_tensor<LG>(gg),
                                    F::template distribute_tensor<LG>(gg)),
                  rt::layer_norm<1>(xS, sim::distribute_tensor<LG>(gg), sim::distribute_tensor<LG>(gg)),
                  "layer_norm<1> with weight and bias");
    }
    close_locals(rep, rt::matmul_t(x, rt::transpose<0, 1>(w)), rt::matmul_t(xS, rt::transpose<0, 1>(wS)),
                "matmul_t");
    close_locals(rep, rt::t_matmul(rt::transpose<0, 1>(x), w), rt::t_matmul(rt::transpose<0, 1>(xS), wS),
                "t_matmul");
    same_locals(rep, rt::permute<1, 0>(x), rt::permute<1, 0>(xS), "permute");
    same_locals(rep, rt::squeeze<0>(rt::unsqueeze<0>(x)), rt::squeeze<0>(rt::unsqueeze<0>(xS)),
                "squeeze(unsqueeze)");
    same_locals(rep, rt::reshape<3, 16>(x), rt::reshape<3, 16>(xS), "reshape<3, 16>");
    same_locals(rep, rt::view<6, 2, 4>(x), rt::view<6, 2, 4>(xS), "view<6, 2, 4>");
    same_locals(rep, rt::flatten<0, 1>(x), rt::flatten<0, 1>(xS), "flatten");
    {  // bmm: (b, m, k) x (b, k, n), batch split
      using LA = layout<Mesh, placements<shard<0>, replicate>, extents<4, 3, 5>>;
      using LB = layout<Mesh, placements<shard<0>, shard<2>>, extents<4, 5, 6>>;
      const std::vector<double> ga = global_values<double>(60), gb = global_values<double>(120);
      close_locals(rep,
                  rt::bmm(F::template distribute_tensor<LA>(ga), F::template distribute_tensor<LB>(gb)),
                  rt::bmm(sim::distribute_tensor<LA>(ga), sim::distribute_tensor<LB>(gb)), "bmm");
    }
    {  // embedding: indices (5) S(0), table (10, 4) sharded by rows over mesh dim 1
      using LI = layout<Mesh, placements<shard<0>, replicate>, extents<5>>;
      using LT = layout<Mesh, placements<replicate, shard<0>>, extents<10, 4>>;
      const std::vector<std::int64_t> idx = {3, 9, 0, 4, 7};
      const std::vector<float> table = global_values<float>(40);
      same_locals(rep,
                  rt::embedding(F::template distribute_tensor<LI>(idx), F::template distribute_tensor<LT>(table)),
                  rt::embedding(sim::distribute_tensor<LI>(idx), sim::distribute_tensor<LT>(table)),
                  "embedding (row-sharded table)");
    }
    {  // float16: a partial sum reduced by the plan, then computed in float per element
      using LH = layout<Mesh, placements<shard<0>, partial<reduce_op::sum>>, extents<6, 8>>;
      const std::vector<spmd::float16> gh = global_values<spmd::float16>(48);
      same_locals(rep, rt::sum<1>(rt::relu(F::template distribute_tensor<LH>(gh))),
                  rt::sum<1>(rt::relu(sim::distribute_tensor<LH>(gh))), "sum<1>(relu(f16 P(sum)))");
    }
    // Integers: P(max) through neg and relu.
    using LI = layout<Mesh, placements<partial<reduce_op::max>, shard<0>>, extents<3, 4>>;
    const std::vector<std::int32_t> gi = global_values<std::int32_t>(12);
    const auto xi = F::template distribute_tensor<LI>(gi);
    const auto xiS = sim::distribute_tensor<LI>(gi);
    same_locals(rep, rt::neg(rt::relu(xi)), rt::neg(rt::relu(xiS)), "neg(relu(int32 P(max)))");
    // local_map: a kernel that knows its rank (host memory here; a device backend's own
    // test passes a function that launches a kernel).
    if constexpr (spmd::runtime::host_memory<B>) {
      using LO = layout<Mesh, placements<shard<0>, replicate>, extents<6, 8>>;
      auto scale = [](index_t rank, host::strided_view<float> out, host::strided_view<const float> in) {
        for (index_t k = 0; k < out.size(); ++k) out.data()[k] = in.data()[k] * float(rank + 1);
      };
      same_locals(rep, rt::local_map<LO, rt::in_placements<placements<shard<0>, replicate>>>(scale, x),
                  rt::local_map<LO, rt::in_placements<placements<shard<0>, replicate>>>(scale, xS),
                  "local_map");
    }
  }
  {  // TP blocks: column-parallel then row-parallel (Megatron's MLP)
    constexpr int tp = 1;
    using Up = rt::column_parallel_linear<double, Mesh, tp, 8, 12, B>;
    using Down = rt::row_parallel_linear<double, Mesh, tp, 12, 8, B>;
    using UpS = sim::column_parallel_linear<double, Mesh, tp, 8, 12>;
    using DownS = sim::row_parallel_linear<double, Mesh, tp, 12, 8>;
    const std::vector<double> w1 = global_values<double>(96), b1 = global_values<double>(12),
                              w2 = global_values<double>(96), b2 = global_values<double>(8);
    const Up up = Up::from_full(w1, b1);
    const Down down = Down::from_full(w2, b2);
    const UpS upS = UpS::from_full(w1, b1);
    const DownS downS = DownS::from_full(w2, b2);
    using LX = layout<Mesh, placements<shard<0>, replicate>, extents<4, 8>>;
    const std::vector<double> gx = global_values<double>(32);
    const auto x = F::template distribute_tensor<LX>(gx);
    const auto xS = sim::distribute_tensor<LX>(gx);
    close_locals(rep, down(rt::gelu(up(x))), downS(rt::gelu(upS(xS))), "TP MLP");
  }
}


// ---------------------------------------------------------------------------
// Collectives on local tensors: each rank's result against the simulation's
// ---------------------------------------------------------------------------

/// Rank r's tensor: shape (rows(r), cols), values that differ per rank.
template <class T, class M>
spmd::sim::local_tensor<T, M> per_rank_tensors(index_t (*rows)(index_t), index_t cols) {
  std::map<index_t, host::host_tensor<T>> m;
  for (index_t i = 0; i < M::size; ++i) {
    const index_t r = M::rank_at(i), n = rows(r);
    std::vector<T> v = global_values<T>(n * cols + 7 * r + 1);
    v.erase(v.begin(), v.begin() + 7 * r + 1);
    m[r] = host::host_tensor<T>{{n, cols}, v};
  }
  return spmd::sim::local_tensor<T, M>(m);
}

/// Same shape and bits (with any_nan: NaN matches NaN, as same_bits).
template <class T>
bool same_tensor(const host::host_tensor<T>& a, const host::host_tensor<T>& b, bool any_nan = false) {
  return a.shape == b.shape && a.data.size() == b.data.size() &&
         same_bits<T>(host::strided_view<const T>(a.data.data(), vec({static_cast<index_t>(a.data.size())})),
                      host::strided_view<const T>(b.data.data(), vec({static_cast<index_t>(b.data.size())})), any_nan);
}

template <class Runner, class M, class T>
void collectives_of(report& rep) {
  using spmd::dim_mask;
  if (M::size > Runner::world()) return;
  const spmd::host::held_range held = Runner::held(M::size);
  constexpr bool any_nan = device_arith<typename Runner::backend>;
  const std::string tn = type_name<T>() + " on " + std::to_string(M::size) + " ranks";
  const auto even = per_rank_tensors<T, M>([](index_t) -> index_t { return 5; }, 6);
  const auto uneven = per_rank_tensors<T, M>([](index_t r) -> index_t { return r % 3; }, 4);
  std::vector<reduce_op> ops = {reduce_op::sum, reduce_op::max, reduce_op::min, reduce_op::product};
  if (!std::is_integral_v<T>) ops.push_back(reduce_op::avg);
  for (dim_mask g : {dim_mask{1}, dim_mask{2}, dim_mask{3}}) {
    const std::string gs = ", group " + std::to_string(g);
    for (reduce_op op : ops) {
      const auto want = spmd::sim::all_reduce(even, op, g);
      for (const index_t i : held.indices())
        rep.check(same_tensor(Runner::template all_reduce<M>(even, i, op, g),
                              want.to_local(M::rank_at(i)), any_nan),
                  "all_reduce " + std::string(spmd::reduce_op_name(op)) + " " + tn + gs);
      for (int dim : {0, 1}) {
        const auto rs = spmd::sim::reduce_scatter(even, op, dim, g);
        for (const index_t i : held.indices())
          rep.check(same_tensor(Runner::template reduce_scatter<M>(even, i, op, dim, g),
                                rs.to_local(M::rank_at(i)), any_nan),
                    "reduce_scatter " + std::string(spmd::reduce_op_name(op)) + " dim " +
                        std::to_string(dim) + " " + tn + gs);
      }
    }
    for (index_t src : {index_t{0}, M::rank_at(M::size - 1)}) {
      const auto want = spmd::sim::broadcast(uneven, src, g);
      for (const index_t i : held.indices())
        rep.check(same_tensor(Runner::template broadcast<M>(uneven, i, src, g),
                              want.to_local(M::rank_at(i)), any_nan),
                  "broadcast from " + std::to_string(src) + " " + tn + gs);
    }
    const auto ag = spmd::sim::all_gather(uneven, 0, g);
    for (const index_t i : held.indices())
      rep.check(same_tensor(Runner::template all_gather<M>(uneven, i, 0, g), ag.to_local(M::rank_at(i)), any_nan),
                "all_gather dim 0 (uneven) " + tn + gs);
    const auto ag1 = spmd::sim::all_gather(even, 1, g);
    for (const index_t i : held.indices())
      rep.check(same_tensor(Runner::template all_gather<M>(even, i, 1, g), ag1.to_local(M::rank_at(i)), any_nan),
                "all_gather dim 1 " + tn + gs);
    const auto a2a = spmd::sim::all_to_all(even, 1, 0, g);
    for (const index_t i : held.indices())
      rep.check(same_tensor(Runner::template all_to_all<M>(even, i, 1, 0, g), a2a.to_local(M::rank_at(i)), any_nan),
                "all_to_all split 1 concat 0 " + tn + gs);
  }
}

template <class Runner, class M>
void collective_cases(report& rep) {
  collectives_of<Runner, M, float>(rep);
  collectives_of<Runner, M, double>(rep);
  collectives_of<Runner, M, spmd::bfloat16>(rep);
  collectives_of<Runner, M, spmd::float16>(rep);
  collectives_of<Runner, M, std::int32_t>(rep);
  collectives_of<Runner, M, std::int64_t>(rep);
}

}  // namespace suite

#include "grad_cases.hpp"  // the gradient cases (they use the helpers above)
#include "training_cases.hpp"  // the data-parallel cases
