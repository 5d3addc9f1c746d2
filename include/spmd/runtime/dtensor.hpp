// spmd/runtime/dtensor.hpp — DTensor's API, written once over any backend.
//
//   using M = spmd::mesh<2, 4>;
//   using L = spmd::layout<M, spmd::placements<spmd::shard<0>, spmd::replicate>,
//                          spmd::extents<10, 5>>;
//   auto x = spmd::sim::distribute_tensor<L>(global);            // or spmd::mpi::...
//   auto y = spmd::sim::redistribute<spmd::placements<spmd::replicate, spmd::shard<1>>>(x);
//   y.local(3);                                                  // rank 3's local, a view
//   y.full_tensor();                                             // == global
//   auto z = spmd::sim::redistribute<P>(x, spmd::sim::forward_dtype<spmd::bfloat16>);
//
// `dtensor<T, Layout, B>` holds the locals of the ranks backend B keeps in this process (all
// of them in the simulation, one under MPI: see runtime/backend.hpp for what a backend
// supplies). `redistribute` runs `spmd::plan_of<Src, Dst, T>::value()`
// (spmd/plan/typed_plan.hpp) through B: the simulation lowers static extents at compile time
// and unrolls per rank and op; every backend can take the runtime path (schedules built once
// per thread and shape). A second template argument replaces the planner: any
// `template <class Src, class Dst, class T>` whose `value()` is a constexpr spmd::plan.
//
// Semantics chosen where DTensor leaves room:
//   - distribute_tensor with Partial placements splits every value so that no rank holds
//     the global one and the reduction gives it back exactly (table in distribute.hpp);
//     every process slices its own ranks' blocks from its copy of the global tensor
//     (DTensor's src_data_rank=None: no communication, so every process must pass the same);
//   - factories (zeros, ones, full, arange) give the asked *global* value: Partial
//     placements get what a Replicate -> Partial partition leaves (sum, product: the first
//     member of each group holds the value, the others the identity; avg, max, min: all);
//   - full_tensor reduces Partial placements in group order and reads each block from the
//     ranks at coordinate 0 of the Replicate dims; it does not change the dtensor; on a
//     backend with one rank per process every process gets the whole tensor;
//   - a rank outside the mesh holds an empty local (local(), to_local()).
#pragma once

#include <cstddef>
#include <cstring>
#include <map>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "spmd/core/fixed_string.hpp"
#include "spmd/core/layout.hpp"
#include "spmd/plan/plan.hpp"
#include "spmd/plan/dynamic_plan.hpp"
#include "spmd/plan/typed_plan.hpp"
#include "spmd/host/distribute.hpp"
#include "spmd/host/element.hpp"
#include "spmd/host/host_tensor.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/view.hpp"
#include "spmd/random/generator.hpp"
#include "spmd/runtime/backend.hpp"
#include "spmd/runtime/observe/hooks.hpp"


namespace spmd::runtime {

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

/// The errors of a rank's local asked for where it is not, out of line and not templated:
/// written in dtensor they were compiled again for every dtensor type (165 copies, 300 KB of
/// the typed suite's code at -O0).
[[noreturn]] inline void throw_negative_rank(std::string_view backend, index_t mesh_rank) {
  throw std::out_of_range("spmd::" + std::string(backend) + ": rank " + std::to_string(mesh_rank) +
                          " is negative");
}
[[noreturn]] inline void throw_rank_elsewhere(std::string_view backend, index_t mesh_rank, held_range h,
                                              index_t (*rank_at)(index_t)) {
  std::string held;
  for (const index_t i : h.indices())
    held += (held.empty() ? "rank " : ", ") + std::to_string(rank_at(i));
  throw std::out_of_range("spmd::" + std::string(backend) + ": rank " + std::to_string(mesh_rank) +
                          "'s local lives in another process; this one holds " +
                          (held.empty() ? std::string("none") : held));
}
[[noreturn]] inline void throw_several_held(std::string_view backend) {
  throw std::logic_error("spmd::" + std::string(backend) +
                         ": this process holds every rank's local; name the rank (local(rank))");
}
}  // namespace detail

