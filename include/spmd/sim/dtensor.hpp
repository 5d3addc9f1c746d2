// spmd/sim/dtensor.hpp — DTensor's API over the simulation: every rank in one process.
//
//   using M = spmd::mesh<2, 4>;
//   using L = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::replicate>,
//                          spmd::extents<10, 5>>;
//   auto x = spmd::sim::distribute_tensor<L>(global);            // std::vector<float>, 50 values
//   auto y = spmd::sim::redistribute<spmd::placements<spmd::replicate, spmd::shard<1>>>(x);
//   y.local(3);                                                  // rank 3's local, a view
//   y.full_tensor();                                             // == global
//   auto z = spmd::sim::redistribute<P>(x, spmd::sim::forward_dtype<spmd::bfloat16>);
//
// `redistribute` runs `spmd::plan_of<Src, Dst, T>::value()` (spmd/plan/typed_plan.hpp):
// with static extents through the compile-time path (schedules built by the compiler,
// unrolled per rank and op), with dynamic extents or more than 32 ranks through the runtime
// path (schedules built once per thread and shape). A second template argument replaces the planner: any
// `template <class Src, class Dst, class T>` whose `value()` is a constexpr spmd::plan.
//
// Semantics chosen where DTensor leaves room:
//   - distribute_tensor with Partial placements splits every value so that no rank holds
//     the global one and the reduction gives it back exactly (table in distribute.hpp);
//   - factories (zeros, ones, full, arange) give the asked *global* value: Partial
//     placements get what a Replicate -> Partial partition leaves (sum, product: the first
//     member of each group holds the value, the others the identity; avg, max, min: all);
//   - full_tensor reduces Partial placements in group order and reads each block from the
//     ranks at coordinate 0 of the Replicate dims; it does not change the dtensor;
//   - a rank outside the mesh holds an empty local (local(), to_local()).
#pragma once

#include <cstddef>
#include <cstring>
#include <map>
#include <ranges>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/layout.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/typed_plan.hpp"
#include "spmd/sim/distribute.hpp"
#include "spmd/sim/element.hpp"
#include "spmd/sim/execute.hpp"
#include "spmd/sim/host_tensor.hpp"
#include "spmd/sim/local_set.hpp"
#include "spmd/sim/view.hpp"


namespace spmd::sim {

// ---------------------------------------------------------------------------
// Plans
// ---------------------------------------------------------------------------

/// The planner redistribute uses unless told otherwise (spmd/plan/typed_plan.hpp).
template <class Src, class Dst, class T>
using default_plan_of = spmd::plan_of<Src, Dst, T>;

namespace detail {
/// Evaluates a provider's plan once per provider type.
template <class Provider>
struct plan_holder {
  static constexpr plan value = Provider::value();
};

/// The plan leads from Src's blocks to Dst's (its ends may differ from the layouts on mesh
/// dims of size 1, which hold the same blocks).
template <class Holder, class Src, class Dst>
constexpr bool plan_connects() {
  constexpr const plan& p = Holder::value;
  if (p.steps.size() == 0) return same_blocks(Src::spec(), Dst::spec());
  return same_blocks(p.steps[0].from, Src::spec()) &&
         same_blocks(p.steps[p.steps.size() - 1].to, Dst::spec());
}

struct internal_t {};
}  // namespace detail

/// Tag: communicate in element type U (DTensor's forward_dtype).
template <element U>
struct forward_dtype_t {};
template <element U>
inline constexpr forward_dtype_t<U> forward_dtype{};

template <element T, class Layout>
class dtensor;

template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
          element T, class L>
auto redistribute(const dtensor<T, L>& x);
template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
          element T, class L>
auto redistribute(dtensor<T, L>&& x);
template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
          element T, class L, element U>
auto redistribute(const dtensor<T, L>& x, forward_dtype_t<U>);

// ---------------------------------------------------------------------------
// dtensor
// ---------------------------------------------------------------------------

/// A tensor sharded by a typed layout, every rank's local in this process.
/// Invariant: rank at mesh index i holds a local of exactly box_at(spec, global, coord(i)).
template <element T, class Layout>
class dtensor {
  static_assert(!std::is_integral_v<T> || !holds_partial(Layout::spec().placements, reduce_op::avg),
                "spmd: P(avg) needs a floating-point element type: the average of integers is not "
                "an integer (torch.mean refuses integer tensors); hold P(sum) and divide.");

