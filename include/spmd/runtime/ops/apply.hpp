// spmd/runtime/ops/apply.hpp — run an operator on dtensors in the simulation: the compiler has
// chosen its sharding (spmd/ops/typed_op.hpp); at run time the inputs that must move are
// redistributed by their compile-time plans, the local kernel runs once per rank on the local
// shards, and the result is a dtensor whose layout is the chosen one (or the forced one).
//
//   auto y = spmd::sim::apply(spmd::ops::matmul{}, x, w);               // chosen placements
//   auto z = spmd::sim::apply<spmd::placements<spmd::replicate>>(op, x, w); // forced output
//
// The local kernel of an op type Op is sim::op_kernel<Op>::run(op, out, info, in...), where
// `out` is the rank's output (a strided_view<U>, already shaped), `in...` the rank's input
// locals (strided_view<const T>...), and `info` the rank and the global offsets of its blocks
// (for ops whose local result depends on where the block sits, like a masked embedding).
// The primary template calls op.local(out, info, in...): a user's op needs only that member.
// In the simulation the ranks of a large op run on the simulation's threads
// (spmd::sim::set_threads): a kernel may run for several ranks at once, each on its own
// blocks, so it must not write state shared between calls.
// Nothing here branches on placements at run time: every choice is in the types.
#pragma once

#include <array>
#include <vector>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "spmd/ops/typed_op.hpp"
#include "spmd/core/mesh_groups.hpp"
#include "spmd/runtime/dtensor.hpp"
#include "spmd/host/distribute.hpp"
#include "spmd/host/kernels.hpp"
#include "spmd/host/local_set.hpp"
#include "spmd/host/thread_pool.hpp"
#include "spmd/host/view.hpp"

namespace spmd::runtime {

/// Where a rank's blocks sit: its rank id and the global offsets of its input and output
/// blocks (in the layouts the op computes in). The offsets are filled only for ops that
/// declare `static constexpr bool needs_offsets = true;` (see op_needs_offsets); reading them
/// otherwise throws std::logic_error rather than returning zeros.
class op_rank_info {
 public:
  /// The block offsets of one rank (filled by apply for ops that ask).
  struct offsets {
    svec<shape_vec, ops::max_op_inputs> in{};
    shape_vec out{};
  };

  index_t rank = 0;

  /// Input i's block offset (one entry per dim of input i).
  const shape_vec& in_offset(int i) const {
    check("in_offset");
    if (i < 0 || i >= off_->in.size())
      throw std::out_of_range("spmd::sim::op_rank_info::in_offset: input " + std::to_string(i) +
                              " of " + std::to_string(off_->in.size()));
    return off_->in[i];
  }
  const shape_vec& out_offset() const {
    check("out_offset");
    return off_->out;
  }

  /// (Called by apply; `o` must outlive the kernel call.) Kept out of line so that ops
  /// which do not ask pay for a rank and a null pointer only.
  void set_offsets(const offsets* o) { off_ = o; }

