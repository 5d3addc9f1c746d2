// tests/cuda/op_bodies.cpp — the device side of the operators, on the host: the geometry the
// CUDA backend builds for an op (backends/cuda/ops/geometry.hpp) and the per-thread bodies
// (op_bodies.hpp), run over an emulated grid (last block and thread first, fewer threads than
// elements), against the host kernels the simulation runs. On the host both use the same
// math library, so every result must have the same bits; on a GPU only CUDA's exp, tanh,
// erf and log may round differently (tests/backends/run_cuda.cpp states the tolerance).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "spmd/backends/cuda/grid_emulation.hpp"
#include "spmd/backends/cuda/op_bodies.hpp"
#include "spmd/core/optim_math.hpp"
#include "spmd/backends/cuda/ops/geometry.hpp"
#include "spmd/backends/sim/sim.hpp"
#include "spmd/runtime/ops/cat.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/runtime/ops/nn.hpp"
#include "spmd/runtime/ops/reduction.hpp"
#include "spmd/runtime/ops/view.hpp"

namespace {

using spmd::index_t;
using spmd::shape_vec;
namespace cu = spmd::cuda;
namespace geo = spmd::cuda::ops_detail;
namespace rt = spmd::runtime;
template <class T>
using view = spmd::host::strided_view<T>;

shape_vec vec(std::initializer_list<index_t> xs) {
  shape_vec v{};
  for (index_t x : xs) v.push_back(x);
  return v;
}

/// f(i) for i < n by every thread of a 3 x 7 grid (grid-stride), last to first.
template <class F>
void on_grid(index_t n, F&& f) {
  cu::emulate_grid(3, 7, [&](index_t b, index_t t, index_t nb, index_t nt) {
    for (index_t i = b * nt + t; i < n; i += nb * nt) f(i);
  });
}

template <class T>
std::vector<T> values(index_t n, int seed = 0) {
  std::vector<T> v(static_cast<std::size_t>(n));
  for (index_t i = 0; i < n; ++i) {
    const double x = ((i * 37 + seed * 11) % 101 - 50) * 0.173;
    v[static_cast<std::size_t>(i)] = static_cast<T>(x);
  }
  if constexpr (!std::is_integral_v<T>) {
    if (n > 3) v[3] = T(-0.0f);
    if (n > 9) v[9] = static_cast<T>(std::numeric_limits<float>::quiet_NaN());
  }
  return v;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

/// Within `ulps` float steps of each other (relative to the larger magnitude), or both NaN:
/// where the host runs host/vector_math.hpp's float kernels and the device body the C
/// library's functions (docs/numerics.md: the device is within tolerance there, not bit for bit).
/// `absolute` allows for a cancellation both sides make (the tanh GELU's 1 + tanh at x < -3,
/// whose float formula loses |x| · 2^-24 on the host and the device alike).
template <class T>
bool close_values(const std::vector<T>& a, const std::vector<T>& b, double ulps, double absolute = 0) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = static_cast<double>(a[i]), y = static_cast<double>(b[i]);
    if (x == y || (std::isnan(x) && std::isnan(y))) continue;
    const double tol = ulps * std::ldexp(1.0, -23) * std::max({std::fabs(x), std::fabs(y), 1e-30}) + absolute;
    if (!(std::fabs(x - y) <= tol)) return false;
  }
  return true;
}

template <class T>
std::string tname() {
  if constexpr (std::is_same_v<T, float>) return "f32";
  else if constexpr (std::is_same_v<T, double>) return "f64";
  else if constexpr (std::is_same_v<T, spmd::bfloat16>) return "bf16";
  else if constexpr (std::is_same_v<T, spmd::float16>) return "f16";
  else if constexpr (std::is_same_v<T, std::int32_t>) return "i32";
  else return "i64";
}