 public:
  using value_type = T;
  using layout_type = Layout;
  using mesh_type = typename Layout::mesh_type;
  using placements_type = typename Layout::placements_type;
  using extents_type = typename Layout::extents_type;
  static constexpr std::size_t rank = Layout::rank;

  /// (Internal: the locals must match the layout.)
  dtensor(detail::internal_t, const Layout& layout, local_set<T> locals)
      : layout_(layout), locals_(std::move(locals)) {}

  const Layout& layout() const { return layout_; }
  /// The global shape.
  dims<rank> shape() const { return layout_.global_shape(); }

  /// The local tensor of `mesh_rank` (a rank id); an empty view for a rank outside the mesh.
  strided_view<T> local(index_t mesh_rank) {
    const index_t i = mesh_type::index_of(mesh_rank);
    if (i < 0) return {nullptr, empty_shape()};
    return locals_.view(i);
  }
  strided_view<const T> local(index_t mesh_rank) const {
    const index_t i = mesh_type::index_of(mesh_rank);
    if (i < 0) return {nullptr, empty_shape()};
    return locals_.view(i);
  }
  /// A copy of `mesh_rank`'s local.
  host_tensor<T> to_local(index_t mesh_rank) const {
    const strided_view<const T> v = local(mesh_rank);
    host_tensor<T> t;
    t.shape.assign(v.extents().begin(), v.extents().end());
    t.data.assign(v.data(), v.data() + v.size());
    return t;
  }

  /// The global tensor, row-major; Partial placements reduced (the dtensor is unchanged).
  std::vector<T> full_tensor() const {
    return sim::full_tensor(locals_, Layout::spec(), layout_.extents().to_vec());
  }

  /// Every rank's local, by mesh index.
  const local_set<T>& locals() const& { return locals_; }
  local_set<T>&& locals() && { return std::move(locals_); }

  template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of>
  auto redistribute() const& {
    return sim::redistribute<NewPlacements, PlanOf>(*this);
  }
  template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of>
  auto redistribute() && {
    return sim::redistribute<NewPlacements, PlanOf>(std::move(*this));
  }
  template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
            element U>
  auto redistribute(forward_dtype_t<U> f) const {
    return sim::redistribute<NewPlacements, PlanOf>(*this, f);
  }

 private:
  static shape_vec empty_shape() { return shape_vec{{}, static_cast<int>(rank)}; }