/// The random factories (rand, randn) over backend B: runtime/random.hpp.
template <class B>
struct random_factories;
/// A struct of tensors distributed member by member (runtime/module.hpp).
template <class S, template <fixed_string, class> class Partition, class Mesh, class B>
class distributed_module;
template <template <fixed_string, class> class Partition, class Mesh, class B, class S>
distributed_module<S, Partition, Mesh, B> distribute_module_on(const S& module);

/// Tag: communicate in element type U (DTensor's forward_dtype).
template <element U>
struct forward_dtype_t {};
template <element U>
inline constexpr forward_dtype_t<U> forward_dtype{};

template <element T, class Layout, class B>
class dtensor;
template <element T, class Mesh, int TpDim, index_t In, index_t Out, class B>
struct column_parallel_linear;  // runtime/ops/tp.hpp
template <element T, class Mesh, int TpDim, index_t In, index_t Out, class B>
struct row_parallel_linear;

template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
          element T, class L, class B>
auto redistribute(const dtensor<T, L, B>& x);
template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
          element T, class L, class B>
auto redistribute(dtensor<T, L, B>&& x);
template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
          element T, class L, class B, element U>
auto redistribute(const dtensor<T, L, B>& x, forward_dtype_t<U>);

// ---------------------------------------------------------------------------
// dtensor
// ---------------------------------------------------------------------------

/// A tensor sharded by a typed layout; this process holds the locals backend B gives it.
/// Invariant: every held mesh index i has a local of exactly box_at(spec, global, coord(i)).
template <element T, class Layout, class B>
class dtensor {
  static_assert(backend_type<B>,
                "spmd::runtime::dtensor: the third argument is not a backend type (it needs a "
                "`name` and `held<Mesh>()`; runtime/backend.hpp lists what a backend supplies).");
  static_assert(!std::is_integral_v<T> || !holds_partial(Layout::nominal_spec().placements, reduce_op::avg),
                "spmd: P(avg) needs a floating-point element type: the average of integers is not "
                "an integer (torch.mean refuses integer tensors); hold P(sum) and divide.");

 public:
  using value_type = T;
  using layout_type = Layout;
  using backend_type = B;
  using mesh_type = typename Layout::mesh_type;
  using placements_type = typename Layout::placements_type;
  using extents_type = typename Layout::extents_type;
  static constexpr std::size_t rank = Layout::rank;

  /// Where B keeps the locals: host::local_set<T> for host backends.
  using storage_type = storage_t<B, T>;

  /// (Internal: the locals must match the layout.)
  dtensor(detail::internal_t, const Layout& layout, storage_type locals)
      : layout_(layout), locals_(std::move(locals)) {}
  /// (Internal: the locals made in place from `args`, to be filled through
  /// locals(internal_t): no moved-from storage left to destroy, as an operator's output.)
  template <class... A>
  dtensor(detail::internal_t, std::in_place_t, const Layout& layout, A&&... args)
      : layout_(layout), locals_(std::forward<A>(args)...) {}

  const Layout& layout() const { return layout_; }
  /// The global shape.
  dims<rank> shape() const { return layout_.global_shape(); }

  /// The local tensor of `mesh_rank` (a rank id); an empty view for a rank outside the mesh.
  /// On a backend with a process per rank, only this process's rank can be read (another
  /// throws std::out_of_range naming it).
  /// On a device backend the view is of device memory (a device_view).
  auto local(index_t mesh_rank) {
    const index_t i = held_index(mesh_rank);
    if (i < 0) return decltype(locals_.view(0)){nullptr, empty_shape()};
    return locals_.view(i);
  }
  auto local(index_t mesh_rank) const {
    const index_t i = held_index(mesh_rank);
    if (i < 0) return decltype(locals_.view(0)){nullptr, empty_shape()};
    return locals_.view(i);
  }
  /// This process's local (DTensor's to_local()): for backends with a rank per process;
  /// empty when this process is outside the mesh.
  auto local() { return local_of_process(*this); }
  auto local() const { return local_of_process(*this); }

