// spmd/runtime/backend.hpp — what a backend supplies to the runtime.
//
// The runtime (DTensor's API, the operators' application, the TP blocks, local_map) is
// written once, over a backend type B. B says where the locals of the ranks it holds live,
// how a plan's steps move data between them, and (later, for device memory) the local
// kernels. Host backends (the simulation, MPI) keep locals in a host::local_set and run the
// host kernels of backends/host/. A backend type has:
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
// Nothing else: the plan and its lowering to box operations (spmd/plan/lower.hpp), the
// propagation rules and the operators are shared. See docs/backends.md.
#pragma once

#include <concepts>

#include "spmd/backends/host/local_set.hpp"
#include "spmd/core/mesh.hpp"

namespace spmd::runtime {
// The runtime works on host locals: their names are its names.
using namespace spmd::host;
namespace detail {
using namespace spmd::host::detail;
}

/// A backend type (dtensor checks its third argument with it).
template <class B>
concept backend_type = requires {
  { B::name } -> std::convertible_to<const char*>;
  { B::template held<spmd::mesh<1>>() } -> std::same_as<held_range>;
};

}  // namespace spmd::runtime
