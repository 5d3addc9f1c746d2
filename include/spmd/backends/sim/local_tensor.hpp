// spmd/backends/sim/local_tensor.hpp — a tensor per rank (PyTorch's LocalTensor), every rank's shard
// in this process. Shards may differ in shape per rank; a dim's size is then a local_int.
//
//   using M = spmd::mesh<2>;
//   using spmd::sim::host_tensor;
//   spmd::sim::local_tensor<float, M> x({{0, {{2, 2}, {1, 2, 3, 4}}},     // by rank id
//                                        {1, {{2, 2}, {5, 6, 7, 8}}}});
//   auto y = x * 2.f + 10.f;                  // per rank
//   y.local(1)(0, 1);                         // 22: rank 1's shard, a view
//   y.size(0);                                // local_int {2, 2}
//   (x - x).reconcile();                      // one host_tensor; throws if ranks differ
//   auto r = spmd::sim::rank_map<M>([](auto rank) {         // rank: rank_c<R> (or index_t)
//     return host_tensor<float>{{2}, {float(rank), float(rank)}};
//   });
//   auto s = spmd::sim::tensor_map(r, [](index_t rank, auto shard) { ... return host_tensor; });
//   auto d = spmd::sim::from_local<Layout>(x);              // a dtensor; shapes checked
//   auto l = spmd::sim::to_local_tensor(d);                 // its shards as a local_tensor
//
// The rank set is the mesh type (spmd::mesh<3>, spmd::mesh<2, 4>, mesh<4>::with_ranks<...>);
// ranks are rank ids, shards are stored by mesh index in a local_set (the backend's storage).
// Every bad input (a rank outside the mesh, a shape mismatch, a bad dim, integer division by
// zero) throws, naming the value. Integer arithmetic wraps (never UB).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstring>
#include <limits>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/with_rank.hpp"
#include "spmd/host/distribute.hpp"
#include "spmd/backends/sim/api.hpp"
#include "spmd/host/element.hpp"
#include "spmd/backends/sim/local_int.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/view.hpp"

namespace spmd::sim {

template <element T, class Mesh>
class local_tensor;

namespace detail {

template <class>
struct host_tensor_traits {
  static constexpr bool value = false;
};
template <class T>
struct host_tensor_traits<host_tensor<T>> {
  static constexpr bool value = true;
  using element_type = T;
};

/// Calls f(i, rank_c<Mesh::rank_at(i)>{}) for every mesh index i, in order.
template <class Mesh, class F>
void for_each_rank_c(F&& f) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    (f(static_cast<index_t>(I), rank_c<Mesh::rank_at(static_cast<index_t>(I))>{}), ...);
  }(std::make_index_sequence<static_cast<std::size_t>(Mesh::size)>{});
}

/// f(rank_c<R>{}, a...) when f takes it, else f(index_t(R), a...).
template <class F, class RC, class... A>
decltype(auto) call_with_rank(F& f, RC rc, A&&... a) {
  if constexpr (std::is_invocable_v<F&, RC, A...>) {
    return f(rc, std::forward<A>(a)...);
  } else {
    static_assert(std::is_invocable_v<F&, index_t, A...>,
                  "spmd::sim: f must take the rank (index_t or spmd::rank_c<R>).");
    return f(static_cast<index_t>(RC::value), std::forward<A>(a)...);
  }
}

inline std::string rank_text(index_t r) { return "rank " + std::to_string(r); }

/// Check `t` and install it as mesh index i's shard.
template <class T>
void install_shard(local_set<T>& s, index_t i, index_t rank, const host_tensor<T>& t,
                   const char* who) {
  const std::string w = std::string("spmd::sim::") + who + ": " + rank_text(rank);
  if (t.shape.size() > static_cast<std::size_t>(max_tensor_dims))
    throw std::invalid_argument(w + " has a shard of " + std::to_string(t.shape.size()) +
                                " dims, at most " + std::to_string(max_tensor_dims) +
                                " are supported");
  shape_vec shape{};
  for (index_t e : t.shape) {
    if (e < 0)
      throw std::invalid_argument(w + " has a negative extent " + std::to_string(e) +
                                  " in its shape");
    shape.push_back(e);
  }
  if (static_cast<index_t>(t.data.size()) != shape_elems(shape))
    throw std::invalid_argument(w + "'s shard holds " + std::to_string(t.data.size()) +
                                " elements, its shape " + detail::shape_text(shape) + " needs " +
                                std::to_string(shape_elems(shape)));
  s.assign(i, shape);
  if (!t.data.empty()) std::memcpy(s.data(i), t.data.data(), t.data.size() * sizeof(T));
}