  /// A host copy of `mesh_rank`'s local.
  host_tensor<T> to_local(index_t mesh_rank) const {
    if constexpr (host_memory<B>) {
      return copy_of(local(mesh_rank));
    } else {
      const index_t i = held_index(mesh_rank);
      if (i < 0) return host_tensor<T>{std::vector<index_t>(rank, 0), {}};
      return B::to_host(locals_, i);
    }
  }
  /// A host copy of this process's local.
  host_tensor<T> to_local() const {
    const held_range h = locals_.held_ranks();
    if (h.count() == 1) return to_local(mesh_type::rank_at(h.lo));
    (void)local();  // throws where this process holds several ranks
    return host_tensor<T>{std::vector<index_t>(rank, 0), {}};  // outside the mesh: empty
  }

  /// The global tensor, row-major; Partial placements reduced (the dtensor is unchanged).
  /// Empty in a process outside the mesh (it holds no part of the tensor).
  std::vector<T> full_tensor() const {
    if (locals_.held_ranks().count() == 0) return {};
    const shape_vec global = layout_.extents().to_vec();
    return host::full_tensor<T, host::partial_reduces(Layout::nominal_spec())>(
        B::template gather_all<T, mesh_type>(locals_, Layout::spec(), global), Layout::spec(), global);
  }

  /// Bytes of memory this process's locals take. In the simulation ranks whose locals are
  /// equal by construction (replicas) share one buffer, counted once; writing one rank's
  /// local (local(rank)) gives it its own copy first.
  std::size_t bytes_held() const { return locals_.bytes_held(); }

  /// The locals this process holds, by mesh index.
  const storage_type& locals() const& { return locals_; }
  storage_type&& locals() && { return std::move(locals_); }
  /// (Internal: in-place operators write the locals, keeping their shapes.)
  storage_type& locals(detail::internal_t) & { return locals_; }

  template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of>
  auto redistribute() const& {
    return runtime::redistribute<NewPlacements, PlanOf>(*this);
  }
  template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of>
  auto redistribute() && {
    return runtime::redistribute<NewPlacements, PlanOf>(std::move(*this));
  }
  template <class NewPlacements, template <class, class, class> class PlanOf = default_plan_of,
            element U>
  auto redistribute(forward_dtype_t<U> f) const {
    return runtime::redistribute<NewPlacements, PlanOf>(*this, f);
  }

 private:
  static shape_vec empty_shape() { return shape_vec{{}, static_cast<int>(rank)}; }
  static host_tensor<T> copy_of(strided_view<const T> v) {
    host_tensor<T> t;
    t.shape.assign(v.extents().begin(), v.extents().end());
    t.data.assign(v.data(), v.data() + v.size());
    return t;
  }
  /// Mesh index of mesh_rank, or -1 outside the mesh; throws for a rank held elsewhere.
  index_t held_index(index_t mesh_rank) const {
    // A rank outside the mesh holds an empty local; a negative one is no process's rank.
    if (mesh_rank < 0) detail::throw_negative_rank(B::name, mesh_rank);
    const index_t i = mesh_type::index_of(mesh_rank);
    if (i >= 0 && !locals_.holds(i))
      detail::throw_rank_elsewhere(B::name, mesh_rank, locals_.held_ranks(), &mesh_type::rank_at);
    return i;
  }
  template <class Self>
  static auto local_of_process(Self& self) {
    const held_range h = self.locals_.held_ranks();
    if (h.count() > 1) detail::throw_several_held(B::name);
    if (h.count() == 0) return decltype(self.locals_.view(0)){nullptr, empty_shape()};
    return self.locals_.view(h.lo);
  }

  [[no_unique_address]] Layout layout_;
  storage_type locals_;
};

