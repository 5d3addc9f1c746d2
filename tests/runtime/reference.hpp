// tests/runtime/reference.hpp — an obviously-correct model of sharded layouts, written
// without the library's arithmetic: every tensor dim is a list of global indices that is
// literally cut into torch.chunk pieces, one mesh dim at a time, in shard order.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <numeric>
#include <ostream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <spmd/spmd.hpp>

namespace ref {

using index_t = std::int64_t;
using ivec = std::vector<index_t>;

// ---------------------------------------------------------------------------
// Placements, as plain data
// ---------------------------------------------------------------------------
struct place {
  char kind = 'R';  // 'R', 'S' or 'P'
  int dim = 0;      // 'S': tensor dim, may be negative
  int order = -1;   // 'S': explicit position in the dim's shard order, -1 = none
};

inline std::string to_string(const std::vector<place>& ps) {
  std::string s = "[";
  for (const place& p : ps) {
    if (s.size() > 1) s += ", ";
    if (p.kind == 'S') {
      s += "S(" + std::to_string(p.dim) + ")";
      if (p.order >= 0) s += "[" + std::to_string(p.order) + "]";
    } else {
      s += p.kind;
    }
  }
  return s + "]";
}

inline std::string to_string(const ivec& v) {
  std::string s = "(";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + ")";
}

/// The library's value form of the same placements (partials reduce with sum).
inline spmd::placement_vec to_spmd(const std::vector<place>& ps) {
  spmd::placement_vec v{};
  for (const place& p : ps) {
    if (p.kind == 'S')
      v.push_back(spmd::make_shard(p.dim, p.order));
    else if (p.kind == 'P')
      v.push_back(spmd::make_partial(spmd::reduce_op::sum));
    else
      v.push_back(spmd::make_replicate());
  }
  return v;
}

/// From the library's value form (for placements that came from types).
inline std::vector<place> from_spmd(const spmd::placement_vec& v) {
  std::vector<place> out;
  for (const spmd::placement& p : v) {
    if (p.is_shard())
      out.push_back({'S', p.dim, p.order});
    else
      out.push_back({p.is_partial() ? 'P' : 'R', 0, -1});
  }
  return out;
}

template <class V>
ivec to_ivec(const V& v) {
  return ivec(v.begin(), v.end());
}

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

/// Cut `elems` into n torch.chunk pieces: consecutive runs of ceil(len / n) elements;
/// pieces past the end are empty.
inline std::vector<ivec> chunk_pieces(const ivec& elems, index_t n) {
  std::vector<ivec> pieces(static_cast<std::size_t>(n));
  const index_t len = static_cast<index_t>(elems.size());
  const index_t step = (len + n - 1) / n;
  for (index_t i = 0; i < len; ++i)
    pieces[static_cast<std::size_t>(i / step)].push_back(elems[static_cast<std::size_t>(i)]);
  return pieces;
}

/// Mesh dims that shard tensor dim d (normalised), first split first: by explicit
/// position when positions are given, else left to right.
inline std::vector<int> shard_order(const std::vector<place>& ps, int d, int rank) {
  std::vector<std::pair<int, int>> by_pos;  // (position or mesh dim, mesh dim)
  bool explicit_order = false;
  for (int m = 0; m < static_cast<int>(ps.size()); ++m)
    if (ps[m].kind == 'S' && (ps[m].dim + rank) % rank == d) explicit_order |= ps[m].order >= 0;
  for (int m = 0; m < static_cast<int>(ps.size()); ++m)
    if (ps[m].kind == 'S' && (ps[m].dim + rank) % rank == d)
      by_pos.push_back({explicit_order ? ps[m].order : m, m});
  std::sort(by_pos.begin(), by_pos.end());
  std::vector<int> out;
  for (auto [pos, m] : by_pos) out.push_back(m);
  return out;
}

struct box {
  ivec shape, offset;
  std::vector<ivec> indices;  // the global indices held, per tensor dim
  friend bool operator==(const box& a, const box& b) {
    return a.shape == b.shape && a.offset == b.offset;
  }
};

inline std::ostream& operator<<(std::ostream& os, const box& b) {
  return os << "shape " << to_string(b.shape) << " offset " << to_string(b.offset);
}

/// The block the rank at `coord` holds. Local shape = the pieces' lengths; offset = the
/// first global index held, or the global extent when nothing is held.
inline box box_at(const ivec& mesh, const std::vector<place>& ps, const ivec& global,
                  const ivec& coord) {
  const int rank = static_cast<int>(global.size());
  box b;
  for (int d = 0; d < rank; ++d) {
    ivec elems(static_cast<std::size_t>(global[d]));
    std::iota(elems.begin(), elems.end(), index_t{0});
    for (int m : shard_order(ps, d, rank))
      elems = chunk_pieces(elems, mesh[m])[static_cast<std::size_t>(coord[m])];
    for (std::size_t i = 1; i < elems.size(); ++i)
      if (elems[i] != elems[i - 1] + 1)
        throw std::logic_error("reference: a block is not contiguous");
    b.shape.push_back(static_cast<index_t>(elems.size()));
    b.offset.push_back(elems.empty() ? global[d] : elems.front());
    b.indices.push_back(std::move(elems));
  }
  return b;
}

/// All coordinates of a mesh in row-major order (last dim fastest), by counting.
inline std::vector<ivec> all_coords(const ivec& mesh) {
  std::vector<ivec> out;
  ivec c(mesh.size(), 0);
  for (;;) {
    out.push_back(c);
    int m = static_cast<int>(mesh.size()) - 1;
    while (m >= 0 && ++c[m] == mesh[m]) c[m--] = 0;
    if (m < 0) return out;
  }
}

/// Groups of the mesh dims in `mask`: mesh indices that agree on every coordinate
/// outside the mask. Groups in lexicographic order of the outside coordinates, members
/// in lexicographic order of the inside coordinates.
inline std::vector<ivec> groups(const ivec& mesh, unsigned mask) {
  std::map<ivec, std::map<ivec, index_t>> by_outside;
  const auto coords = all_coords(mesh);
  for (std::size_t i = 0; i < coords.size(); ++i) {
    ivec out, in;
    for (std::size_t m = 0; m < mesh.size(); ++m)
      ((mask >> m) & 1u ? in : out).push_back(coords[i][m]);
    by_outside[out][in] = static_cast<index_t>(i);
  }
  std::vector<ivec> result;
  for (const auto& [out, members] : by_outside) {
    result.emplace_back();
    for (const auto& [in, index] : members) result.back().push_back(index);
  }
  return result;
}

}  // namespace ref
