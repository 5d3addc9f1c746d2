// spmd/runtime/data_parallel/ddp.hpp — DistributedDataParallel: parameters replicated over the
// data-parallel mesh dim, gradients all-reduced in buckets as the backward produces them.
//
//   auto w1 = rt::requires_grad(F::distribute_tensor<LW1>(w1_0), "w1");   // R on dp
//   auto model = rt::ddp<0>(w1, b1, w2, b2);          // dp = mesh dim 0, 25 MiB buckets
//   auto [W1, B1, W2, B2] = model.params();           // this step's views of the parameters
//   loss(W1, B1, W2, B2, x).backward();               // buckets all_reduce as they fill
//   opt.step();                                       // the optimizer holds w1, b1, w2, b2
//   static_assert(decltype(model)::buckets == 1 && decltype(model)::collectives_per_step == 1);
//
// What DDP's autograd hooks do, as layouts: params() gives, for each parameter p, a variable
// that is p's own tensor (no copy) recorded with gradient placements Partial(sum) on dp, so
// the gradient the backward computes (x sharded by batch on dp: dW = xᵀ·g is a sum over the
// ranks' rows) stays a Partial and nothing is reduced per parameter. When every parameter
// of a bucket has its gradient, the bucket runs one all_reduce for all of them
// (redistribute_coalesced) and p.grad() receives the Replicate result. The loss is the global
// mean, so the reduced sum is exactly the averaged gradient torch's DDP computes.
//
// Buckets are assigned at compile time, in reverse parameter order (the order gradients
// arrive), each at most BucketBytes of local gradient per rank (25 MiB by default, DDP's
// bucket_cap_mb); a parameter larger than the cap gets a bucket of its own. (torch also gives
// the first bucket a 1 MiB cap to start communicating early; spmd's backends do not overlap a
// bucket's all_reduce with the backward, so there is nothing to gain from it.)
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <tuple>
#include <type_traits>
#include <utility>

#include <boost/mp11/algorithm.hpp>
#include <boost/mp11/list.hpp>

#include "spmd/runtime/autograd/node.hpp"
#include "spmd/runtime/autograd/variable.hpp"
#include "spmd/runtime/data_parallel/grad_bucket.hpp"