// ---------------------------------------------------------------------------
// Construction, through backend B: runtime::factories<B>, which every backend's namespace
// exposes as spmd::<backend>::distribute_tensor, empty, full, zeros, ones, arange (and rand,
// randn: runtime/random.hpp; distribute_module: runtime/module.hpp).
// ---------------------------------------------------------------------------

namespace detail {
/// Replicate on every dim of Mesh.
template <std::size_t>
using replicate_at = replicate;
template <class Mesh, class = std::make_index_sequence<Mesh::ndim>>
struct all_replicate;
template <class Mesh, std::size_t... I>
struct all_replicate<Mesh, std::index_sequence<I...>> {
  using type = placements<replicate_at<I>...>;
};
/// Partial(Op) on every dim of Mesh.
template <std::size_t, reduce_op Op>
using partial_at = partial<Op>;
template <class Mesh, reduce_op Op, class = std::make_index_sequence<Mesh::ndim>>
struct all_partial;
template <class Mesh, reduce_op Op, std::size_t... I>
struct all_partial<Mesh, Op, std::index_sequence<I...>> {
  using type = placements<partial_at<I, Op>...>;
};

// The factories' element functions are named types, not lambdas: a lambda in a function
// template is a new type for every layout, and so would be every instantiation of
// generate() it reaches. These are one per element type.
template <class T>
struct constant_value {
  static constexpr bool constant = true;  // generate() fills, not walks the indices
  T value;
  T operator()(index_t) const { return value; }
};
template <class T>
struct index_value {
  T operator()(index_t g) const { return T(g); }
};

/// Checks a local against the block the layout gives it; throws std::invalid_argument
/// naming the rank and the dim.
template <class T>
void check_local(const host_tensor<T>& t, const shape_vec& want, index_t r, const char* who_fn) {
  shape_vec got{};
  for (index_t e : t.shape) {
    if (got.size() == max_tensor_dims) break;
    got.push_back(e);
  }
  const std::string who = std::string(who_fn) + ": rank " + std::to_string(r);
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
}
}  // namespace detail

/// Host locals as backend B keeps them (moved to device memory on a device backend).
template <class B, class T>
storage_t<B, T> to_storage(local_set<T>&& host) {
  if constexpr (host_memory<B>) return std::move(host);
  else return B::from_host(std::move(host));
}

/// Whether backend B makes the factories' locals itself, in its own memory, rather than from
/// host locals: B::generate<T>(spec, global, held, value, index) gives the held ranks' blocks
/// of a tensor whose elements are `value`, or (index) their global row-major index, with
/// host::generate's rule on Partial placements (backends/cuda/device_factories.hpp).
template <class B, class T>
concept generates_locals = requires(const layout_spec& s, const shape_vec& g, held_range h, T v) {
  { B::template generate<T>(s, g, h, v, true) } -> std::same_as<storage_t<B, T>>;
};

template <class B>
struct factories {
  template <class Layout>
  static held_range held() {
    return B::template held<typename Layout::mesh_type>();
  }

  /// Shard a global row-major tensor (any contiguous range of elements) by `Layout`: each
  /// process keeps its ranks' blocks. Partial placements get a split that reduces exactly
  /// to the global values (distribute.hpp).
  template <class Layout, class Range>
    requires host::element_range<Range>
  static auto distribute_tensor(const Range& global, const Layout& layout = Layout{}) {
    using T = host::range_element_t<Range>;
    const std::span<const T> data(std::data(global), std::size(global));
    return dtensor<T, Layout, B>(detail::internal_t{}, layout,
                                 to_storage<B>(distribute<T, host::partial_reduces(Layout::nominal_spec())>(
                                     data, Layout::spec(), layout.extents().to_vec(), held<Layout>())));
  }

