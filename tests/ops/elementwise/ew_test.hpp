// tests/ops/elementwise/ew_test.hpp — what the elementwise tests share: one-device references
// in double (plain loops, written apart from the library's kernels), the placement lists the
// sweeps draw from, and a check that runs an op over one placement list.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "../common/op_test.hpp"
#include "spmd/runtime/ops/elementwise.hpp"
#include "spmd/backends/sim/sim.hpp"

namespace ew_test {

using op_test::host_tensor;
using op_test::index_t;

template <class T>
host_tensor<double> widen(const host_tensor<T>& t) {
  host_tensor<double> w{t.shape, {}};
  for (const T& v : t.data) w.data.push_back(static_cast<double>(v));
  return w;
}

/// f of every element.
inline host_tensor<double> map(const host_tensor<double>& a, const std::function<double(double)>& f) {
  host_tensor<double> y = a;
  for (double& v : y.data) v = f(v);
  return y;
}

/// f(a, b) with numpy broadcasting: the output's shape is the right-aligned maximum; an
/// input's index on a dim is 0 where its extent is 1 (or it lacks the dim).
inline host_tensor<double> map2(const host_tensor<double>& a, const host_tensor<double>& b,
                                const std::function<double(double, double)>& f) {
  const std::size_t r = std::max(a.shape.size(), b.shape.size());
  std::vector<index_t> shape(r, 1);
  auto ext = [&](const host_tensor<double>& t, std::size_t d) -> index_t {
    const std::size_t off = r - t.shape.size();
    return d < off ? 1 : t.shape[d - off];
  };
  for (std::size_t d = 0; d < r; ++d) shape[d] = std::max(ext(a, d), ext(b, d));
  auto y = host_tensor<double>::zeros(shape);
  auto read = [&](const host_tensor<double>& t, const std::vector<index_t>& idx) {
    const std::size_t off = r - t.shape.size();
    index_t flat = 0;
    for (std::size_t k = 0; k < t.shape.size(); ++k)
      flat = flat * t.shape[k] + (t.shape[k] == 1 ? 0 : idx[k + off]);
    return t.data[static_cast<std::size_t>(flat)];
  };
  std::vector<index_t> idx(r, 0);
  for (std::size_t i = 0; i < y.data.size(); ++i) {
    index_t rest = static_cast<index_t>(i);
    for (std::size_t d = r; d-- > 0;) {
      idx[d] = rest % shape[d];
      rest /= shape[d];
    }
    y.data[i] = f(read(a, idx), read(b, idx));
  }
  return y;
}

/// Calls f.template operator()<P>() for each P.
template <class... P, class F>
void each(F&& f) {
  (f.template operator()<P>(), ...);
}

using spmd::partial;
using spmd::placements;
using spmd::reduce_op;
using spmd::replicate;
using spmd::shard;
using psum = partial<reduce_op::sum>;
using pavg = partial<reduce_op::avg>;
using pmax = partial<reduce_op::max>;
using pmin = partial<reduce_op::min>;

/// The placements type of a dtensor.
template <class D>
using placements_of = typename std::remove_cvref_t<D>::layout_type::placements_type;

/// True when no mesh dim of the dtensor's layout is Partial.
template <class D>
constexpr bool not_partial() {
  const spmd::placement_vec v = placements_of<D>::value();
  for (const auto& p : v)
    if (p.is_partial()) return false;
  return true;
}

/// Case over the placement lists P..., for a Mesh and a global shape: Case::run on the
/// distributed input against Case::ref on one device, inputs drawn from [Case::lo, Case::hi).
template <class Case, class Mesh, class T, index_t M, index_t N, class... P>
void sweep(double tol, unsigned seed) {
  const auto a = op_test::random<T>({M, N}, seed, Case::lo, Case::hi);
  const auto want = map(widen(a), Case::ref);
  each<P...>([&]<class PX>() {
    INFO("mesh " << Mesh::size << " x " << op_test::placements_text<PX>());
    const auto x = spmd::sim::distribute_tensor<spmd::layout<Mesh, PX, spmd::extents<M, N>>>(a.data);
    op_test::check_close(Case::run(x), want, tol);
  });
}

}  // namespace ew_test