template <class T>
bool same_value(T a, T b) {
  if constexpr (is_floating_element<T>)
    return a == b || (a != a && b != b);  // NaN equals NaN here
  else
    return a == b;
}

template <class T>
std::string value_text(T v) {
  if constexpr (is_narrow_float<T>) return std::to_string(float(v));
  else return std::to_string(v);
}

inline std::string index_text(const shape_vec& shape, index_t flat) {
  shape_vec idx{};
  idx.n = shape.size();
  for (int d = shape.size() - 1; d >= 0; --d) {
    idx[d] = shape[d] ? flat % shape[d] : 0;
    flat = shape[d] ? flat / shape[d] : 0;
  }
  return detail::shape_text(idx);
}

enum class elementwise_op { add, sub, mul, div };

inline const char* op_text(elementwise_op op) {
  switch (op) {
    case elementwise_op::add: return "+";
    case elementwise_op::sub: return "-";
    case elementwise_op::mul: return "*";
    case elementwise_op::div: return "/";
  }
  return "?";
}

/// a op b in T: signed integers wrap; integer division by zero or lowest / -1 throws
/// (naming the rank and the element).
template <elementwise_op Op, class T>
T apply_op(T a, T b, index_t rank, const shape_vec& shape, index_t flat) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if constexpr (Op == elementwise_op::add) return static_cast<T>(U(a) + U(b));
    else if constexpr (Op == elementwise_op::sub) return static_cast<T>(U(a) - U(b));
    else if constexpr (Op == elementwise_op::mul) return static_cast<T>(U(a) * U(b));
    else {
      if (b == 0 || (std::is_signed_v<T> && b == T(-1) && a == std::numeric_limits<T>::lowest()))
        throw std::domain_error("spmd::sim::local_tensor: " + value_text(a) + " / " +
                                value_text(b) + " on " + rank_text(rank) + " at " +
                                index_text(shape, flat) +
                                (b == 0 ? " divides by zero" : " overflows"));
      return static_cast<T>(a / b);
    }
  } else {
    if constexpr (Op == elementwise_op::add) return static_cast<T>(a + b);
    else if constexpr (Op == elementwise_op::sub) return static_cast<T>(a - b);
    else if constexpr (Op == elementwise_op::mul) return static_cast<T>(a * b);
    else return static_cast<T>(a / b);
  }
}

struct local_internal_t {};

}  // namespace detail

/// A shard per rank of Mesh (shapes may differ per rank; the number of dims may not).
template <element T, class Mesh>
class local_tensor {
 public:
  using value_type = T;
  using mesh_type = Mesh;
  static constexpr index_t n_ranks = Mesh::size;

  /// Every rank's shard, keyed by rank id; the map must hold exactly the mesh's ranks.
  explicit local_tensor(const std::map<index_t, host_tensor<T>>& shards)
      : shards_(n_ranks) {
    for (const auto& [r, t] : shards)
      if (!Mesh::contains(r))
        throw std::invalid_argument("spmd::sim::local_tensor: rank " + std::to_string(r) +
                                    " is not in the mesh");
    for (index_t i = 0; i < n_ranks; ++i) {
      const index_t r = Mesh::rank_at(i);
      const auto it = shards.find(r);
      if (it == shards.end())
        throw std::invalid_argument("spmd::sim::local_tensor: no shard for rank " +
                                    std::to_string(r));
      detail::install_shard(shards_, i, r, it->second, "local_tensor");
    }
    check_dims("local_tensor");
  }
  /// Every rank's shard, by mesh index (shards[i] is rank Mesh::rank_at(i)'s).
  explicit local_tensor(const std::vector<host_tensor<T>>& shards) : shards_(n_ranks) {
    if (static_cast<index_t>(shards.size()) != n_ranks)
      throw std::invalid_argument("spmd::sim::local_tensor: got " +
                                  std::to_string(shards.size()) + " shards, the mesh has " +
                                  std::to_string(n_ranks) + " ranks");
    for (index_t i = 0; i < n_ranks; ++i)
      detail::install_shard(shards_, i, Mesh::rank_at(i), shards[static_cast<std::size_t>(i)],
                            "local_tensor");
    check_dims("local_tensor");
  }
  /// The same tensor on every rank.
  static local_tensor replicated(const host_tensor<T>& t) {
    local_set<T> s(n_ranks);
    detail::install_shard(s, 0, Mesh::rank_at(0), t, "local_tensor::replicated");
    for (index_t i = 1; i < n_ranks; ++i) s.share(i, 0);  // one buffer (copied when written)
    return local_tensor(std::move(s));
  }
  /// Shards by mesh index, as the backend stores them (one per rank of the mesh).
  explicit local_tensor(local_set<T> shards) : shards_(std::move(shards)) {
    if (shards_.ranks() != n_ranks)
      throw std::invalid_argument("spmd::sim::local_tensor: the local_set has " +
                                  std::to_string(shards_.ranks()) + " shards, the mesh has " +
                                  std::to_string(n_ranks) + " ranks");
    check_dims("local_tensor");
  }