  /// A dtensor from the locals of the ranks this process holds: get(i, r) gives the local
  /// of mesh index i (rank id r), checked against the layout.
  template <class T, class Layout, class Get>
  static dtensor<T, Layout, B> from_local(const Layout& layout, Get&& get, const char* who) {
    using M = typename Layout::mesh_type;
    const shape_vec global = layout.extents().to_vec();
    local_set<T> locals(M::size, held<Layout>());
    for (const index_t i : locals.held()) {
      const index_t r = M::rank_at(i);
      const host_tensor<T>& t = get(i, r);
      const shape_vec want = box_at(Layout::spec(), global, unravel(M::shape_vec(), i)).shape;
      detail::check_local(t, want, r, who);
      locals.assign(i, want);
      if (!t.data.empty()) std::memcpy(locals.data(i), t.data.data(), t.data.size() * sizeof(T));
    }
    return dtensor<T, Layout, B>(detail::internal_t{}, layout, to_storage<B>(std::move(locals)));
  }

  // A Partial layout gets what a Replicate -> Partial partition would leave: for sum and
  // product the first member of each partial group holds the value and the others the
  // identity; for avg, max and min every rank holds it. The global value is the one asked.

  /// Locals with uninitialised elements.
  template <element T, class Layout>
  static dtensor<T, Layout, B> empty(const Layout& layout = Layout{}) {
    using M = typename Layout::mesh_type;
    const shape_vec global = layout.extents().to_vec();
    storage_t<B, T> locals(M::size, held<Layout>());
    for (const index_t i : locals.held())
      locals.assign(i, box_at(Layout::spec(), global, unravel(M::shape_vec(), i)).shape);
    return dtensor<T, Layout, B>(detail::internal_t{}, layout, std::move(locals));
  }
  /// Every element `value`.
  template <element T, class Layout>
  static dtensor<T, Layout, B> full(T value, const Layout& layout = Layout{}) {
    if constexpr (generates_locals<B, T>)
      return dtensor<T, Layout, B>(
          detail::internal_t{}, layout,
          B::template generate<T>(Layout::spec(), layout.extents().to_vec(), held<Layout>(), value, false));
    else
      return dtensor<T, Layout, B>(
          detail::internal_t{}, layout,
          to_storage<B>(generate<T>(Layout::spec(), layout.extents().to_vec(), detail::constant_value<T>{value},
                                    held<Layout>())));
  }
  /// Element = its global row-major index (0, 1, 2, ... over the global tensor), sharded.
  template <element T, class Layout>
  static dtensor<T, Layout, B> arange(const Layout& layout = Layout{}) {
    if constexpr (generates_locals<B, T>)
      return dtensor<T, Layout, B>(
          detail::internal_t{}, layout,
          B::template generate<T>(Layout::spec(), layout.extents().to_vec(), held<Layout>(), T(0), true));
    else
      return dtensor<T, Layout, B>(
          detail::internal_t{}, layout,
          to_storage<B>(generate<T>(Layout::spec(), layout.extents().to_vec(), detail::index_value<T>{},
                                    held<Layout>())));
  }
};

