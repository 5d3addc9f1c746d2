// tests/ops/views/view_test.hpp — what the view and cat tests share: one-device references
// written from the definitions (index arithmetic on host tensors, nothing from spmd::sim's
// kernels), and the placement lists swept on each mesh.
#pragma once

#include <vector>

#include "../common/op_test.hpp"

namespace view_test {

using op_test::host_tensor;
using op_test::index_t;

template <class T>
host_tensor<double> widen(const host_tensor<T>& t) {
  return {t.shape, {t.data.begin(), t.data.end()}};
}

/// The multi-index of flat row-major position `flat` in `shape`.
inline std::vector<index_t> unravel(index_t flat, const std::vector<index_t>& shape) {
  std::vector<index_t> idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return idx;
}

/// Element `idx` of `a` (row-major).
inline double element(const host_tensor<double>& a, const std::vector<index_t>& idx) {
  index_t flat = 0;
  for (std::size_t d = 0; d < idx.size(); ++d) flat = flat * a.shape[d] + idx[d];
  return a.data[static_cast<std::size_t>(flat)];
}

/// out(i_0, ..., i_{n-1}) = a(j) with j[perm[k]] = i_k.
inline host_tensor<double> ref_permute(const host_tensor<double>& a, const std::vector<int>& perm) {
  std::vector<index_t> shape;
  for (int p : perm) shape.push_back(a.shape[static_cast<std::size_t>(p)]);
  auto out = host_tensor<double>::zeros(shape);
  for (index_t f = 0; f < static_cast<index_t>(out.data.size()); ++f) {
    const std::vector<index_t> i = unravel(f, shape);
    std::vector<index_t> j(i.size());
    for (std::size_t k = 0; k < perm.size(); ++k) j[static_cast<std::size_t>(perm[k])] = i[k];
    out.data[static_cast<std::size_t>(f)] = element(a, j);
  }
  return out;
}

/// Same elements in row-major order, new shape.
inline host_tensor<double> ref_reshape(const host_tensor<double>& a, std::vector<index_t> shape) {
  return {std::move(shape), a.data};
}

/// The parts joined along `dim`.
inline host_tensor<double> ref_cat(const std::vector<host_tensor<double>>& parts, int dim) {
  std::vector<index_t> shape = parts[0].shape;
  shape[static_cast<std::size_t>(dim)] = 0;
  for (const auto& p : parts) shape[static_cast<std::size_t>(dim)] += p.shape[static_cast<std::size_t>(dim)];
  auto out = host_tensor<double>::zeros(shape);
  for (index_t f = 0; f < static_cast<index_t>(out.data.size()); ++f) {
    std::vector<index_t> i = unravel(f, shape);
    std::size_t k = 0;
    while (i[static_cast<std::size_t>(dim)] >= parts[k].shape[static_cast<std::size_t>(dim)]) {
      i[static_cast<std::size_t>(dim)] -= parts[k].shape[static_cast<std::size_t>(dim)];
      ++k;
    }
    out.data[static_cast<std::size_t>(f)] = element(parts[k], i);
  }
  return out;
}

/// Placement lists for a tensor of rank R: every one (R, S(d), P(sum), P(max)) on a 1-d mesh;
/// a representative subset on a 2-d mesh (each list instantiates its redistributions, and
/// the full square costs minutes of compile time): replicated, one dim sharded on either
/// mesh dim, two dims sharded both ways, one dim sharded twice (nested), partial with and
/// without shards, P(max).
template <class Mesh, int R>
void for_each_layout(auto&& f) {
  using namespace spmd;
  constexpr int last = R - 1;
  if constexpr (Mesh::ndim == 1) {
    op_test::for_each_placements<Mesh, R, true>(f);
  } else {
    using psum = partial<reduce_op::sum>;
    f.template operator()<placements<replicate, replicate>>();
    f.template operator()<placements<shard<0>, replicate>>();
    f.template operator()<placements<replicate, shard<last>>>();
    f.template operator()<placements<shard<0>, shard<last>>>();
    f.template operator()<placements<shard<last>, shard<0>>>();
    f.template operator()<placements<shard<0>, shard<0>>>();
    f.template operator()<placements<psum, shard<0>>>();
    f.template operator()<placements<shard<last>, psum>>();
    f.template operator()<placements<psum, psum>>();
    f.template operator()<placements<partial<reduce_op::max>, replicate>>();
  }
}

}  // namespace view_test