template <class Fn, class T>
void check_unary(const shape_vec& s) {
  const index_t n = spmd::host::shape_elems(s);
  const std::vector<T> x = values<T>(n);
  std::vector<T> got(x.size()), want(x.size());
  on_grid(n, [&](index_t i) { cu::unary_item<Fn::id, T>(got.data(), x.data(), i); });
  rt::op_kernel<spmd::ops::unary<Fn>>::run({}, view<T>(want.data(), s), rt::op_rank_info{}, view<const T>(x.data(), s));
  INFO(Fn::name << " " << tname<T>());
  if constexpr (std::is_same_v<T, float> && spmd::host::vector_math::has_vector_form<Fn::id>)
    // the host's vector functions, within their ULP bounds (the GELU: past its cancellation)
    CHECK(close_values(got, want, 4, Fn::id == spmd::unary_fn::gelu_tanh ? 8.0 * std::ldexp(1.0, -23) * 9 : 0.0));
  else
    CHECK(same_bits(got, want));
}

template <class Fn, class T>
void check_binary(const shape_vec& out, const shape_vec& a, const shape_vec& b) {
  const std::vector<T> va = values<T>(spmd::host::shape_elems(a), 1), vb = values<T>(spmd::host::shape_elems(b), 2);
  const index_t n = spmd::host::shape_elems(out);
  std::vector<T> got(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n));
  const cu::index_geom g = geo::binary_geom(out, a, b);
  on_grid(g.count(), [&](index_t i) { cu::binary_item<Fn::id, T>(got.data(), va.data(), vb.data(), g, i); });
  rt::op_kernel<spmd::ops::binary<Fn>>::run({}, view<T>(want.data(), out), rt::op_rank_info{},
                                           view<const T>(va.data(), a), view<const T>(vb.data(), b));
  INFO(Fn::name << " " << tname<T>() << " " << spmd::host::detail::shape_text(a) << " with "
                << spmd::host::detail::shape_text(b));
  CHECK(g.count() == n);
  CHECK(same_bits(got, want));
}

template <class Fn, bool Left, class T>
void check_scalar() {
  const shape_vec s = vec({4, 5});
  const std::vector<T> x = values<T>(20);
  const T c = static_cast<T>(3);
  std::vector<T> got(20), want(20);
  on_grid(20, [&](index_t i) { cu::scalar_item<Fn::id, Left, T>(got.data(), x.data(), c, i); });
  spmd::ops::with_scalar<Fn, Left, T> op{};
  op.value = c;
  rt::op_kernel<spmd::ops::with_scalar<Fn, Left, T>>::run(op, view<T>(want.data(), s), rt::op_rank_info{},
                                                          view<const T>(x.data(), s));
  INFO(Fn::name << (Left ? " scalar left " : " scalar right ") << tname<T>());
  CHECK(same_bits(got, want));
}

template <class Op, class T>
void check_copy(const Op& op, const shape_vec& in, const shape_vec& out, const cu::index_geom& g) {
  const std::vector<T> x = values<T>(spmd::host::shape_elems(in));
  std::vector<T> got(x.size(), T(7)), want(x.size());
  on_grid(g.count(), [&](index_t i) { cu::copy_item<T>(got.data(), x.data(), g, i); });
  rt::op_kernel<Op>::run(op, view<T>(want.data(), out), rt::op_rank_info{}, view<const T>(x.data(), in));
  CHECK(same_bits(got, want));
}

