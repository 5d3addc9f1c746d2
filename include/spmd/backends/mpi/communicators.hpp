// spmd/backends/mpi/communicators.hpp — one communicator per group of mesh ranks, made once.
//
// A plan step runs inside the groups of its mesh dims (the planner may merge several dims
// into one step). Each group gets its own communicator whose rank j is the group's j-th
// member in group order, so that "rank j" means the same in a schedule and in MPI. They are
// made with MPI_Comm_create_group, collective over the group's members only (a process
// outside the mesh never has to take part), and kept for the life of the process, keyed by
// the parent communicator and the members' ranks in it; freeing a parent (MPI_Comm_free) frees
// its groups' communicators too (an MPI attribute's delete callback).
#pragma once

#include "spmd/backends/mpi/mpi_c.hpp"

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "spmd/backends/mpi/environment.hpp"
#include "spmd/core/config.hpp"

namespace spmd::mpi::detail {

using comm_key = std::pair<MPI_Comm, std::vector<int>>;

inline std::recursive_mutex& comm_cache_mutex() {
  static std::recursive_mutex mu;
  return mu;
}
inline std::map<comm_key, MPI_Comm>& comm_cache() {
  static auto* cache = new std::map<comm_key, MPI_Comm>();  // outlives static destruction
  return *cache;
}

/// Called by MPI when a parent communicator is freed: its groups' communicators go with it
/// (a later communicator may get the same handle; it must not find them).
inline int forget_parent(MPI_Comm parent, int, void*, void*) {
  std::lock_guard<std::recursive_mutex> lock(comm_cache_mutex());
  auto& cache = comm_cache();
  for (auto it = cache.begin(); it != cache.end();) {
    if (it->first.first == parent) {
      MPI_Comm c = it->second;
      MPI_Comm_free(&c);
      it = cache.erase(it);
    } else {
      ++it;
    }
  }
  return MPI_SUCCESS;
}

/// The attribute key that ties a parent's cache entries to its lifetime.
inline int parent_keyval() {
  static const int key = [] {
    int k = MPI_KEYVAL_INVALID;
    check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &forget_parent, &k, nullptr),
          "MPI_Comm_create_keyval");
    return k;
  }();
  return key;
}

/// The communicator of `members` (ranks of `parent`, in group order; this process must be
/// one of them), from the cache or made now.
inline MPI_Comm group_comm(MPI_Comm parent, const std::vector<int>& members) {
  std::lock_guard<std::recursive_mutex> lock(comm_cache_mutex());
  auto& cache = comm_cache();
  comm_key key{parent, members};
  if (auto it = cache.find(key); it != cache.end()) return it->second;
  void* attr = nullptr;
  int has = 0;
  check(MPI_Comm_get_attr(parent, parent_keyval(), &attr, &has), "MPI_Comm_get_attr");
  if (!has && parent != MPI_COMM_WORLD && parent != MPI_COMM_SELF)
    check(MPI_Comm_set_attr(parent, parent_keyval(), nullptr), "MPI_Comm_set_attr");
  MPI_Group whole, part;
  check(MPI_Comm_group(parent, &whole), "MPI_Comm_group");
  check(MPI_Group_incl(whole, static_cast<int>(members.size()), members.data(), &part),
        "MPI_Group_incl");
  // The tag tells apart creations that overlap in time on the same parent.
  std::uint32_t tag = 2166136261u;
  for (int m : members) tag = (tag ^ static_cast<std::uint32_t>(m)) * 16777619u;
  MPI_Comm comm = MPI_COMM_NULL;
  check(MPI_Comm_create_group(parent, part, static_cast<int>(tag & 0x7fff), &comm),
        "MPI_Comm_create_group");
  MPI_Group_free(&part);
  MPI_Group_free(&whole);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  cache.emplace(std::move(key), comm);
  return comm;
}

/// A contiguous datatype of one element of `bytes` bytes (counts are in elements, so a
/// message may hold up to 2^31 - 1 of them, not bytes).
inline MPI_Datatype element_type(std::size_t bytes) {
  static std::mutex mu;
  static std::map<std::size_t, MPI_Datatype> types;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = types.find(bytes); it != types.end()) return it->second;
  MPI_Datatype t;
  check(MPI_Type_contiguous(static_cast<int>(bytes), MPI_BYTE, &t), "MPI_Type_contiguous");
  check(MPI_Type_commit(&t), "MPI_Type_commit");
  types.emplace(bytes, t);
  return t;
}

/// An element count as MPI's int; larger messages are an error, not a wrap.
inline int count_of(index_t n, const char* what) {
  if (n > 0x7fffffff)
    throw error(std::string("spmd::mpi: ") + what + " of " + std::to_string(n) +
                " elements is more than one MPI message holds (2^31 - 1)");
  return static_cast<int>(n);
}

}  // namespace spmd::mpi::detail