/// The factories as functions of a backend's namespace (`spmd::sim::zeros<float, L>()`),
/// and the backend's dtensor and TP block types:
/// a backend's header says SPMD_RUNTIME_BACKEND_API(its_backend_type) inside its namespace.
#define SPMD_RUNTIME_BACKEND_API(B)                                                          \
  template <::spmd::runtime::element T, class L>                                             \
  using dtensor = ::spmd::runtime::dtensor<T, L, B>;                                         \
  template <class Layout, class Range>                                                       \
    requires ::spmd::host::element_range<Range>                                              \
  auto distribute_tensor(const Range& global, const Layout& layout = Layout{}) {             \
    return ::spmd::runtime::factories<B>::template distribute_tensor<Layout>(global, layout); \
  }                                                                                          \
  template <::spmd::runtime::element T, class Layout>                                        \
  dtensor<T, Layout> empty(const Layout& layout = Layout{}) {                                \
    return ::spmd::runtime::factories<B>::template empty<T>(layout);                         \
  }                                                                                          \
  template <::spmd::runtime::element T, class Layout>                                        \
  dtensor<T, Layout> full(T value, const Layout& layout = Layout{}) {                        \
    return ::spmd::runtime::factories<B>::template full<T>(value, layout);                   \
  }                                                                                          \
  template <::spmd::runtime::element T, class Layout>                                        \
  dtensor<T, Layout> zeros(const Layout& layout = Layout{}) {                                \
    return ::spmd::runtime::factories<B>::template full<T>(T(0), layout);                    \
  }                                                                                          \
  template <::spmd::runtime::element T, class Layout>                                        \
  dtensor<T, Layout> ones(const Layout& layout = Layout{}) {                                 \
    return ::spmd::runtime::factories<B>::template full<T>(T(1), layout);                    \
  }                                                                                          \
  template <::spmd::runtime::element T, class Layout>                                        \
  dtensor<T, Layout> arange(const Layout& layout = Layout{}) {                               \
    return ::spmd::runtime::factories<B>::template arange<T>(layout);                        \
  }                                                                                          \
  template <::spmd::runtime::element T, class Layout>                                        \
  dtensor<T, Layout> rand(::spmd::generator& gen = ::spmd::default_generator(),              \
                          const Layout& layout = Layout{}) {                                 \
    return ::spmd::runtime::random_factories<B>::template rand<T>(gen, layout);              \
  }                                                                                          \
  template <::spmd::runtime::element T, class Layout>                                        \
  dtensor<T, Layout> randn(::spmd::generator& gen = ::spmd::default_generator(),             \
                           const Layout& layout = Layout{}) {                                \
    return ::spmd::runtime::random_factories<B>::template randn<T>(gen, layout);             \
  }                                                                                          \
  template <template <::spmd::fixed_string, class> class Partition, class Mesh, class S>      \
  ::spmd::runtime::distributed_module<S, Partition, Mesh, B> distribute_module(const S& module) { \
    return ::spmd::runtime::distribute_module_on<Partition, Mesh, B>(module);               \
  }                                                                                          \
  template <::spmd::runtime::element T, class Mesh, int TpDim, index_t In, index_t Out>      \
  using column_parallel_linear =                                                             \
      ::spmd::runtime::column_parallel_linear<T, Mesh, TpDim, In, Out, B>;                   \
  template <::spmd::runtime::element T, class Mesh, int TpDim, index_t In, index_t Out>      \
  using row_parallel_linear = ::spmd::runtime::row_parallel_linear<T, Mesh, TpDim, In, Out, B>; \
  static_assert(true, "")

// ---------------------------------------------------------------------------
// Redistribute
// ---------------------------------------------------------------------------