template <spmd::ops::reduce_kind K, class T, int... D>
void check_reduction(const shape_vec& s) {
  using Op = spmd::ops::reduction<K, false, D...>;
  const auto red = spmd::ops::reduction_detail::reduced_of<D...>(s.size());
  // (Named members, not a structured binding: clang 14 cannot capture those in a lambda.)
  const geo::reduce_geoms rg = geo::reduction_geoms(s, red.of);
  const cu::index_geom& kept = rg.kept;
  const cu::index_geom& reduced = rg.reduced;
  const std::vector<T> x = values<T>(spmd::host::shape_elems(s));
  shape_vec out{};
  for (int d = 0; d < s.size(); ++d)
    if (!red.of[d]) out.push_back(s[d]);
  const index_t n = spmd::host::shape_elems(out);
  std::vector<T> got(static_cast<std::size_t>(n)), want(static_cast<std::size_t>(n));
  constexpr bool mean = K == spmd::ops::reduce_kind::mean;
  constexpr spmd::reduce_op op = mean ? spmd::reduce_op::sum : spmd::ops::partial_op_of(K);
  on_grid(kept.count(), [&](index_t i) { cu::reduce_item<op, mean, T>(got.data(), x.data(), kept, reduced, i); });
  rt::op_kernel<Op>::run(Op{}, view<T>(want.data(), out), rt::op_rank_info{}, view<const T>(x.data(), s));
  INFO(Op::name << " " << tname<T>() << " of " << spmd::host::detail::shape_text(s));
  CHECK(same_bits(got, want));
}

template <int Dim, bool Log, class T>
void check_softmax(const shape_vec& s) {
  const std::vector<T> x = values<T>(spmd::host::shape_elems(s));
  std::vector<T> got(x.size()), want(x.size());
  const cu::index_geom rows = geo::softmax_rows(s, Dim);
  const index_t stride = geo::row_major_strides(s)[Dim];
  on_grid(rows.count(), [&](index_t r) {
    cu::softmax_row<Log, T, T>(got.data(), x.data(), rows, s[Dim], stride, stride, r);
  });
  rt::op_kernel<spmd::ops::softmax<Dim, Log>>::run({}, view<T>(want.data(), s), rt::op_rank_info{},
                                                   view<const T>(x.data(), s));
  INFO((Log ? "log_softmax " : "softmax ") << Dim << " " << tname<T>());
  if constexpr (std::is_same_v<T, float>) CHECK(close_values(got, want, 16, 1e-5));  // host: float rows (the suite's 1e-5)
  else CHECK(same_bits(got, want));
}

template <int N, bool Affine, class T>
void check_layer_norm(const shape_vec& s) {
  const std::vector<T> x = values<T>(spmd::host::shape_elems(s));
  shape_vec ws{};
  for (int d = s.size() - N; d < s.size(); ++d) ws.push_back(s[d]);
  const std::vector<T> w = values<T>(spmd::host::shape_elems(ws), 3), b = values<T>(spmd::host::shape_elems(ws), 4);
  std::vector<T> got(x.size()), want(x.size());
  const geo::norm_geoms ng = geo::layer_norm_geoms(s, N);
  const cu::index_geom& outer = ng.outer;
  const cu::index_geom& inner = ng.inner;
  spmd::ops::layer_norm<N, Affine> op{};
  on_grid(outer.count(), [&](index_t r) {
    cu::layer_norm_row<Affine, T, T>(got.data(), x.data(), w.data(), b.data(), outer, inner, op.eps, r);
  });
  if constexpr (Affine)
    rt::op_kernel<spmd::ops::layer_norm<N, Affine>>::run(op, view<T>(want.data(), s), rt::op_rank_info{},
                                                         view<const T>(x.data(), s), view<const T>(w.data(), ws),
                                                         view<const T>(b.data(), ws));
  else
    rt::op_kernel<spmd::ops::layer_norm<N, Affine>>::run(op, view<T>(want.data(), s), rt::op_rank_info{},
                                                         view<const T>(x.data(), s));
  INFO("layer_norm over " << N << (Affine ? " with weight and bias " : " ") << tname<T>());
  if constexpr (std::is_same_v<T, float> && N == 1) CHECK(close_values(got, want, 16, 1e-5));  // host: float rows
  else CHECK(same_bits(got, want));
}

