// spmd/backends/cuda/job_batch.hpp — the jobs of one operator launch: every rank's block (or,
// for cat, every part of every rank's block) with its pointers and its geometry, so that an
// operator runs all ranks in one launch rather than one launch per rank.
//
// The batch travels as a kernel parameter (a few KiB: ranks with the same local shape share
// one geometry), so nothing is uploaded and the launch can be captured in a CUDA graph. Each
// thread finds its item's job by a binary search over the jobs' first items, then runs the
// operator's per-item body (op_bodies.hpp) on that job's pointers and geometry: the same
// function, so the same bits, as a launch per rank. Host and device; the CPU tests run the
// search over an emulated grid.
#pragma once

#include <atomic>

#include "spmd/backends/cuda/divisor.hpp"
#include "spmd/core/config.hpp"

namespace spmd::cuda {

/// A job without geometry (its items are its block's elements, in order).
struct no_geom {
  SPMD_HD friend constexpr bool operator==(const no_geom&, const no_geom&) { return true; }
};

template <class P, class G = no_geom>
struct job_batch {
  static constexpr int max_jobs = 128;  // a mesh of 128 ranks in one launch
  static constexpr int max_geoms = 4;   // distinct local shapes (uneven shards: 2 per sharded dim)

  int jobs = 0, geoms = 0;
  index_t uniform = 0;               // items of every job, where all have as many (else 0)
  divisor per_job{};                 // uniform's magic number
  index_t begin[max_jobs + 1] = {};  // job k's items are [begin[k], begin[k + 1])
  unsigned char geom_of[max_jobs] = {};
  P ptr[max_jobs];
  G geom[max_geoms];

  SPMD_HD index_t items() const { return begin[jobs]; }
  /// The job holding item i: the last k with begin[k] <= i (@pre i < items()); i / uniform
  /// where the jobs are alike (an even split), a binary search otherwise.
  SPMD_HD int job_of(index_t i) const {
    if (uniform > 0) {
      index_t k = 0, unused = 0;
      per_job.divmod(i, k, unused);
      return static_cast<int>(k);
    }
    int lo = 0, hi = jobs - 1;
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (begin[mid] <= i) lo = mid;
      else hi = mid - 1;
    }
    return lo;
  }

  /// Host: whether a job of geometry g fits.
  bool fits(const G& g) const { return jobs < max_jobs && (geoms < max_geoms || find(g) >= 0); }
  /// Host: adds a job of n items (@pre fits(g); nothing for n == 0).
  void add(const P& p, const G& g, index_t n) {
    if (n == 0) return;
    int k = find(g);
    if (k < 0) {
      k = geoms++;
      geom[k] = g;
    }
    ptr[jobs] = p;
    geom_of[jobs] = static_cast<unsigned char>(k);
    begin[jobs + 1] = begin[jobs] + n;
    ++jobs;
    if (jobs == 1) per_job = divisor(n);
    uniform = jobs == 1 || n == uniform ? n : 0;
  }

 private:
  int find(const G& g) const {
    for (int k = 0; k < geoms; ++k)
      if (geom[k] == g) return k;
    return -1;
  }
};

/// Launches of the operators' kernels on this process (every launcher of kernels/ops.cuh counts
/// one): the tests assert one launch per operator.
inline std::atomic<long>& op_launches() {
  static std::atomic<long> n{0};
  return n;
}

/// Collects an operator's jobs and launches them with `launch(batch)`: once at the end
/// (finish), or earlier only where a batch is full (more than 128 jobs or 4 local shapes).
template <class P, class G, class Launch>
class job_launcher {
 public:
  using geom_type = G;
  explicit job_launcher(Launch launch) : launch_(launch) {}
  void add(const P& p, const G& g, index_t n) {
    if (n == 0) return;
    if (!batch_.fits(g)) flush();
    batch_.add(p, g, n);
  }
  /// Launches what is left.
  void finish() { flush(); }

 private:
  void flush() {
    if (batch_.jobs == 0) return;
    launch_(batch_);
    batch_ = job_batch<P, G>{};
  }
  Launch launch_;
  job_batch<P, G> batch_{};
};

template <class P, class G, class Launch>
job_launcher<P, G, Launch> make_job_launcher(Launch launch) {
  return job_launcher<P, G, Launch>(launch);
}

}  // namespace spmd::cuda