namespace detail {
template <class NewPlacements, class L>
using target_layout =
    spmd::layout<typename L::mesh_type, NewPlacements, typename L::extents_type>;

template <class To, class From>
local_set<To> cast_host(const local_set<From>& in) {
  local_set<To> out(in.ranks(), in.held_ranks());
  for (const index_t r : in.held()) {
    out.assign(r, in.shape(r));
    const From* s = in.data(r);
    To* d = out.data(r);
    const index_t n = in.size(r);
    for (index_t i = 0; i < n; ++i) d[i] = convert<To>(s[i]);
  }
  return out;
}

/// The locals in element type To, where backend B keeps them.
template <class To, class B, class From>
storage_t<B, To> cast_locals(const storage_t<B, From>& in) {
  if constexpr (host_memory<B>) return cast_host<To>(in);
  else return B::template cast<To>(in);
}

/// x with its elements converted to To (the same layout; x itself when To is its type).
template <class To, element T, class L, class B>
dtensor<To, L, B> cast_dtensor(const dtensor<T, L, B>& x) {
  if constexpr (std::is_same_v<To, T>) return x;
  else return dtensor<To, L, B>(internal_t{}, x.layout(), cast_locals<To, B, T>(x.locals()));
}

/// Runs PlanOf<L, Dst, W>::value() on locals of element type W (checked at compile time to
/// lead from L to Dst) through backend B: the one body of the redistribute overloads below.
template <class Dst, template <class, class, class> class PlanOf, element W, class B, class L,
          class Locals>
storage_t<B, W> run_to(const L& layout, Locals&& locals) {
  using M = typename L::mesh_type;
  if constexpr (!M::is_static) {
    // A mesh with a dynamic size: the same search at run time, once per bound shape.
    static_assert(std::is_same_v<PlanOf<L, Dst, W>, default_plan_of<L, Dst, W>>,
                  "spmd::redistribute: a planner of your own needs a mesh of static sizes (its plan is a "
                  "constant); over a dynamic mesh the built-in planner runs at run time.");
    using P = dynamic_plan_of<L, Dst, W>;
    static_assert(requires { &B::template run_plan_value<W, M, P, typename L::extents_type, Locals>; },
                  "spmd::redistribute: this backend does not run plans over a mesh with a dynamic size yet "
                  "(the simulation does).");
    const plan& p = P::value();
    if (observe::active()) [[unlikely]] {
      [[maybe_unused]] const timeline::span s = observe::on_redistribute<W>(
          p, L::spec(), Dst::spec(), layout.extents().to_vec(), B::template held<M>(), true);
      return B::template run_plan_value<W, M, P>(p, layout.extents(), std::forward<Locals>(locals));
    }
    return B::template run_plan_value<W, M, P>(p, layout.extents(), std::forward<Locals>(locals));
  } else {
    using H = plan_holder<PlanOf<L, Dst, W>>;
    static_assert(plan_connects<H, L, Dst>(),
                  "spmd::redistribute: the plan does not lead from the source layout to the "
                  "target layout.");
    // Watched: the log line and a span around the plan. Unwatched: one branch.
    if (observe::active()) [[unlikely]] {
      [[maybe_unused]] const timeline::span s = observe::on_redistribute<W>(
          H::value, L::spec(), Dst::spec(), layout.extents().to_vec(), B::template held<M>(), true);
      return B::template run_plan<W, H, M>(layout.extents(), std::forward<Locals>(locals));
    }
    return B::template run_plan<W, H, M>(layout.extents(), std::forward<Locals>(locals));
  }
}
}  // namespace detail

/// x in the layout with placements NewPlacements (same mesh and extents), by the plan
/// PlanOf<Src, Dst, T>::value(). x is unchanged.
template <class NewPlacements, template <class, class, class> class PlanOf, element T, class L,
          class B>
auto redistribute(const dtensor<T, L, B>& x) {
  using Dst = detail::target_layout<NewPlacements, L>;
  return dtensor<T, Dst, B>(detail::internal_t{}, Dst{x.layout().extents()},
                            detail::run_to<Dst, PlanOf, T, B>(x.layout(), x.locals()));
}
/// The same, reusing x's buffers.
template <class NewPlacements, template <class, class, class> class PlanOf, element T, class L,
          class B>
auto redistribute(dtensor<T, L, B>&& x) {
  using Dst = detail::target_layout<NewPlacements, L>;
  const L layout = x.layout();
  return dtensor<T, Dst, B>(detail::internal_t{}, Dst{layout.extents()},
                            detail::run_to<Dst, PlanOf, T, B>(layout, std::move(x).locals()));
}
/// The same, communicating in U (DTensor's forward_dtype): every local is cast to U, the
/// plan PlanOf<Src, Dst, U> runs in U, and the result is cast back to T.
template <class NewPlacements, template <class, class, class> class PlanOf, element T, class L,
          class B, element U>
auto redistribute(const dtensor<T, L, B>& x, forward_dtype_t<U>) {
  if constexpr (std::is_same_v<T, U>) {
    return redistribute<NewPlacements, PlanOf>(x);
  } else {
    using Dst = detail::target_layout<NewPlacements, L>;
    const storage_t<B, U> moved =
        detail::run_to<Dst, PlanOf, U, B>(x.layout(), detail::cast_locals<U, B, T>(x.locals()));
    return dtensor<T, Dst, B>(detail::internal_t{}, Dst{x.layout().extents()},
                              detail::cast_locals<T, B, U>(moved));
  }
}

}  // namespace spmd::runtime