template <int N, bool Affine, class T>
void check_layer_norm_backward(const shape_vec& s) {
  const std::vector<T> x = values<T>(spmd::host::shape_elems(s)), g = values<T>(spmd::host::shape_elems(s), 5);
  shape_vec ws{};
  for (int d = s.size() - N; d < s.size(); ++d) ws.push_back(s[d]);
  const std::vector<T> w = values<T>(spmd::host::shape_elems(ws), 3);
  std::vector<T> got(x.size()), want(x.size());
  const geo::norm_geoms ng = geo::layer_norm_geoms(s, N);
  spmd::ops::layer_norm_backward<N, Affine> op{};
  on_grid(ng.outer.count(), [&](index_t r) {
    cu::layer_norm_backward_row<Affine, T, T>(got.data(), g.data(), x.data(), Affine ? w.data() : nullptr, ng.outer,
                                              ng.inner, op.eps, r);
  });
  if constexpr (Affine)
    rt::op_kernel<spmd::ops::layer_norm_backward<N, Affine>>::run(op, view<T>(want.data(), s), rt::op_rank_info{},
                                                                  view<const T>(g.data(), s), view<const T>(x.data(), s),
                                                                  view<const T>(w.data(), ws));
  else
    rt::op_kernel<spmd::ops::layer_norm_backward<N, Affine>>::run(op, view<T>(want.data(), s), rt::op_rank_info{},
                                                                  view<const T>(g.data(), s), view<const T>(x.data(), s));
  INFO("layer_norm_backward over " << N << (Affine ? " with weight " : " ") << tname<T>());
  if constexpr (std::is_same_v<T, float> && N == 1) CHECK(close_values(got, want, 64, 1e-5));  // host: float rows
  else CHECK(same_bits(got, want));
}

}  // namespace

TEST_CASE("elementwise bodies over the emulated grid give the host kernels' bits", "[cuda][emulation]") {
  using namespace spmd::ops;
  const shape_vec s = vec({3, 7});
  [&]<class... T>() {
    (check_unary<neg_fn, T>(s), ...);
    (check_unary<abs_fn, T>(s), ...);
    (check_unary<relu_fn, T>(s), ...);
  }.template operator()<float, double, spmd::bfloat16, spmd::float16, std::int32_t, std::int64_t>();
  [&]<class... T>() {
    (check_unary<exp_fn, T>(s), ...);
    (check_unary<log_fn, T>(s), ...);
    (check_unary<sqrt_fn, T>(s), ...);
    (check_unary<gelu_fn, T>(s), ...);
    (check_unary<tanh_fn, T>(s), ...);
    (check_unary<sigmoid_fn, T>(s), ...);
    (check_unary<gelu_tanh_fn, T>(s), ...);
  }.template operator()<float, double, spmd::bfloat16, spmd::float16>();
  // Broadcasting: same shapes, a bias row, both sides stretched, a scalar-shaped input.
  const std::vector<std::array<shape_vec, 3>> shapes = {
      {vec({4, 5}), vec({4, 5}), vec({4, 5})}, {vec({2, 3, 4}), vec({2, 3, 4}), vec({4})},
      {vec({3, 4}), vec({3, 1}), vec({1, 4})}, {vec({2, 3, 4}), vec({2, 1, 4}), vec({3, 1})},
      {vec({5}), vec({5}), vec({})},           {vec({}), vec({}), vec({})}};
  for (const auto& [o, a, b] : shapes) {
    check_binary<add_fn, float>(o, a, b);
    check_binary<sub_fn, double>(o, a, b);
    check_binary<mul_fn, spmd::bfloat16>(o, a, b);
    check_binary<div_fn, spmd::float16>(o, a, b);
    check_binary<div_fn, float>(o, a, b);
    check_binary<maximum_fn, float>(o, a, b);
    check_binary<minimum_fn, double>(o, a, b);
    check_binary<add_fn, std::int32_t>(o, a, b);
    check_binary<maximum_fn, std::int64_t>(o, a, b);
    // The derivative functions of the autograd layer.
    check_binary<relu_backward_fn, float>(o, a, b);
    check_binary<gelu_backward_fn, double>(o, a, b);
    check_binary<gelu_tanh_backward_fn, spmd::bfloat16>(o, a, b);
    check_binary<sign_mul_fn, spmd::float16>(o, a, b);
    check_binary<equal_fn, float>(o, a, b);
    check_binary<expand_as_fn, double>(o, a, b);
  }
  check_scalar<sub_fn, true, float>();
  check_scalar<sub_fn, false, float>();
  check_scalar<div_fn, true, double>();
  check_scalar<mul_fn, false, std::int32_t>();
  check_scalar<maximum_fn, true, spmd::bfloat16>();
  check_scalar<equal_fn, false, double>();
}