  /// Number of dims (the same on every rank).
  int dim() const { return shards_.shape(0).size(); }
  /// Rank id `rank`'s shape; throws std::out_of_range for a rank outside the mesh.
  const shape_vec& shape(index_t rank) const { return shards_.shape(slot(rank)); }
  /// The size of dim d on every rank (d < 0 counts from the end).
  local_int<Mesh> size(int d) const {
    const int n = dim();
    if (d < -n || d >= n)
      throw std::out_of_range("spmd::sim::local_tensor::size: dim " + std::to_string(d) +
                              " is out of range for " + std::to_string(n) + " dims");
    if (d < 0) d += n;
    local_int<Mesh> out;
    for (index_t i = 0; i < n_ranks; ++i) out.at_index(i) = shards_.shape(i)[d];
    return out;
  }
  /// Number of elements on every rank.
  local_int<Mesh> numel() const {
    local_int<Mesh> out;
    for (index_t i = 0; i < n_ranks; ++i) out.at_index(i) = shards_.size(i);
    return out;
  }

  /// Rank id `rank`'s shard, a view; throws std::out_of_range for a rank outside the mesh.
  strided_view<T> local(index_t rank) { return shards_.view(slot(rank)); }
  strided_view<const T> local(index_t rank) const { return shards_.view(slot(rank)); }
  /// A copy of rank id `rank`'s shard.
  host_tensor<T> to_local(index_t rank) const {
    const strided_view<const T> v = local(rank);
    host_tensor<T> t;
    t.shape.assign(v.extents().begin(), v.extents().end());
    t.data.assign(v.data(), v.data() + v.size());
    return t;
  }
  /// Bytes of memory the shards take, each buffer once: replicas (replicated(), a
  /// collective's results, a redistribute to R) share one until a rank's shard is written.
  std::size_t bytes_held() const { return shards_.bytes_held(); }
  /// Every shard, by mesh index.
  const local_set<T>& shards() const& { return shards_; }
  local_set<T>&& shards() && { return std::move(shards_); }

  /// True when every rank holds the same shape and values (NaN equal to NaN).
  bool is_uniform() const { return mismatch().empty(); }
  /// The one tensor every rank holds; throws std::logic_error naming the ranks that differ
  /// from the first rank and where (their shapes, or the first differing element).
  host_tensor<T> reconcile() const {
    if (const std::string m = mismatch(); !m.empty())
      throw std::logic_error("spmd::sim::local_tensor::reconcile: " + m);
    return to_local(Mesh::rank_at(0));
  }

  // Elementwise, per rank. Two local tensors must have equal shapes on every rank.
  friend local_tensor operator+(const local_tensor& a, const local_tensor& b) {
    return zip<detail::elementwise_op::add>(a, b);
  }
  friend local_tensor operator-(const local_tensor& a, const local_tensor& b) {
    return zip<detail::elementwise_op::sub>(a, b);
  }
  friend local_tensor operator*(const local_tensor& a, const local_tensor& b) {
    return zip<detail::elementwise_op::mul>(a, b);
  }
  friend local_tensor operator/(const local_tensor& a, const local_tensor& b) {
    return zip<detail::elementwise_op::div>(a, b);
  }
  // With a scalar, on either side.
  friend local_tensor operator+(const local_tensor& a, T s) {
    return scalar<detail::elementwise_op::add, false>(a, s);
  }
  friend local_tensor operator+(T s, const local_tensor& a) {
    return scalar<detail::elementwise_op::add, true>(a, s);
  }
  friend local_tensor operator-(const local_tensor& a, T s) {
    return scalar<detail::elementwise_op::sub, false>(a, s);
  }
  friend local_tensor operator-(T s, const local_tensor& a) {
    return scalar<detail::elementwise_op::sub, true>(a, s);
  }
  friend local_tensor operator*(const local_tensor& a, T s) {
    return scalar<detail::elementwise_op::mul, false>(a, s);
  }
  friend local_tensor operator*(T s, const local_tensor& a) {
    return scalar<detail::elementwise_op::mul, true>(a, s);
  }
  friend local_tensor operator/(const local_tensor& a, T s) {
    return scalar<detail::elementwise_op::div, false>(a, s);
  }
  friend local_tensor operator/(T s, const local_tensor& a) {
    return scalar<detail::elementwise_op::div, true>(a, s);
  }
  friend local_tensor operator-(const local_tensor& a) { return T(0) - a; }
  local_tensor& operator+=(const local_tensor& b) { return *this = *this + b; }
  local_tensor& operator-=(const local_tensor& b) { return *this = *this - b; }
  local_tensor& operator*=(const local_tensor& b) { return *this = *this * b; }
  local_tensor& operator/=(const local_tensor& b) { return *this = *this / b; }
  local_tensor& operator+=(T s) { return *this = *this + s; }
  local_tensor& operator-=(T s) { return *this = *this - s; }
  local_tensor& operator*=(T s) { return *this = *this * s; }
  local_tensor& operator/=(T s) { return *this = *this / s; }

