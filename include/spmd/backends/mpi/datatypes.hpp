// spmd/backends/mpi/datatypes.hpp — the MPI derived datatypes of strided pieces, made once per
// geometry and kept.
//
//   MPI_Datatype t = region_type(g, /*source=*/true, elem, sizeof(T));   // committed, cached
//
// A piece that is not one run (a transposing redistribute's pieces: S(0) -> S(1)) travels as
// an hvector-of-contiguous datatype over the runs where they lie. Making and committing one
// costs about 1.2 µs per side of a message, which at 1 MiB on 2 processes was 2.4 µs of a
// 48 µs redistribute (bench/RESULTS.md, issue 27). A training step redistributes the same
// shapes every iteration, so the types are kept: keyed by the geometry of one side (the
// run, the outer extents and that side's strides; offsets are the message's, not the
// type's), most recently used first, at most 64 (the oldest is freed when a new one would
// exceed that; MPI lets a message in flight finish with a freed type).
//
// They are freed when MPI finalizes: the cache hangs an attribute on MPI_COMM_SELF, whose
// attributes MPI_Finalize deletes first, while MPI still works.
#pragma once

#include "spmd/backends/mpi/mpi_c.hpp"

#include <cstddef>
#include <utility>
#include <vector>

#include "spmd/backends/mpi/communicators.hpp"  // count_of
#include "spmd/backends/mpi/environment.hpp"    // check
#include "spmd/host/sync.hpp"
#include "spmd/plan/lower.hpp"

namespace spmd::mpi::detail {

/// One side's geometry: what the datatype depends on.
struct region_key {
  int nd = 0;
  index_t run = 0;
  index_t ext[max_tensor_dims]{};
  index_t stride[max_tensor_dims]{};
  MPI_Datatype elem = MPI_DATATYPE_NULL;
  std::size_t elem_bytes = 0;
  friend bool operator==(const region_key&, const region_key&) = default;
};

/// A new committed datatype: runs of `run` contiguous elements at the outer strides.
inline MPI_Datatype make_region_type(const region_key& k) {
  MPI_Datatype t;
  check(MPI_Type_contiguous(count_of(k.run, "a run"), k.elem, &t), "MPI_Type_contiguous");
  for (int d = k.nd - 1; d >= 0; --d) {
    MPI_Datatype outer;
    check(MPI_Type_create_hvector(count_of(k.ext[d], "a region"), 1,
                                  static_cast<MPI_Aint>(k.stride[d]) * static_cast<MPI_Aint>(k.elem_bytes), t,
                                  &outer),
          "MPI_Type_create_hvector");
    MPI_Type_free(&t);
    t = outer;
  }
  check(MPI_Type_commit(&t), "MPI_Type_commit");
  return t;
}

class region_types {
 public:
  static constexpr std::size_t capacity = 64;

  static region_types& instance() {
    static region_types* c = new region_types;  // never destroyed: MPI may finalize after main
    return *c;
  }

  /// The committed type of `k`, made on first use. Valid until MPI finalizes or 64 newer
  /// geometries have pushed it out (then it is freed, which a posted message survives).
  MPI_Datatype get(const region_key& k) {
    host::lock held(m_);
    for (std::size_t i = 0; i < entries_.size(); ++i) {
      if (entries_[i].key == k) {
        if (i != 0) std::swap(entries_[i], entries_[0]);  // most recent first (cheap, not exact LRU)
        return entries_[0].type;
      }
    }
    watch_finalize();
    if (entries_.size() == capacity) {
      MPI_Type_free(&entries_.back().type);
      entries_.pop_back();
    }
    entries_.insert(entries_.begin(), entry{k, make_region_type(k)});
    ++made_;
    return entries_.front().type;
  }

  /// Types made since the start (a test checks that a repeated piece makes none).
  std::size_t made() {
    host::lock held(m_);
    return made_;
  }

 private:
  struct entry {
    region_key key;
    MPI_Datatype type;
  };

  /// MPI_Finalize deletes MPI_COMM_SELF's attributes first: the types go then.
  void watch_finalize() {
    if (watching_) return;
    int key = MPI_KEYVAL_INVALID;
    check(MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &release, &key, nullptr), "MPI_Comm_create_keyval");
    check(MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr), "MPI_Comm_set_attr");
    MPI_Comm_free_keyval(&key);  // the attribute keeps it alive until it is deleted
    watching_ = true;
  }
  static int release(MPI_Comm, int, void*, void*) {
    region_types& c = instance();
    host::lock held(c.m_);
    for (entry& e : c.entries_) MPI_Type_free(&e.type);
    c.entries_.clear();
    c.watching_ = false;
    return MPI_SUCCESS;
  }

  host::mutex m_;
  std::vector<entry> entries_;
  bool watching_ = false;
  std::size_t made_ = 0;
};

/// The committed, cached datatype of one side (source or destination) of a piece, element
/// type `elem` of `elem_bytes` bytes. Not to be freed by the caller.
inline MPI_Datatype region_type(const run_geom& g, bool source, MPI_Datatype elem, std::size_t elem_bytes) {
  region_key k;
  k.nd = g.nd;
  k.run = g.run;
  for (int d = 0; d < g.nd; ++d) {
    k.ext[d] = g.ext[d];
    k.stride[d] = source ? g.sstr[d] : g.dstr[d];
  }
  k.elem = elem;
  k.elem_bytes = elem_bytes;
  return region_types::instance().get(k);
}

}  // namespace spmd::mpi::detail