namespace spmd::runtime {

namespace dp_detail {

/// Placements Ps with the entry of mesh dim D replaced by X.
template <class Ps, int D, class X>
using replace_at = boost::mp11::mp_replace_at_c<Ps, static_cast<std::size_t>(D), X>;

/// The most elements any rank holds of a tensor in layout L (static extents), over the
/// sizes the compiler decides with (a dynamic mesh size as nominal_dyn_size: the buckets are
/// types, assigned as for a mesh whose dynamic dims are larger than 1).
template <class L>
constexpr index_t max_local_elements() {
  using M = typename L::mesh_type;
  constexpr mesh_shape_vec shape = M::nominal_shape_vec();
  index_t ranks = 1;
  for (const index_t s : shape) ranks *= s;
  index_t most = 0;
  for (index_t r = 0; r < ranks; ++r) {
    const local_box b = box_at(L::nominal_spec(), typename L::extents_type{}.to_vec(), unravel(shape, r));
    index_t n = 1;
    for (int d = 0; d < b.shape.size(); ++d) n *= b.shape[d];
    most = most > n ? most : n;
  }
  return most;
}

/// Bucket of each of N parameters of the given local byte sizes: filled in reverse order,
/// a new bucket when the next would pass `cap`.
template <std::size_t N>
constexpr std::array<int, N> assign_buckets(const std::array<std::size_t, N>& bytes, std::size_t cap) {
  std::array<int, N> of{};
  int k = 0;
  std::size_t filled = 0;
  for (std::size_t j = N; j-- > 0;) {
    if (filled > 0 && filled + bytes[j] > cap) {
      ++k;
      filled = 0;
    }
    of[j] = k;
    filled += bytes[j];
  }
  return of;
}

}  // namespace dp_detail

/// Bytes of DDP's default bucket (torch's bucket_cap_mb = 25).
inline constexpr std::size_t default_bucket_bytes = std::size_t{25} << 20;

/// A model's parameters under DDP over mesh dim DpDim: see the header comment.
template <int DpDim, std::size_t BucketBytes, class... Ps>
class ddp_model {
  static_assert(sizeof...(Ps) >= 1, "spmd::ddp: give at least one parameter.");
  using first = std::tuple_element_t<0, std::tuple<Ps...>>;
  using mesh_type = typename first::mesh_type;
  using T = typename first::element_type;
  using B = typename first::backend_type;
  static_assert((is_variable<Ps> && ...), "spmd::ddp: the parameters must be variables (requires_grad).");
  static_assert(DpDim >= 0 && DpDim < mesh_type::ndim, "spmd::ddp: DpDim is not a dim of the parameters' mesh.");
  static_assert((std::is_same_v<typename Ps::mesh_type, mesh_type> && ...),
                "spmd::ddp: every parameter must be on the same mesh.");
  static_assert((std::is_same_v<typename Ps::element_type, T> && ...),
                "spmd::ddp: every parameter must have the same element type (a bucket is one "
                "collective of one type).");
  static_assert((Ps::layout_type::nominal_spec().placements[DpDim].is_replicate() && ...),
                "spmd::ddp: every parameter must be Replicate on the data-parallel mesh dim (DDP "
                "keeps a whole copy of each parameter on every data-parallel rank).");
  static_assert((Ps::grad_layout::nominal_spec().placements[DpDim].is_replicate() && ...),
                "spmd::ddp: every parameter's gradient placements must be Replicate on the "
                "data-parallel mesh dim (DDP reduces the gradient into it); make the parameters "
                "with requires_grad and no grad_placements.");
  static_assert(((Ps::extents_type::is_static()) && ...), "spmd::ddp: parameters need static extents.");

  static constexpr std::size_t n = sizeof...(Ps);
  static constexpr std::array<int, n> bucket_of = dp_detail::assign_buckets<n>(
      {static_cast<std::size_t>(dp_detail::max_local_elements<typename Ps::layout_type>()) * sizeof(T)...},
      BucketBytes);

  /// The gradient placements of params()'s views: Partial(sum) on dp.
  template <class V>
  using pending_placements = dp_detail::replace_at<typename V::grad_placements, DpDim, partial<reduce_op::sum>>;
  template <class V>
  using view_type = variable<T, typename V::layout_type, B, pending_placements<V>>;
  template <class V>
  using pending_type = typename view_type<V>::grad_type;

  template <class Is>
  struct bucket_type_of;
  template <class... I>
  struct bucket_type_of<boost::mp11::mp_list<I...>> {
    using params = std::tuple<Ps...>;
    using type = dp_detail::grad_bucket<
        to<typename std::tuple_element_t<I::value, params>::grad_placements...>,
        std::tuple<pending_type<std::tuple_element_t<I::value, params>>...>,
        std::tuple<std::tuple_element_t<I::value, params>...>>;
  };

 public:
  /// Number of buckets, and so of all_reduces per training step.
  static constexpr int buckets = [] {
    int most = 0;
    for (int k : bucket_of) most = most > k ? most : k;
    return most + 1;
  }();
  /// The bucket of parameter I (0: the first to fill, holding the last parameters).
  template <std::size_t I>
  static constexpr int bucket_of_param = bucket_of[I];

 private:
  /// Number of parameters in bucket K, and their indices (increasing).
  static constexpr std::size_t count_in(std::size_t k) {
    std::size_t c = 0;
    for (int b : bucket_of) c += static_cast<std::size_t>(b) == k;
    return c;
  }
  template <std::size_t K>
  static constexpr std::array<std::size_t, count_in(K)> member_indices() {
    std::array<std::size_t, count_in(K)> a{};
    std::size_t c = 0;
    for (std::size_t j = 0; j < n; ++j)
      if (static_cast<std::size_t>(bucket_of[j]) == K) a[c++] = j;
    return a;
  }
  template <std::size_t K, class = std::make_index_sequence<count_in(K)>>
  struct members_of;
  template <std::size_t K, std::size_t... J>
  struct members_of<K, std::index_sequence<J...>> {
    using type = boost::mp11::mp_list<std::integral_constant<std::size_t, member_indices<K>()[J]>...>;
  };
  template <std::size_t K>
  using bucket_members = typename members_of<K>::type;
  template <std::size_t K>
  using bucket_t = typename bucket_type_of<bucket_members<K>>::type;