  /// Per-element function g(value) -> T on every rank.
  template <class G>
  local_tensor map_elements(G g) const {
    local_tensor out(*this);
    for (index_t i = 0; i < n_ranks; ++i) {
      T* p = out.shards_.data(i);
      for (index_t k = 0, n = out.shards_.size(i); k < n; ++k) p[k] = static_cast<T>(g(p[k]));
    }
    return out;
  }

  /// (Internal: no checks.)
  local_tensor(detail::local_internal_t, local_set<T> shards) : shards_(std::move(shards)) {}

 private:
  static index_t slot(index_t rank) {
    const index_t i = Mesh::index_of(rank);
    if (i < 0)
      throw std::out_of_range("spmd::sim::local_tensor: rank " + std::to_string(rank) +
                              " is not in the mesh");
    return i;
  }
  void check_dims(const char* who) const {
    for (index_t i = 1; i < n_ranks; ++i)
      if (shards_.shape(i).size() != shards_.shape(0).size())
        throw std::invalid_argument(
            std::string("spmd::sim::") + who + ": " + detail::rank_text(Mesh::rank_at(i)) +
            "'s shard " + detail::shape_text(shards_.shape(i)) + " has " +
            std::to_string(shards_.shape(i).size()) + " dims, " +
            detail::rank_text(Mesh::rank_at(0)) + "'s " + detail::shape_text(shards_.shape(0)) +
            " has " + std::to_string(shards_.shape(0).size()));
  }
  std::string mismatch() const {
    std::string out;
    for (index_t i = 1; i < n_ranks; ++i) {
      std::string where;
      if (!(shards_.shape(i) == shards_.shape(0))) {
        where = "shape " + detail::shape_text(shards_.shape(i)) + " vs " + detail::shape_text(shards_.shape(0));
      } else {
        const T* a = shards_.data(0);
        const T* b = shards_.data(i);
        for (index_t k = 0, n = shards_.size(i); k < n; ++k)
          if (!detail::same_value(a[k], b[k])) {
            where = "at " + detail::index_text(shards_.shape(i), k) + ": " +
                    detail::value_text(b[k]) + " vs " + detail::value_text(a[k]);
            break;
          }
      }
      if (!where.empty())
        out += (out.empty() ? "" : "; ") + detail::rank_text(Mesh::rank_at(i)) + " (" + where +
               ")";
    }
    if (out.empty()) return out;
    return out + " differ from " + detail::rank_text(Mesh::rank_at(0));
  }
  template <detail::elementwise_op Op>
  static local_tensor zip(const local_tensor& a, const local_tensor& b) {
    local_set<T> out(n_ranks);
    for (index_t i = 0; i < n_ranks; ++i) {
      const shape_vec& s = a.shards_.shape(i);
      if (!(s == b.shards_.shape(i)))
        throw std::invalid_argument(
            std::string("spmd::sim::local_tensor: operator") + detail::op_text(Op) + " on " +
            detail::rank_text(Mesh::rank_at(i)) + ": shapes " + detail::shape_text(s) + " and " +
            detail::shape_text(b.shards_.shape(i)) + " differ");
      out.assign(i, s);
      const T* x = a.shards_.data(i);
      const T* y = b.shards_.data(i);
      T* d = out.data(i);
      const index_t r = Mesh::rank_at(i);
      for (index_t k = 0, n = shape_elems(s); k < n; ++k)
        d[k] = detail::apply_op<Op>(x[k], y[k], r, s, k);
    }
    return local_tensor(detail::local_internal_t{}, std::move(out));
  }
  template <detail::elementwise_op Op, bool ScalarFirst>
  static local_tensor scalar(const local_tensor& a, T v) {
    local_set<T> out(n_ranks);
    for (index_t i = 0; i < n_ranks; ++i) {
      const shape_vec& s = a.shards_.shape(i);
      out.assign(i, s);
      const T* x = a.shards_.data(i);
      T* d = out.data(i);
      const index_t r = Mesh::rank_at(i);
      for (index_t k = 0, n = shape_elems(s); k < n; ++k)
        d[k] = ScalarFirst ? detail::apply_op<Op>(v, x[k], r, s, k)
                           : detail::apply_op<Op>(x[k], v, r, s, k);
    }
    return local_tensor(detail::local_internal_t{}, std::move(out));
  }