TEST_CASE("views and cat as strided copies give the host kernels' bits", "[cuda][emulation]") {
  const shape_vec in = vec({2, 3, 4});
  check_copy<spmd::ops::permute<2, 0, 1>, float>({}, in, vec({4, 2, 3}),
                                                 geo::permute_geom(vec({4, 2, 3}), in, vec({2, 0, 1})));
  check_copy<spmd::ops::transpose<0, 2>, std::int64_t>({}, in, vec({4, 3, 2}),
                                                       geo::permute_geom(vec({4, 3, 2}), in, vec({2, 1, 0})));
  check_copy<spmd::ops::transpose<0, 1>, spmd::bfloat16>({}, vec({5, 3}), vec({3, 5}),
                                                         geo::permute_geom(vec({3, 5}), vec({5, 3}), vec({1, 0})));
  // cat along dim 1 of (2, 1, 3) and (2, 2, 3): each part into the output at its offset.
  const shape_vec p0 = vec({2, 1, 3}), p1 = vec({2, 2, 3}), out = vec({2, 3, 3});
  const std::vector<double> a = values<double>(6, 1), b = values<double>(12, 2);
  std::vector<double> got(18, 7.0), want(18);
  const cu::index_geom g0 = geo::cat_part_geom(out, p0), g1 = geo::cat_part_geom(out, p1);
  const index_t off1 = 1 * geo::row_major_strides(out)[1];
  on_grid(g0.count(), [&](index_t i) { cu::copy_item<double>(got.data(), a.data(), g0, i); });
  on_grid(g1.count(), [&](index_t i) { cu::copy_item<double>(got.data() + off1, b.data(), g1, i); });
  rt::op_kernel<spmd::ops::cat<1>>::run({}, view<double>(want.data(), out), rt::op_rank_info{},
                                        view<const double>(a.data(), p0), view<const double>(b.data(), p1));
  CHECK(same_bits(got, want));
}

TEST_CASE("reduction bodies meet their inputs in the host kernel's order (same bits)", "[cuda][emulation]") {
  using K = spmd::ops::reduce_kind;
  const shape_vec s = vec({3, 4, 5});
  check_reduction<K::sum, float, 2>(s);
  check_reduction<K::sum, float, 0>(s);
  check_reduction<K::sum, float, 0, 2>(s);
  check_reduction<K::sum, spmd::bfloat16, 1>(s);
  check_reduction<K::mean, double, 1, 2>(s);
  check_reduction<K::mean, spmd::bfloat16, 0>(s);
  check_reduction<K::sum, spmd::float16, 1, 2>(s);
  check_reduction<K::max, float, 1>(s);
  check_reduction<K::min, std::int32_t, 0, 1, 2>(s);
  check_reduction<K::prod, std::int64_t, 2>(s);
  check_reduction<K::sum, float, 0>(vec({0, 3}));  // nothing to reduce: the start value
  check_reduction<K::max, double, 1>(vec({4, 1}));
}