 private:
  void check(const char* what) const {
    if (off_ == nullptr)
      throw std::logic_error(std::string("spmd::sim::op_rank_info::") + what +
                             ": this op did not ask for block offsets; declare `static constexpr "
                             "bool needs_offsets = true;` in its op type");
  }
  const offsets* off_ = nullptr;
};

/// The local kernel of Op (specialised by the built-in ops; a user's op defines `local`).
template <class Op>
struct op_kernel {
  template <class U, class... In>
  static void run(const Op& op, strided_view<U> out, const op_rank_info& info, In... in) {
    op.local(out, info, in...);
  }
};

/// True when Op's kernel reads op_rank_info's block offsets (`static constexpr bool
/// needs_offsets = true;` in the op type); the others skip computing them.
template <class Op, class = void>
inline constexpr bool op_needs_offsets = false;
template <class Op>
inline constexpr bool op_needs_offsets<Op, std::void_t<decltype(Op::needs_offsets)>> = Op::needs_offsets;

/// True when Op's local kernel spreads over the cores itself for elements T (a BLAS
/// product): its op_kernel says so (`template <class T> static constexpr bool
/// threads_itself`) and names an RAII `one_thread` that keeps the kernel on the calling
/// thread while alive. Such ranks run at once only when enough of them compute to keep every
/// thread busy, each kernel on one thread; otherwise one after another, each on every core
/// (running them at once with the kernel threaded too oversubscribed the cores: a
/// 256x256x512 matmul on 2x4 took 1.14x the time of the serial loop).
template <class Op, class T, class = void>
inline constexpr bool op_threads_itself = false;
template <class Op, class T>
inline constexpr bool
    op_threads_itself<Op, T, std::void_t<decltype(op_kernel<Op>::template threads_itself<T>)>> =
        op_kernel<Op>::template threads_itself<T>;

/// True when Op's local result depends on its inputs' blocks and where they sit only, not on
/// the rank: the built-in kernels say so (`static constexpr bool rank_independent = true;` in
/// op_kernel<Op>); a user's op (the primary op_kernel, which passes op_rank_info on) is not
/// assumed to be. Ranks of such an op that differ only on mesh dims where its inputs and
/// output are all replicated, and whose inputs are the same buffers (replicas), compute one
/// block, which the others share: on a Replicate dim a block's offsets do not depend on the
/// rank's coordinate, so an op that reads its offsets (embedding: which vocabulary rows it
/// holds) computes the same block there too.
template <class Op, class = void>
inline constexpr bool op_rank_independent = false;
template <class Op>
inline constexpr bool op_rank_independent<Op, std::void_t<decltype(op_kernel<Op>::rank_independent)>> =
    op_kernel<Op>::rank_independent;

/// The element type of Op's result for inputs of type T (T unless Op says otherwise).
template <class Op, class T, class = void>
struct op_result {
  using type = T;
};
template <class Op, class T>
struct op_result<Op, T, std::void_t<typename Op::template result<T>>> {
  using type = typename Op::template result<T>;
};

namespace detail {

/// Operators whose ranks' blocks hold this many elements in all (inputs and output, by the
/// first rank's sizes) run their ranks on the simulation's threads (host/thread_pool.hpp);
/// smaller ones on the calling thread, where waking workers would cost more than it saves.
inline constexpr index_t parallel_op_elems = index_t{1} << 16;

/// Elements of a tensor of layout L, whose extents are static.
template <class L>
constexpr index_t global_elems() {
  index_t n = 1;
  for (std::size_t d = 0; d < L::extents_type::rank(); ++d) n *= L::extents_type::static_extent(d);
  return n;
}

/// Elements of mesh index 0's block of a layout with static extents.
template <class L>
constexpr index_t rank0_elems() {
  index_t n = 1;
  for (index_t e : L{}.local_shape(L::mesh_type::rank_at(0))) n *= e;
  return n;
}

/// For each mesh index, the rank whose result it shares, or -1 when it computes its own. With
/// `Same` the mesh dims on which an op's inputs and output are all replicated, ranks that
/// differ only there read equal blocks; when those are the same buffers as the blocks of
/// the rank with coordinates 0 on those dims (replicas), their results are equal by
/// construction and that rank's is shared. Empty when Same is 0 (nothing to share: no
/// per-call cost); all -1 unless the process holds every rank.
template <dim_mask Same, class Mesh, class... Sets>
auto static_twins(held_range h, const Sets&... in) {
  std::array<index_t, Same != 0 ? static_cast<std::size_t>(Mesh::size) : 0> twin{};
  if constexpr (Same != 0) {
    static constexpr auto first = [] {
      std::array<index_t, static_cast<std::size_t>(Mesh::size)> f{};
      const mesh_shape_vec m = Mesh::shape_vec();
      for (index_t i = 0; i < Mesh::size; ++i)
        f[static_cast<std::size_t>(i)] = group_member(m, Same, group_of(m, Same, i).group, 0);
      return f;
    }();
    twin.fill(-1);
    if (h.count() == Mesh::size)
      for (index_t i = 0; i < Mesh::size; ++i) {
        const index_t f = first[static_cast<std::size_t>(i)];
        if (f != i && ((in.cdata(i) == in.cdata(f)) && ...)) twin[static_cast<std::size_t>(i)] = f;
      }
  }
  return twin;
}

/// The same for any mesh: over a mesh with a dynamic size, the same rule on the bound sizes
/// (a vector of Mesh::size).
template <dim_mask Same, class Mesh, class... Sets>
auto result_twins(held_range h, const Sets&... in) {
  if constexpr (!Mesh::is_static) {
    std::vector<index_t> twin;
    if constexpr (Same != 0) {
      const index_t n = Mesh::size;
      twin.assign(static_cast<std::size_t>(n), -1);
      if (h.count() == n) {
        const mesh_shape_vec m = Mesh::shape_vec();
        for (index_t i = 0; i < n; ++i) {
          const index_t f = group_member(m, Same, group_of(m, Same, i).group, 0);
          if (f != i && ((in.cdata(i) == in.cdata(f)) && ...)) twin[static_cast<std::size_t>(i)] = f;
        }
      }
    }
    return twin;
  } else {
    return static_twins<Same, Mesh>(h, in...);
  }
}

template <class D>
struct is_dtensor : std::false_type {};
template <class T, class L, class Bk>
struct is_dtensor<dtensor<T, L, Bk>> : std::true_type {};

/// Input I as the op needs it: a reference when it already is, else redistributed.
template <class R, std::size_t I, class T, class L, class Bk>
decltype(auto) prepare_input(const dtensor<T, L, Bk>& x) {
  if constexpr (R::template input_moves<I>)
    return runtime::redistribute<typename R::template input_placements<I>>(x);
  else
    return (x);  // const dtensor& (decltype(auto) of a parenthesised name)
}

template <class L>
shape_vec global_offset_of(const L& layout, index_t rank) {
  shape_vec s{};
  for (index_t e : layout.global_offset(rank)) s.push_back(e);
  return s;
}

/// The output block's shape at mesh index i: constants when the extents are static (the
/// per-rank arithmetic then costs nothing at run time; over a mesh with a dynamic size,
/// computed once per bound shape and kept, per thread), else computed from the layout.
template <class L>
const shape_vec* bound_out_shapes();

template <class L>
decltype(auto) out_local_shape(const L& layout, index_t i) {
  using M = typename L::mesh_type;
  if constexpr (!M::is_static && L::extents_type::is_static()) {
    return (bound_out_shapes<L>()[i]);
  } else if constexpr (M::is_static && L::extents_type::is_static()) {
    static constexpr auto shapes = [] {
      std::array<shape_vec, static_cast<std::size_t>(M::size)> a{};
      for (index_t k = 0; k < M::size; ++k) {
        for (index_t e : L{}.local_shape(M::rank_at(k))) a[static_cast<std::size_t>(k)].push_back(e);
      }
      return a;
    }();
    return (shapes[static_cast<std::size_t>(i)]);  // a reference to the constant
  } else {
    shape_vec s{};
    for (index_t e : layout.local_shape(M::rank_at(i))) s.push_back(e);
    return s;
  }
}

/// Over a mesh with a dynamic size and static extents: every block's shape (by mesh index) on
/// the bound sizes, computed on the first call after a bind and kept, per thread. The check
/// is inlined and reads one thread-local object (two, and the call, cost 22 instructions of
/// a small op's 4,600 at -O3, bench/op_overhead).
template <class L>
struct bound_shapes_cache {
  std::uint64_t made_for = 0;  // the mesh's generation the shapes are of (0: none)
  std::vector<shape_vec> shapes;
};

template <class L>
SPMD_SIM_NOINLINE void make_bound_shapes(bound_shapes_cache<L>& c) {
  using M = typename L::mesh_type;
  c.shapes.assign(static_cast<std::size_t>(M::size), shape_vec{});
  for (index_t k = 0; k < M::size; ++k)
    for (index_t e : L{}.local_shape(M::rank_at(k))) c.shapes[static_cast<std::size_t>(k)].push_back(e);
  c.made_for = M::generation();
}

template <class L>
inline const shape_vec* bound_out_shapes() {
  thread_local bound_shapes_cache<L> c;
  if (c.made_for != L::mesh_type::generation()) [[unlikely]] make_bound_shapes(c);
  return c.shapes.data();
}

/// Every block's shape of layout L (by mesh index; those of `own` at least): the constants
/// of static extents on a static mesh, the kept shapes of a dynamic mesh (bound_out_shapes),
/// or, with dynamic extents, computed for `own` into this thread's scratch (valid until the
/// next call for L on this thread).
template <class L>
const shape_vec* out_shapes(const L& layout, index_range own) {
  using M = typename L::mesh_type;
  if constexpr (!M::is_static && L::extents_type::is_static()) {
    return bound_out_shapes<L>();
  } else if constexpr (M::is_static && L::extents_type::is_static()) {
    return &out_local_shape<L>(layout, 0);
  } else {
    thread_local std::vector<shape_vec> shapes;
    if (shapes.size() < static_cast<std::size_t>(M::size)) shapes.resize(static_cast<std::size_t>(M::size));
    for (index_t i = own.lo; i < own.hi; ++i) shapes[static_cast<std::size_t>(i)] = out_local_shape<L>(layout, i);
    return shapes.data();
  }
}

/// The op on inputs where it needs them (`in`: references to the caller's dtensors, or the
/// redistributed ones), its output layout `lo` computed: the rank loop (host memory) or the
/// device backend's kernel, then the output's move to forced placements. The inputs come as
/// parameters, not in a tuple: each op instantiated a tuple's dozen helpers (2,000 of the
/// typed suite's MPI unit's functions at -O0).
template <class R, class Op, class... T, class... Lin, class Bk>
auto apply_prepared(const Op& op, const typename R::compute_layout& lo, const dtensor<T, Lin, Bk>&... in) {
  using T0 = std::tuple_element_t<0, std::tuple<T...>>;
  using U = typename op_result<Op, T0>::type;
  using Mesh = typename R::mesh_type;

  // The output, its blocks filled in place below (a local moved into it afterwards leaves a
  // moved-from vector whose destructor g++ calls out of line: 1 % of a small op's instructions
  // at -O3, bench/op_overhead).
  dtensor<U, typename R::compute_layout, Bk> y(internal_t{}, std::in_place, lo, Mesh::size,
                                               Bk::template held<Mesh>());
  storage_t<Bk, U>& out = y.locals(internal_t{});
  if constexpr (host_memory<Bk>) {  // the host kernel, rank by rank (on the threads when large)
    const held_range h = out.held_ranks();
    // Mesh dims on which every input and the output are replicated (result_twins).
    constexpr dim_mask same = op_rank_independent<Op>
        ? (replicate_mask(R::compute_layout::nominal_spec()) & ... & replicate_mask(Lin::nominal_spec()))
        : dim_mask{0};
    [[maybe_unused]] const auto twin = result_twins<same, Mesh>(h, in.locals()...);
    // Blocks for the ranks that compute; a twin shares its rank's block afterwards (no
    // allocation made only to be dropped).
    // The indices this process computes, walked by plain index loops as a hand-written loop
    // is (index_range's iterator cost ~70 instructions of loop control per small op on 8
    // ranks at -O2, bench/op_overhead), with constant bounds where the backend holds every
    // rank (the simulation).
    index_range own{0, Mesh::size};
    if constexpr (!requires { requires Bk::holds_every_rank; }) own = out.held();
    const index_t* twins = nullptr;
    if constexpr (same != 0) twins = twin.data();
    out.assign_each(own, out_shapes<typename R::compute_layout>(lo, own), twins);
    // A rank's kernel (skipping a twin). Always inlined into the loops below, as the raw
    // per-rank loop is: left to g++'s heuristics it went out of line with its view
    // constructors when this function grew (+30 instructions per rank of a small matmul,
    // bench/op_overhead).
    auto run_own = [&](index_t i) SPMD_SIM_INLINE_LAMBDA {
      if constexpr (same != 0) {
        if (twin[static_cast<std::size_t>(i)] >= 0) return;
      }
      op_rank_info info{};
      info.rank = Mesh::rank_at(i);
      if constexpr (op_needs_offsets<Op>) {  // only ops that ask pay for the block offsets
        op_rank_info::offsets off;
        (off.in.push_back(global_offset_of(in.layout(), info.rank)), ...);
        off.out = global_offset_of(lo, info.rank);
        info.set_offsets(&off);
        op_kernel<Op>::run(op, out.view(i), info, in.locals().view(i)...);
        info.set_offsets(nullptr);
      } else {
        op_kernel<Op>::run(op, out.view(i), info, in.locals().view(i)...);
      }
    };
    // On the threads when the ranks' blocks are large. For static extents that is decided
    // by the compiler: a small op instantiates no parallel path at all (its per-rank
    // kernel stays inlined in one loop, as in the raw loop bench/op_overhead compares).
    constexpr bool extents_static = R::out_extents_type::is_static() && (Lin::extents_type::is_static() && ...);
    constexpr bool static_extents = Mesh::is_static && extents_static;
    constexpr bool may_thread = [] {
      if constexpr (static_extents) {
        constexpr index_t elems = rank0_elems<typename R::compute_layout>() + (rank0_elems<Lin>() + ...);
        return elems * Mesh::size >= parallel_op_elems;
      } else {
        return true;  // decided below from the run-time sizes
      }
    }();
    // Static extents over a dynamic mesh: no block holds more than its whole tensor, so
    // whole tensors too small to thread settle it without the blocks' sizes (35
    // instructions of a small op, bench/op_overhead).
    constexpr index_t whole_elems = [] {
      if constexpr (extents_static)
        return global_elems<typename R::compute_layout>() + (global_elems<Lin>() + ...);
      else
        return index_t{0};
    }();
    bool threaded = false;
    if constexpr (may_thread) {
      if (h.count() > 1 &&
          (static_extents ||
           ((!extents_static || whole_elems * h.count() >= parallel_op_elems) &&
            (out.size(h.lo) + (in.locals().size(h.lo) + ...)) * h.count() >= parallel_op_elems))) {
        threaded = true;
        auto task = [&](index_t k) { run_own(h.lo + k); };
        if constexpr (op_threads_itself<Op, T0>) {
          // Ranks at once, each kernel on one thread, when they fill the threads: 8 ranks'
          // products of an eighth of the size each, one per thread, beat each product on
          // every core one after another (bench/train_step). Fewer: the kernel's own threads.
          index_t computing = h.count();
          if constexpr (same != 0) {
            computing = 0;
            for (const index_t i : out.held()) computing += twin[static_cast<std::size_t>(i)] < 0 ? 1 : 0;
          }
          if (computing >= host::threads()) {
            const typename op_kernel<Op>::one_thread one;
            parallel_for(h.count(), task);
          } else {
            threaded = false;
          }
        } else {
          parallel_for(h.count(), task);
        }
      }
    }
    if (!threaded)
      for (index_t i = own.lo; i < own.hi; ++i) run_own(i);
    if constexpr (same != 0)
      for (index_t i = own.lo; i < own.hi; ++i)
        if (const index_t f = twin[static_cast<std::size_t>(i)]; f >= 0) out.share(i, f);
  } else {  // the device backend's kernel, every rank it holds at once
    for (const index_t i : out.held()) out.assign(i, out_local_shape<typename R::compute_layout>(lo, i));
    auto offsets_of = [&](index_t i) {
      op_rank_info::offsets off;
      if constexpr (op_needs_offsets<Op>) {
        const index_t r = Mesh::rank_at(i);
        (off.in.push_back(global_offset_of(in.layout(), r)), ...);
        off.out = global_offset_of(lo, r);
      }
      return off;
    };
    Bk::template run_op<Op>(op, out, offsets_of, in.locals()...);
  }
  if constexpr (R::output_moves)
    return runtime::redistribute<typename R::out_placements>(std::move(y));
  else
    return y;
}

template <class Forced, class Op, class... T, class... L, std::size_t... I, class Bk>
auto apply_impl(const Op& op, std::index_sequence<I...>, const dtensor<T, L, Bk>&... x) {
  using T0 = std::tuple_element_t<0, std::tuple<T...>>;
  using R = ops::resolved<Op, T0, Forced, L...>;
  // The output layout: a constant when every extent is static, else from the run-time
  // extents (out_shape then also checks the inputs' dynamic extents against each other).
  if constexpr (R::out_extents_type::is_static() && (L::extents_type::is_static() && ...)) {
    // Inputs where the op needs them (compile-time plans; references when nothing moves).
    return apply_prepared<R>(op, typename R::compute_layout{}, prepare_input<R, I>(x)...);
  } else {
    svec<shape_vec, ops::max_op_inputs> in_shapes{};
    (in_shapes.push_back(x.layout().extents().to_vec()), ...);
    const typename R::compute_layout lo(R::out_extents(Op::out_shape(in_shapes)));
    return apply_prepared<R>(op, lo, prepare_input<R, I>(x)...);
  }
}

/// A layout's spec as an object, so that watch_op passes its address instead of a copy.
template <class L>
inline constexpr layout_spec spec_constant = L::spec();

/// The layout an op's output ends in: its compute layout, or the forced placements'.
template <class R>
constexpr layout_spec final_spec() {
  if constexpr (R::output_moves) return target_layout<typename R::out_placements, typename R::compute_layout>::spec();
  else return R::compute_layout::spec();
}

/// The log line and trace span of an op (observe/hooks.hpp), when something watches.
template <class Forced, class Op, class... T, class... L, std::size_t... I, class Bk>
timeline::span watch_op(std::index_sequence<I...>, const dtensor<T, L, Bk>&... x) {
  using T0 = std::tuple_element_t<0, std::tuple<T...>>;
  using U = typename op_result<Op, T0>::type;
  using R = ops::resolved<Op, T0, Forced, L...>;
  if constexpr (R::mesh_type::is_static) {
    const observe::op_input in[] = {observe::op_input{&spec_constant<L>, &spec_constant<typename R::template input_layout<I>>,
                                                      x.layout().extents().to_vec(), host::element_name<T>()}...};
    static constexpr layout_spec final = final_spec<R>();
    return observe::on_op(observe::op_name<Op>(), in, static_cast<int>(sizeof...(I)),
                          spec_constant<typename R::compute_layout>, final, host::element_name<U>(),
                          Bk::template held<typename R::mesh_type>());
  } else {  // the specs over the bound sizes, read during the call
    const layout_spec given[] = {L::spec()...}, used[] = {R::template input_layout<I>::spec()...};
    const observe::op_input in[] = {
        observe::op_input{&given[I], &used[I], x.layout().extents().to_vec(), host::element_name<T>()}...};
    return observe::on_op(observe::op_name<Op>(), in, static_cast<int>(sizeof...(I)), R::compute_layout::spec(),
                          final_spec<R>(), host::element_name<U>(), Bk::template held<typename R::mesh_type>());
  }
}

template <class Forced, class Op, class... T, class... L, std::size_t... I, class Bk>
[[gnu::noinline]] auto apply_watched(const Op& op, std::index_sequence<I...> is, const dtensor<T, L, Bk>&... x) {
  [[maybe_unused]] const timeline::span s = watch_op<Forced, Op>(is, x...);
  return apply_impl<Forced>(op, is, x...);
}

}  // namespace detail

/// Op on dtensors (1 to 4, one mesh): the compiler-chosen sharding, or `Forced` output
/// placements (spmd::placements<...>) when given.
template <class Forced = void, class Op, class... T, class... L, class Bk>
auto apply(const Op& op, const dtensor<T, L, Bk>&... x) {
  // Watched: out of line, with the log line and the span. Unwatched: one branch, then the
  // op's body, inlined as it was before the branch existed.
  if (observe::active()) [[unlikely]]
    return detail::apply_watched<Forced>(op, std::index_sequence_for<L...>{}, x...);
  return detail::apply_impl<Forced>(op, std::index_sequence_for<L...>{}, x...);
}

}  // namespace spmd::runtime