  local_set<T> shards_;
};

/// A local tensor from f(rank) -> host_tensor<T>, one call per rank of Mesh in mesh-index
/// order; f gets spmd::rank_c<R> (a compile-time rank) when it takes one, else the index_t.
template <class Mesh, class F>
auto rank_map(F&& f) {
  using R0 = std::remove_cvref_t<decltype(detail::call_with_rank(
      f, rank_c<Mesh::rank_at(0)>{}))>;
  static_assert(detail::host_tensor_traits<R0>::value,
                "spmd::sim::rank_map: f(rank) must return a spmd::sim::host_tensor<T>.");
  using T = typename detail::host_tensor_traits<R0>::element_type;
  local_set<T> s(Mesh::size);
  detail::for_each_rank_c<Mesh>([&](index_t i, auto rc) {
    using R = std::remove_cvref_t<decltype(detail::call_with_rank(f, rc))>;
    static_assert(std::is_same_v<R, R0>,
                  "spmd::sim::rank_map: f(rank) must return the same type for every rank.");
    detail::install_shard(s, i, decltype(rc)::value, detail::call_with_rank(f, rc), "rank_map");
  });
  return local_tensor<T, Mesh>(std::move(s));
}

/// Each shard transformed: f(rank, shard) or f(shard) -> host_tensor<U>, shard a
/// strided_view<const T>; the rank is spmd::rank_c<R> when f takes one, else an index_t.
template <element T, class Mesh, class F>
auto tensor_map(const local_tensor<T, Mesh>& x, F&& f) {
  using V = strided_view<const T>;
  auto g = [&](auto rc) -> decltype(auto) {
    if constexpr (std::is_invocable_v<F&, V>) return f(x.shards().view(Mesh::index_of(rc)));
    else return detail::call_with_rank(f, rc, x.shards().view(Mesh::index_of(rc)));
  };
  return rank_map<Mesh>(g);
}

// ---------------------------------------------------------------------------
// DTensor integration
// ---------------------------------------------------------------------------

/// A dtensor's shards as a local tensor over its mesh (a copy).
template <element T, class Layout>
local_tensor<T, typename Layout::mesh_type> to_local_tensor(const dtensor<T, Layout>& x) {
  return local_tensor<T, typename Layout::mesh_type>(detail::local_internal_t{}, x.locals());
}
/// The same, taking x's buffers.
template <element T, class Layout>
local_tensor<T, typename Layout::mesh_type> to_local_tensor(dtensor<T, Layout>&& x) {
  return local_tensor<T, typename Layout::mesh_type>(detail::local_internal_t{},
                                                     std::move(x).locals());
}

/// A dtensor of `Layout` from a local tensor over the layout's mesh: every rank's shard must
/// have exactly the layout's local shape (std::invalid_argument naming the rank and dim).
template <class Layout, element T, class Mesh>
dtensor<T, Layout> from_local(const local_tensor<T, Mesh>& x, const Layout& layout = Layout{}) {
  static_assert(std::is_same_v<Mesh, typename Layout::mesh_type>,
                "spmd::sim::from_local: the local tensor's mesh is not the layout's mesh.");
  std::vector<host_tensor<T>> shards;
  shards.reserve(static_cast<std::size_t>(Mesh::size));
  for (index_t i = 0; i < Mesh::size; ++i) shards.push_back(x.to_local(Mesh::rank_at(i)));
  return from_local<Layout>(shards, layout);
}

}  // namespace spmd::sim