TEST_CASE("softmax, log_softmax and layer_norm rows give the host kernels' bits", "[cuda][emulation]") {
  const shape_vec s = vec({3, 4, 5});
  check_softmax<0, false, float>(s);
  check_softmax<1, false, double>(s);
  check_softmax<2, true, float>(s);
  check_softmax<2, false, spmd::bfloat16>(s);
  check_softmax<0, true, spmd::float16>(s);
  check_softmax<1, true, double>(vec({2, 0}));
  check_layer_norm<1, false, float>(s);
  check_layer_norm<2, true, double>(s);
  check_layer_norm<1, true, spmd::bfloat16>(vec({6, 8}));
  check_layer_norm<2, false, spmd::float16>(s);
  check_layer_norm_backward<1, true, float>(s);
  check_layer_norm_backward<2, true, double>(s);
  check_layer_norm_backward<1, false, double>(s);
  check_layer_norm_backward<1, true, spmd::bfloat16>(vec({6, 8}));
}

TEST_CASE("embedding: held rows, zeros for other ranks' rows, bad indices reported", "[cuda][emulation]") {
  // The rank holds rows [3, 7) of a vocabulary of 10, 4 columns.
  const index_t first = 3, rows = 4, h = 4, vocab = 10;
  const std::vector<float> w = values<float>(rows * h);
  const std::vector<std::int64_t> idx = {3, 9, 0, 6, 4, 7};
  std::vector<float> got(idx.size() * h, 7.f), want(idx.size() * h);
  index_t bad[2] = {0, 0};
  on_grid(static_cast<index_t>(got.size()), [&](index_t i) {
    cu::embedding_item<float, float, std::int64_t>(got.data(), w.data(), idx.data(), first, rows, h, vocab, i, bad);
  });
  rt::op_rank_info::offsets off;
  off.in.push_back(vec({first, 0}));
  off.in.push_back(vec({0}));
  off.out = vec({0, 0});
  rt::op_rank_info info{};
  info.set_offsets(&off);
  spmd::ops::embedding op{};
  op.vocab = vocab;
  rt::op_kernel<spmd::ops::embedding>::run(op, view<float>(want.data(), vec({6, 4})), info,
                                           view<const float>(w.data(), vec({rows, h})),
                                           view<const std::int64_t>(idx.data(), vec({6})));
  CHECK(same_bits(got, want));
  CHECK(bad[0] == 0);
  const std::vector<std::int32_t> wrong = {2, 10};
  on_grid(8, [&](index_t i) {
    cu::embedding_item<float, float, std::int32_t>(got.data(), w.data(), wrong.data(), first, rows, h, vocab, i, bad);
  });
  CHECK(bad[0] == 1);
  CHECK(bad[1] == 10);
}

TEST_CASE("narrow and one_hot: the device bodies give the host kernels' bits", "[cuda][emulation]") {
  {  // narrow<1, 1, 2> of (3, 4, 2): the device op's copy from the slice's first element
    const shape_vec in = vec({3, 4, 2}), out = vec({3, 2, 2});
    const std::vector<double> x = values<double>(spmd::host::shape_elems(in));
    std::vector<double> got(static_cast<std::size_t>(spmd::host::shape_elems(out)), 7.0), want(got.size());
    const cu::index_geom g = geo::permute_geom(out, in, vec({0, 1, 2}));
    const index_t start = 1 * geo::row_major_strides(in)[1];
    on_grid(g.count(), [&](index_t i) { cu::copy_item<double>(got.data(), x.data() + start, g, i); });
    rt::op_kernel<spmd::ops::narrow<1, 1, 2>>::run({}, view<double>(want.data(), out), rt::op_rank_info{},
                                                   view<const double>(x.data(), in));
    CHECK(same_bits(got, want));
  }
  {  // one_hot<float, 5> of (2, 3) indices; an index outside the classes is flagged
    const std::vector<std::int64_t> idx = {4, 0, 2, 2, 1, 3};
    std::vector<float> got(30, 7.f), want(30);
    index_t bad[2] = {0, 0};
    on_grid(30, [&](index_t i) { cu::one_hot_item<float, std::int64_t>(got.data(), idx.data(), 5, i, bad); });
    rt::op_kernel<spmd::ops::one_hot<float, 5>>::run({}, view<float>(want.data(), vec({2, 3, 5})),
                                                      rt::op_rank_info{},
                                                      view<const std::int64_t>(idx.data(), vec({2, 3})));
    CHECK(same_bits(got, want));
    CHECK(bad[0] == 0);
    const std::vector<std::int32_t> wrong = {1, 5};
    on_grid(10, [&](index_t i) { cu::one_hot_item<float, std::int32_t>(got.data(), wrong.data(), 5, i, bad); });
    CHECK(bad[0] == 1);
    CHECK(bad[1] == 5);
  }
}