  template <std::size_t... K>
  static auto bucket_tuple(std::index_sequence<K...>) -> std::tuple<std::shared_ptr<bucket_t<K>>...>;
  using buckets_type = decltype(bucket_tuple(std::make_index_sequence<static_cast<std::size_t>(buckets)>{}));

  /// Parameter I's position in its bucket.
  template <std::size_t I>
  static constexpr std::size_t position() {
    std::size_t pos = 0;
    for (std::size_t j = 0; j < I; ++j) pos += bucket_of[j] == bucket_of[I];
    return pos;
  }

 public:
  /// The collectives of one training step: one all_reduce per bucket (none on a dp dim of 1).
  /// An int: a constant over a static mesh, read on the bound sizes over a dynamic one.
  struct per_step_count {
    constexpr operator int() const {  // NOLINT(google-explicit-constructor): reads as the count
      int total = 0;
      [&]<std::size_t... K>(std::index_sequence<K...>) {
        ((total += bucket_t<K>::collectives()), ...);
      }(std::make_index_sequence<static_cast<std::size_t>(buckets)>{});
      return total;
    }
  };
  static constexpr per_step_count collectives_per_step{};

  explicit ddp_model(Ps... params) : params_(std::move(params)...) {
    make_buckets(std::make_index_sequence<static_cast<std::size_t>(buckets)>{});
  }

  /// This step's views of the parameters (see the header comment): compute with them.
  auto params() const {
    return [&]<std::size_t... I>(std::index_sequence<I...>) {
      return std::make_tuple(view<I>()...);
    }(std::index_sequence_for<Ps...>{});
  }
  /// The parameters themselves (for the optimizer).
  const std::tuple<Ps...>& parameters() const { return params_; }

 private:
  template <std::size_t... K>
  void make_buckets(std::index_sequence<K...>) {
    ((std::get<K>(buckets_) = std::make_shared<bucket_t<K>>(targets_of<K>(bucket_members<K>{}))), ...);
  }
  template <std::size_t K, class... I>
  auto targets_of(boost::mp11::mp_list<I...>) const {
    return std::make_tuple(std::get<I::value>(params_)...);
  }

  template <std::size_t I>
  auto view() const {
    const auto& p = std::get<I>(params_);
    using V = std::remove_cvref_t<decltype(p)>;
    using W = view_type<V>;
    if (!p.node() || !is_grad_enabled()) return W(detail::internal_t{}, p.value_ptr(), nullptr);
    auto bucket = std::get<static_cast<std::size_t>(bucket_of[I])>(buckets_);
    auto fn = [bucket](const typename W::grad_type& g) { bucket->template arrive<position<I>()>(g); };
    using N = op_node<T, typename W::grad_layout, B, decltype(fn)>;
    counted_ref<typename W::node_type> node = make_counted<N>("ddp", node_inputs{p.node()}, std::move(fn));
    return W(detail::internal_t{}, p.value_ptr(), std::move(node));
  }

  std::tuple<Ps...> params_;
  buckets_type buckets_;
};

/// DDP over mesh dim DpDim with buckets of at most BucketBytes (per rank) of gradient.
template <int DpDim, std::size_t BucketBytes = default_bucket_bytes, class... Ps>
ddp_model<DpDim, BucketBytes, Ps...> ddp(Ps... params) {
  return ddp_model<DpDim, BucketBytes, Ps...>(std::move(params)...);
}

}  // namespace spmd::runtime
