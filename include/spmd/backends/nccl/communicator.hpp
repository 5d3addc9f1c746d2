// spmd/backends/nccl/communicator.hpp — the communicator meshes name ranks of, and the
// communicators of their groups.
//
// A mesh's rank list names ranks of the NCCL communicator in use: the one the environment
// made (environment.hpp: the unique id broadcast over MPI), or one the caller already has,
// installed on this thread by a `communicator_scope`. The mesh must name every rank of it:
// the groups of a step's mesh dims come from one ncclCommSplit over the whole communicator
// (color: the group, key: the position in it), which every rank calls at the same step.
// Split communicators are made once per (parent, mesh, dims) and kept; abort_all() aborts
// every communicator spmd knows of (a failed rank's way of not leaving the others waiting).
#pragma once

#include <nccl.h>

#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "spmd/backends/nccl/error.hpp"
#include "spmd/core/config.hpp"

namespace spmd::nccl {

namespace detail {

struct registry {
  std::recursive_mutex mu;
  ncclComm_t world = nullptr;  // the environment's
  // (parent, mesh shape and the parent rank of each mesh index, mask) -> my group's comm
  std::map<std::tuple<ncclComm_t, std::vector<long>, unsigned>, ncclComm_t> splits;
  std::vector<ncclComm_t> known;  // every communicator to abort on failure
};
inline registry& comms() {
  static auto* r = new registry();  // outlives static destruction
  return *r;
}
inline ncclComm_t& scoped_comm() {
  thread_local ncclComm_t c = nullptr;
  return c;
}

}  // namespace detail

/// The communicator meshes name ranks of on this thread (a scope's, else the environment's).
inline ncclComm_t communicator() {
  if (ncclComm_t c = detail::scoped_comm()) return c;
  return detail::comms().world;
}

/// The communicator in use, or a sentence saying how to get one.
inline ncclComm_t require_communicator(const char* who) {
  ncclComm_t c = communicator();
  if (c == nullptr)
    throw std::logic_error(std::string(who) +
                           ": no NCCL communicator; make a spmd::nccl::environment (MPI launch) or "
                           "install your own ncclComm_t with spmd::nccl::communicator_scope");
  return c;
}

/// While alive, meshes on this thread name ranks of `comm` (a communicator the caller made and
/// destroys, after the scope ends).
class communicator_scope {
 public:
  explicit communicator_scope(ncclComm_t comm) : prev_(detail::scoped_comm()), comm_(comm) {
    if (comm == nullptr) throw std::invalid_argument("spmd::nccl::communicator_scope: a null ncclComm_t");
    {
      std::lock_guard<std::recursive_mutex> lock(detail::comms().mu);
      detail::comms().known.push_back(comm);
    }
    detail::scoped_comm() = comm;
  }
  communicator_scope(const communicator_scope&) = delete;
  communicator_scope& operator=(const communicator_scope&) = delete;
  ~communicator_scope() {
    detail::scoped_comm() = prev_;
    // The caller destroys comm: forget it and its splits (spmd destroys those).
    auto& r = detail::comms();
    std::lock_guard<std::recursive_mutex> lock(r.mu);
    for (auto it = r.splits.begin(); it != r.splits.end();) {
      if (std::get<0>(it->first) == comm_) {
        (void)ncclCommDestroy(it->second);
        std::erase(r.known, it->second);
        it = r.splits.erase(it);
      } else {
        ++it;
      }
    }
    std::erase(r.known, comm_);
  }

 private:
  ncclComm_t prev_;
  ncclComm_t comm_;
};

/// This process's rank in the communicator in use, and its size.
inline int rank() {
  int r = 0;
  detail::check(ncclCommUserRank(require_communicator("spmd::nccl::rank"), &r), "ncclCommUserRank",
                communicator());
  return r;
}
inline int size() {
  int n = 0;
  detail::check(ncclCommCount(require_communicator("spmd::nccl::size"), &n), "ncclCommCount", communicator());
  return n;
}

/// Abort every communicator spmd knows of (the environment's, the caller's, the splits):
/// peers blocked in a collective with this rank return an error instead of waiting.
inline void abort_all() noexcept {
  auto& r = detail::comms();
  std::unique_lock<std::recursive_mutex> lock(r.mu, std::try_to_lock);
  for (ncclComm_t c : r.known) (void)ncclCommAbort(c);
  r.known.clear();
  r.splits.clear();
  r.world = nullptr;
}

namespace detail {

/// My group's communicator for a step over `mask` of a mesh whose index i is rank
/// parent_rank[i] of `parent`: made by one ncclCommSplit over all of parent's ranks (every
/// rank reaches this call at the same step), then cached.
inline ncclComm_t group_comm(ncclComm_t parent, const std::vector<long>& mesh_key, unsigned mask,
                             index_t group, index_t pos) {
  auto& r = comms();
  std::lock_guard<std::recursive_mutex> lock(r.mu);
  const auto key = std::make_tuple(parent, mesh_key, mask);
  if (auto it = r.splits.find(key); it != r.splits.end()) return it->second;
  ncclComm_t c = nullptr;
  check(ncclCommSplit(parent, static_cast<int>(group), static_cast<int>(pos), &c, nullptr), "ncclCommSplit",
        parent);
  r.splits.emplace(key, c);
  r.known.push_back(c);
  return c;
}

}  // namespace detail
}  // namespace spmd::nccl