TEST_CASE("fused optimizer update: every element of every segment updated once with its own coefficients, as on "
          "the host",
          "[op_bodies]") {
  namespace om = spmd::optim_math;
  // Three parameters' blocks of unequal sizes (one empty), AdamW then SGD with momentum.
  const std::vector<index_t> sizes{37, 0, 11, 64};
  auto fill = [](std::vector<float>& v, unsigned seed) {
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((i * 7 + seed) % 13) * 0.25f - 1.5f;
  };
  // Each segment its own coefficients (a parameter's step count and bias corrections differ
  // from another's), read through the segment's index into the coefficient array.
  const std::vector<om::adamw_coeffs<float>> ac{{true, 0.999f, 0.1f, 0.999f, 0.001f, 0.03f, 1e-8f, 0.01f},
                                               {false, 1.f, 0.2f, 0.99f, 0.01f, 0.5f, 1e-6f, 0.02f}};
  const std::vector<om::sgd_coeffs<float>> sc{{true, 0.01f, true, false, 0.9f, false, 1.f, true, 0.1f},
                                              {false, 0.f, true, true, 0.5f, true, 0.75f, false, 0.3f}};
  const std::vector<index_t> which_coeffs{1, 0, 0, 1};
  for (int which = 0; which < 2; ++which) {
    std::vector<std::vector<float>> p(sizes.size()), g(sizes.size()), a(sizes.size()), b(sizes.size());
    for (std::size_t s = 0; s < sizes.size(); ++s) {
      for (auto* v : {&p[s], &g[s], &a[s], &b[s]}) v->resize(static_cast<std::size_t>(sizes[s]));
      fill(p[s], 1 + s), fill(g[s], 2 + s), fill(a[s], 3 + s), fill(b[s], 4 + s);
      for (float& x : b[s]) x = x * x;  // exp_avg_sq is >= 0
    }
    auto want_p = p, want_a = a, want_b = b;
    for (std::size_t s = 0; s < sizes.size(); ++s)
      for (std::size_t i = 0; i < p[s].size(); ++i) {
        const auto k = static_cast<std::size_t>(which_coeffs[s]);
        if (which == 0) om::adamw_elem(want_p[s][i], g[s][i], want_a[s][i], want_b[s][i], ac[k]);
        else om::sgd_elem(want_p[s][i], g[s][i], want_a[s][i], sc[k]);
      }
    auto run = [&](const auto& coeffs) {
      using C = typename std::remove_cvref_t<decltype(coeffs)>::value_type;
      std::vector<om::segment<float, C>> table;
      for (std::size_t s = 0; s < sizes.size(); ++s)
        table.push_back({p[s].data(), g[s].data(), a[s].data(), b[s].data(), sizes[s], which_coeffs[s]});
      // 3 blocks of 5 threads, 2 rows: fewer rows than segments, fewer threads than elements.
      for (index_t row = 1; row >= 0; --row)
        cu::emulate_grid(3, 5, [&](index_t blk, index_t t, index_t nb, index_t nt) {
          om::update_thread(table.data(), static_cast<index_t>(table.size()), coeffs.data(), blk, t, nb, nt, row, 2);
        });
    };
    if (which == 0) run(ac);
    else run(sc);
    CHECK(p == want_p);
    CHECK(a == want_a);
    if (which == 0) CHECK(b == want_b);
  }
}