  [[no_unique_address]] Layout layout_;
  local_set<T> locals_;
};

// ---------------------------------------------------------------------------
// Construction
// ---------------------------------------------------------------------------

/// Shard a global row-major tensor (any contiguous range of elements) by `Layout`. Partial
/// placements get a split that reduces exactly to the global values (distribute.hpp).
template <class Layout, class Range>
  requires std::ranges::contiguous_range<Range> && element<std::ranges::range_value_t<Range>>
auto distribute_tensor(const Range& global, const Layout& layout = Layout{}) {
  using T = std::ranges::range_value_t<Range>;
  const std::span<const T> data(std::ranges::data(global), std::ranges::size(global));
  return dtensor<T, Layout>(detail::internal_t{}, layout,
                            distribute<T>(data, Layout::spec(), layout.extents().to_vec()));
}

namespace detail {
template <class T, class Layout, class Get>
dtensor<T, Layout> from_local_impl(const Layout& layout, Get&& get) {
  using M = typename Layout::mesh_type;
  const shape_vec global = layout.extents().to_vec();
  local_set<T> locals(M::size);
  for (index_t i = 0; i < M::size; ++i) {
    const index_t r = M::rank_at(i);
    const host_tensor<T>& t = get(i, r);
    const shape_vec want = box_at(Layout::spec(), global, unravel(M::shape_vec(), i)).shape;
    shape_vec got{};
    for (index_t e : t.shape) {
      if (got.size() == max_tensor_dims) break;
      got.push_back(e);
    }
    const std::string who = "spmd::sim::from_local: rank " + std::to_string(r);
    if (static_cast<int>(t.shape.size()) != want.size())
      throw std::invalid_argument(who + " has a local of " + std::to_string(t.shape.size()) +
                                  " dims, the layout needs " + std::to_string(want.size()) +
                                  " (" + shape_text(want) + ")");
    if (!(got == want)) {
      int d = 0;
      while (got[d] == want[d]) ++d;
      throw std::invalid_argument(who + " has local shape " + shape_text(got) +
                                  ", the layout needs " + shape_text(want) + " (dim " +
                                  std::to_string(d) + " differs)");
    }
    if (static_cast<index_t>(t.data.size()) != shape_elems(want))
      throw std::invalid_argument(who + "'s local holds " + std::to_string(t.data.size()) +
                                  " elements, its shape " + shape_text(want) + " needs " +
                                  std::to_string(shape_elems(want)));
    locals.assign(i, want);
    if (!t.data.empty())
      std::memcpy(locals.data(i), t.data.data(), t.data.size() * sizeof(T));
  }
  return dtensor<T, Layout>(internal_t{}, layout, std::move(locals));
}
}  // namespace detail

/// A dtensor from every rank's local, `locals[i]` being the local of the rank at mesh index i
/// (Mesh::rank_at(i)). Every local's shape is checked against the layout: a mismatch throws
/// std::invalid_argument naming the rank and the dim.
template <class Layout, element T>
dtensor<T, Layout> from_local(std::span<const host_tensor<T>> locals,
                              const Layout& layout = Layout{}) {
  using M = typename Layout::mesh_type;
  if (static_cast<index_t>(locals.size()) != M::size)
    throw std::invalid_argument("spmd::sim::from_local: got " + std::to_string(locals.size()) +
                                " locals, the mesh has " + std::to_string(M::size) + " ranks");
  return detail::from_local_impl<T>(
      layout, [&](index_t i, index_t) -> const host_tensor<T>& {
        return locals[static_cast<std::size_t>(i)];
      });
}
template <class Layout, element T>
dtensor<T, Layout> from_local(const std::vector<host_tensor<T>>& locals,
                              const Layout& layout = Layout{}) {
  return from_local<Layout>(std::span<const host_tensor<T>>(locals), layout);
}
/// The same, keyed by rank id; the map must hold exactly the mesh's ranks.
template <class Layout, element T>
dtensor<T, Layout> from_local(const std::map<index_t, host_tensor<T>>& locals,
                              const Layout& layout = Layout{}) {
  using M = typename Layout::mesh_type;
  for (const auto& [r, t] : locals)
    if (!M::contains(r))
      throw std::invalid_argument("spmd::sim::from_local: rank " + std::to_string(r) +
                                  " is not in the mesh");
  return detail::from_local_impl<T>(layout, [&](index_t, index_t r) -> const host_tensor<T>& {
    const auto it = locals.find(r);
    if (it == locals.end())
      throw std::invalid_argument("spmd::sim::from_local: no local for rank " +
                                  std::to_string(r));
    return it->second;
  });
}

// ---------------------------------------------------------------------------
// Factories. A Partial layout gets what a Replicate -> Partial partition would leave: for
// sum and product the first member of each partial group holds the value and the others
// the identity; for avg, max and min every rank holds it. The global value is the one asked.
// ---------------------------------------------------------------------------

/// Locals with uninitialised elements.
template <element T, class Layout>
dtensor<T, Layout> empty(const Layout& layout = Layout{}) {
  using M = typename Layout::mesh_type;
  const shape_vec global = layout.extents().to_vec();
  local_set<T> locals(M::size);
  for (index_t i = 0; i < M::size; ++i)
    locals.assign(i, box_at(Layout::spec(), global, unravel(M::shape_vec(), i)).shape);
  return dtensor<T, Layout>(detail::internal_t{}, layout, std::move(locals));
}
namespace detail {
// The factories' element functions are named types, not lambdas: a lambda in a function
// template is a new type for every layout, and so would be every instantiation of
// generate() it reaches. These are one per element type.
template <class T>
struct constant_value {
  T value;
  T operator()(index_t) const { return value; }
};
template <class T>
struct index_value {
  T operator()(index_t g) const { return T(g); }
};
}  // namespace detail

/// Every element `value`.
template <element T, class Layout>
dtensor<T, Layout> full(T value, const Layout& layout = Layout{}) {
  return dtensor<T, Layout>(
      detail::internal_t{}, layout,
      generate<T>(Layout::spec(), layout.extents().to_vec(), detail::constant_value<T>{value}));
}
template <element T, class Layout>
dtensor<T, Layout> zeros(const Layout& layout = Layout{}) {
  return full<T>(T(0), layout);
}
template <element T, class Layout>
dtensor<T, Layout> ones(const Layout& layout = Layout{}) {
  return full<T>(T(1), layout);
}
/// Element = its global row-major index (0, 1, 2, ... over the global tensor), sharded.
template <element T, class Layout>
dtensor<T, Layout> arange(const Layout& layout = Layout{}) {
  return dtensor<T, Layout>(
      detail::internal_t{}, layout,
      generate<T>(Layout::spec(), layout.extents().to_vec(), detail::index_value<T>{}));
}

// ---------------------------------------------------------------------------
// Redistribute
// ---------------------------------------------------------------------------

namespace detail {
template <class NewPlacements, class L>
using target_layout =
    spmd::layout<typename L::mesh_type, NewPlacements, typename L::extents_type>;

template <class T, class Holder, class Ext, class In>
local_set<T> run_plan(const Ext& ext, In&& in) {
  if constexpr (Ext::is_static() && Holder::value.steps.size() > 0 &&
                Holder::value.steps[0].from.mesh_size() <= static_ranks_limit) {
    return execute_static<T, Holder, Ext>(std::forward<In>(in));
  } else {  // schedules built at run time, once per shape
    const shape_vec global = ext.to_vec();
    return run_schedules<T>(Holder::value, cached_schedules<Holder>(global), global,
                            std::forward<In>(in));
  }
}

template <class To, class From>
local_set<To> cast_locals(const local_set<From>& in) {
  local_set<To> out(in.ranks());
  for (index_t r = 0; r < in.ranks(); ++r) {
    out.assign(r, in.shape(r));
    const From* s = in.data(r);
    To* d = out.data(r);
    const index_t n = in.size(r);
    for (index_t i = 0; i < n; ++i) d[i] = convert<To>(s[i]);
  }
  return out;
}
}  // namespace detail

namespace detail {
/// Runs PlanOf<L, Dst, W>::value() on locals of element type W (checked at compile time to
/// lead from L to Dst): the one body of the redistribute overloads below.
template <class Dst, template <class, class, class> class PlanOf, element W, class L, class Locals>
local_set<W> run_to(const L& layout, Locals&& locals) {
  using H = plan_holder<PlanOf<L, Dst, W>>;
  static_assert(plan_connects<H, L, Dst>(),
                "spmd::sim::redistribute: the plan does not lead from the source layout to the "
                "target layout.");
  return run_plan<W, H>(layout.extents(), std::forward<Locals>(locals));
}
}  // namespace detail

/// x in the layout with placements NewPlacements (same mesh and extents), by the plan
/// PlanOf<Src, Dst, T>::value(). x is unchanged.
template <class NewPlacements, template <class, class, class> class PlanOf, element T, class L>
auto redistribute(const dtensor<T, L>& x) {
  using Dst = detail::target_layout<NewPlacements, L>;
  return dtensor<T, Dst>(detail::internal_t{}, Dst{x.layout().extents()},
                         detail::run_to<Dst, PlanOf, T>(x.layout(), x.locals()));
}
/// The same, reusing x's buffers.
template <class NewPlacements, template <class, class, class> class PlanOf, element T, class L>
auto redistribute(dtensor<T, L>&& x) {
  using Dst = detail::target_layout<NewPlacements, L>;
  const L layout = x.layout();
  return dtensor<T, Dst>(detail::internal_t{}, Dst{layout.extents()},
                         detail::run_to<Dst, PlanOf, T>(layout, std::move(x).locals()));
}
/// The same, communicating in U (DTensor's forward_dtype): every local is cast to U, the
/// plan PlanOf<Src, Dst, U> runs in U, and the result is cast back to T.
template <class NewPlacements, template <class, class, class> class PlanOf, element T, class L,
          element U>
auto redistribute(const dtensor<T, L>& x, forward_dtype_t<U>) {
  if constexpr (std::is_same_v<T, U>) {
    return redistribute<NewPlacements, PlanOf>(x);
  } else {
    using Dst = detail::target_layout<NewPlacements, L>;
    const local_set<U> moved =
        detail::run_to<Dst, PlanOf, U>(x.layout(), detail::cast_locals<U>(x.locals()));
    return dtensor<T, Dst>(detail::internal_t{}, Dst{x.layout().extents()},
                           detail::cast_locals<T>(moved));
  }
}

}  // namespace spmd::sim
