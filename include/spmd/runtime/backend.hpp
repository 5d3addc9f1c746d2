// spmd/runtime/backend.hpp — what a backend supplies to the runtime.
//
// The runtime (DTensor's API, the operators' application, the TP blocks, local_map) is
// written once, over a backend type B. B says where the locals of the ranks it holds live,
// how a plan's steps move data between them, and (later, for device memory) the local
// kernels. Host backends (the simulation, MPI) keep locals in a host::local_set and run the
// host kernels of host/. A backend type has:
//
//   static constexpr const char* name;                       // "sim", "mpi": in messages
//   template <class M> static held_range held();             // the mesh indices of mesh M
//                                                             // this process holds
//   template <class T, class Holder, class M, class Ext, class In>
//   static local_set<T> run_plan(const Ext&, In&& locals);   // Holder::value, a constexpr
//                                                             // plan, on this process's locals
//   template <class T, class M>
//   static <local_set<T> or const&> gather_all(const local_set<T>&);  // every rank's local
//                                                             // here (full_tensor)
//
// A backend whose locals live in device memory adds (backends/cuda/backend.hpp):
//
//   template <class T> using storage = ...;                 // its locals (else local_set<T>)
//   static storage<T> from_host(local_set<T>&&);            // host locals moved to it
//   static host_tensor<T> to_host(const storage<T>&, i);    // one local copied back
//   template <class U> static storage<U> cast(const storage<T>&);   // element type U
//   template <class Op> static void run_op(op, storage<U>& out, offsets, const storage<T>&...);
//                                                            // the op's local kernel, every rank
//   template <class T> static void copy_elements(storage<T>& dst, j, dst_at, const storage<T>& src,
//                                                i, src_at, n);   // one run, device to device
//                                                                  // (runtime/coalesce.hpp)
//   template <class T> static storage<T> generate(spec, global, held, T value, bool index);
//                                                            // the factories' locals made in
//                                                            // its memory (optional: else
//                                                            // host::generate + from_host)
//   template <class T> static void fill_random(storage<T>&, spec, global, const random::draw&);
//   template <class T> static void dropout(storage<T>& out, const storage<T>& in, spec, global,
//                                          const random::draw&);   // runtime/random.hpp
//
// A backend that can run communication beside compute (NCCL) adds:
//
//   class overlap;                         // while it lives, work runs on a side stream
//   static overlap begin_overlap();        // ... after the work queued so far
//   overlap::finish() -> completion;       // completion.wait(): later work waits for it
//
// (fully_shard's prefetch, runtime/data_parallel/fully_shard.hpp).
//
// Nothing else: the plan and its lowering to box operations (spmd/plan/lower.hpp), the
// propagation rules and the operators are shared. See docs/backends.md.
#pragma once

#include <concepts>
#include <type_traits>

#include "spmd/host/local_set.hpp"
#include "spmd/core/mesh.hpp"

namespace spmd::runtime {
// The runtime works on host locals: their names are its names.
using namespace spmd::host;
namespace detail {
using namespace spmd::host::detail;
}

/// Where backend B keeps the locals of element type T: B::storage<T>, or host memory.
template <class B, class T, class = void>
struct storage_of {
  using type = local_set<T>;
};
template <class B, class T>
struct storage_of<B, T, std::void_t<typename B::template storage<T>>> {
  using type = typename B::template storage<T>;
};
template <class B, class T>
using storage_t = typename storage_of<B, T>::type;

/// True when B's locals are host memory that the host kernels can read (sim, MPI).
template <class B>
inline constexpr bool host_memory = std::is_same_v<storage_t<B, float>, local_set<float>>;

/// A backend type (dtensor checks its third argument with it).
template <class B>
concept backend_type = requires {
  { B::name } -> std::convertible_to<const char*>;
  { B::template held<spmd::mesh<1>>() } -> std::same_as<held_range>;
};

}  // namespace spmd::runtime
