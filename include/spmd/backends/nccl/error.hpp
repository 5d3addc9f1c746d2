// spmd/backends/nccl/error.hpp — NCCL's and CUDA's failures as exceptions that name the call,
// the rank and NCCL's own words.
#pragma once

#include <nccl.h>

#include <stdexcept>
#include <string>

namespace spmd::nccl {

/// An NCCL call failed: "spmd::nccl: <call> failed on rank R of N: <error> (<last error>)".
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

namespace detail {

/// "rank R of N" of `comm` (or "a rank" when there is none to ask).
inline std::string rank_text(ncclComm_t comm) {
  int r = -1, n = 0;
  if (comm != nullptr && ncclCommUserRank(comm, &r) == ncclSuccess && ncclCommCount(comm, &n) == ncclSuccess)
    return "rank " + std::to_string(r) + " of " + std::to_string(n);
  return "a rank";
}

inline void check(ncclResult_t rc, const char* call, ncclComm_t comm) {
  if (rc == ncclSuccess || rc == ncclInProgress) return;
  std::string what = std::string("spmd::nccl: ") + call + " failed on " + rank_text(comm) + ": " +
                     ncclGetErrorString(rc);
  const char* last = ncclGetLastError(comm);
  if (last != nullptr && *last != '\0') what += std::string(" (") + last + ")";
  throw error(what);
}

}  // namespace detail
}  // namespace spmd::nccl
