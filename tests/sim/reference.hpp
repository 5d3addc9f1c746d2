// tests/sim/reference.hpp — an obviously-correct model of the simulation, element by element.
//
// Nothing here uses the backend's schedules, geometry or kernels: a local tensor is a list of
// values with a global box, a step is evaluated for every element of every rank's new box
// straight from the definitions in spmd/plan/step.hpp, and groups are found by comparing
// coordinates. From the library it takes only box_at (tested in tests/runtime against a
// list-splitting model) and the value types.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <spmd/backends/sim/sim.hpp>
#include <spmd/spmd.hpp>

namespace simref {

using spmd::index_t;
using ivec = std::vector<index_t>;

template <class T>
struct local {
  ivec shape, offset;  // the global box
  std::vector<T> data;
};

inline index_t volume(const ivec& s) {
  index_t n = 1;
  for (index_t e : s) n *= e;
  return n;
}

inline ivec to_ivec(const spmd::shape_vec& v) { return ivec(v.begin(), v.end()); }

inline spmd::shape_vec to_shape(const ivec& v) {
  spmd::shape_vec s{};
  for (index_t e : v) s.push_back(e);
  return s;
}

inline ivec coords_of(const spmd::mesh_shape_vec& mesh, index_t linear) {
  ivec c(static_cast<std::size_t>(mesh.size()));
  for (int m = mesh.size() - 1; m >= 0; --m) {
    c[static_cast<std::size_t>(m)] = linear % mesh[m];
    linear /= mesh[m];
  }
  return c;
}

inline spmd::local_box box(const spmd::layout_spec& spec, const ivec& global, index_t linear) {
  spmd::coord_vec c{};
  for (index_t x : coords_of(spec.mesh, linear)) c.push_back(x);
  return spmd::box_at(spec, to_shape(global), c);
}

/// The mesh indices that agree with r on every mesh dim outside `mask`, in increasing
/// linear order (which is row-major over the dims inside the mask).
inline ivec group_members(const spmd::mesh_shape_vec& mesh, unsigned mask, index_t r) {
  index_t size = 1;
  for (index_t s : mesh) size *= s;
  const ivec cr = coords_of(mesh, r);
  ivec out;
  for (index_t q = 0; q < size; ++q) {
    const ivec cq = coords_of(mesh, q);
    bool same = true;
    for (int m = 0; m < mesh.size(); ++m)
      if (!((mask >> m) & 1u) && cq[static_cast<std::size_t>(m)] != cr[static_cast<std::size_t>(m)])
        same = false;
    if (same) out.push_back(q);
  }
  return out;
}

inline bool inside(const ivec& e, const ivec& shape, const ivec& offset) {
  for (std::size_t d = 0; d < e.size(); ++d)
    if (e[d] < offset[d] || e[d] >= offset[d] + shape[d]) return false;
  return true;
}

template <class T>
const T& at(const local<T>& l, const ivec& e) {
  index_t i = 0;
  for (std::size_t d = 0; d < e.size(); ++d) i = i * l.shape[d] + (e[d] - l.offset[d]);
  return l.data[static_cast<std::size_t>(i)];
}

/// Every global index of a box, row-major.
inline std::vector<ivec> elements(const ivec& shape, const ivec& offset) {
  std::vector<ivec> out;
  if (volume(shape) == 0) return out;
  ivec e = offset;
  for (;;) {
    out.push_back(e);
    int d = static_cast<int>(e.size()) - 1;
    for (; d >= 0; --d) {
      const auto k = static_cast<std::size_t>(d);
      if (++e[k] < offset[k] + shape[k]) break;
      e[k] = offset[k];
    }
    if (d < 0) return out;
  }
}

// --- reductions, written out ------------------------------------------------

template <class T>
T identity(spmd::reduce_op op) {
  using L = std::numeric_limits<T>;
  switch (op) {
    case spmd::reduce_op::sum:  // -0 for floats: x + -0 is x, -0 included (docs/numerics.md)
    case spmd::reduce_op::avg: return std::is_integral_v<T> ? T(0) : T(-0.0f);
    case spmd::reduce_op::product: return T(1);
    case spmd::reduce_op::max: return std::is_integral_v<T> ? L::lowest() : -L::infinity();
    case spmd::reduce_op::min: return std::is_integral_v<T> ? L::max() : L::infinity();
  }
  return T(0);
}

template <class T>
T combine(spmd::reduce_op op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case spmd::reduce_op::sum:
      case spmd::reduce_op::avg: return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
      case spmd::reduce_op::product: return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
      case spmd::reduce_op::max: return a < b ? b : a;
      case spmd::reduce_op::min: return b < a ? b : a;
    }
  } else if constexpr (std::is_same_v<T, spmd::bfloat16>) {
    const float x = a, y = b;
    switch (op) {
      case spmd::reduce_op::sum:
      case spmd::reduce_op::avg: return spmd::bfloat16{x + y};
      case spmd::reduce_op::product: return spmd::bfloat16{x * y};
      case spmd::reduce_op::max:
      case spmd::reduce_op::min: return spmd::bfloat16{combine(op, x, y)};
    }
  } else {
    // max/min as torch.maximum: NaN wins (the quiet NaN); of two zeros, max takes +0 and
    // min -0 (IEEE 754-2019), so no order of ranks changes a bit.
    const bool nan = std::isnan(a) || std::isnan(b), zeros = a == 0 && b == 0;
    switch (op) {
      case spmd::reduce_op::sum:
      case spmd::reduce_op::avg: return a + b;
      case spmd::reduce_op::product: return a * b;
      case spmd::reduce_op::max:
        if (nan) return std::numeric_limits<T>::quiet_NaN();
        if (zeros) return std::signbit(a) ? b : a;
        return a < b ? b : a;
      case spmd::reduce_op::min:
        if (nan) return std::numeric_limits<T>::quiet_NaN();
        if (zeros) return std::signbit(a) ? a : b;
        return b < a ? b : a;
    }
  }
  return a;
}

template <class T>
T div_n(T a, index_t n) {
  if constexpr (std::is_same_v<T, spmd::bfloat16>)
    return spmd::bfloat16{static_cast<float>(a) / static_cast<float>(n)};
  else
    return static_cast<T>(a / static_cast<T>(n));
}

template <class T>
T mul_n(T a, index_t n) {
  if constexpr (std::is_same_v<T, spmd::bfloat16>)
    return spmd::bfloat16{static_cast<float>(a) * static_cast<float>(n)};
  else if constexpr (std::is_integral_v<T>)
    return static_cast<T>(static_cast<std::make_unsigned_t<T>>(a) *
                          static_cast<std::make_unsigned_t<T>>(n));
  else
    return static_cast<T>(a * static_cast<T>(n));
}

// --- one step, by definition -----------------------------------------------

/// The locals after step s, from the locals before it (by mesh index).
template <class T>
std::vector<local<T>> step(const spmd::plan_step& s, const ivec& global,
                           const std::vector<local<T>>& in) {
  const auto& mesh = s.from.mesh;
  std::vector<local<T>> out(in.size());
  for (std::size_t r = 0; r < in.size(); ++r) {
    const spmd::local_box b = box(s.to, global, static_cast<index_t>(r));
    local<T>& o = out[r];
    o.shape = to_ivec(b.shape);
    o.offset = to_ivec(b.offset);
    const ivec grp = group_members(mesh, s.mesh_dims, static_cast<index_t>(r));
    index_t j_r = 0;
    while (grp[static_cast<std::size_t>(j_r)] != static_cast<index_t>(r)) ++j_r;
    const index_t n = static_cast<index_t>(grp.size());
    for (const ivec& e : elements(o.shape, o.offset)) {
      T v{};
      switch (s.kind) {
        case spmd::step_kind::all_gather:
        case spmd::step_kind::all_to_all: {
          int found = 0;
          for (index_t q : grp) {
            const local<T>& l = in[static_cast<std::size_t>(q)];
            if (inside(e, l.shape, l.offset)) {
              v = at(l, e);
              ++found;
            }
          }
          if (found != 1) throw std::logic_error("reference: element not covered exactly once");
          break;
        }
        case spmd::step_kind::all_reduce:
        case spmd::step_kind::reduce_scatter: {
          v = at(in[static_cast<std::size_t>(grp[0])], e);
          for (std::size_t k = 1; k < grp.size(); ++k)
            v = combine(s.op, v, at(in[static_cast<std::size_t>(grp[k])], e));
          if (s.op == spmd::reduce_op::avg) v = div_n(v, n);
          break;
        }
        case spmd::step_kind::chunk: v = at(in[r], e); break;
        case spmd::step_kind::partition:
          v = (s.op == spmd::reduce_op::sum || s.op == spmd::reduce_op::product) && j_r != 0
                  ? identity<T>(s.op)
                  : at(in[r], e);
          break;
        case spmd::step_kind::fill:
          if (inside(e, in[r].shape, in[r].offset))
            v = s.op == spmd::reduce_op::avg ? mul_n(at(in[r], e), n) : at(in[r], e);
          else
            v = identity<T>(s.op);
          break;
      }
      o.data.push_back(v);
    }
  }
  return out;
}

// --- states from and to the backend ----------------------------------------

template <class T>
std::vector<local<T>> from_set(const spmd::sim::local_set<T>& set, const spmd::layout_spec& spec,
                               const ivec& global) {
  std::vector<local<T>> out(static_cast<std::size_t>(set.ranks()));
  for (index_t r = 0; r < set.ranks(); ++r) {
    const spmd::local_box b = box(spec, global, r);
    local<T>& l = out[static_cast<std::size_t>(r)];
    l.shape = to_ivec(set.shape(r));
    l.offset = to_ivec(b.offset);
    l.data.assign(set.data(r), set.data(r) + set.size(r));
  }
  return out;
}

template <class T>
spmd::sim::local_set<T> to_set(const std::vector<local<T>>& ls) {
  spmd::sim::local_set<T> set(static_cast<index_t>(ls.size()));
  for (std::size_t r = 0; r < ls.size(); ++r) {
    set.assign(static_cast<index_t>(r), to_shape(ls[r].shape));
    if (!ls[r].data.empty())
      std::memcpy(set.data(static_cast<index_t>(r)), ls[r].data.data(), ls[r].data.size() * sizeof(T));
  }
  return set;
}

/// Random locals of the boxes of `spec` (every rank different, even along R dims).
template <class T>
std::vector<local<T>> random_locals(const spmd::layout_spec& spec, const ivec& global,
                                    std::mt19937_64& rng, bool integral_values = false) {
  std::vector<local<T>> out(static_cast<std::size_t>(spec.mesh_size()));
  std::uniform_int_distribution<int> small(-8, 8);
  std::uniform_real_distribution<double> real(-1.0, 1.0);
  for (std::size_t r = 0; r < out.size(); ++r) {
    const spmd::local_box b = box(spec, global, static_cast<index_t>(r));
    out[r].shape = to_ivec(b.shape);
    out[r].offset = to_ivec(b.offset);
    for (index_t i = 0; i < volume(out[r].shape); ++i) {
      if constexpr (std::is_integral_v<T>)
        out[r].data.push_back(static_cast<T>(small(rng)));
      else if (integral_values)
        out[r].data.push_back(T(small(rng)));
      else
        out[r].data.push_back(T(real(rng)));
    }
  }
  return out;
}

/// Locals of a global tensor (non-partial specs: every rank its box).
template <class T>
std::vector<local<T>> slice(const spmd::layout_spec& spec, const ivec& global,
                            const std::vector<T>& data) {
  std::vector<local<T>> out(static_cast<std::size_t>(spec.mesh_size()));
  for (std::size_t r = 0; r < out.size(); ++r) {
    const spmd::local_box b = box(spec, global, static_cast<index_t>(r));
    out[r].shape = to_ivec(b.shape);
    out[r].offset = to_ivec(b.offset);
    for (const ivec& e : elements(out[r].shape, out[r].offset)) {
      index_t i = 0;
      for (std::size_t d = 0; d < e.size(); ++d) i = i * global[d] + e[d];
      out[r].data.push_back(data[static_cast<std::size_t>(i)]);
    }
  }
  return out;
}

/// The global tensor the locals stand for: partial dims reduced in group order, the
/// block of each shard taken from coordinate 0 of the other dims.
template <class T>
std::vector<T> global_value(const spmd::layout_spec& spec, const ivec& global,
                            const std::vector<local<T>>& ls) {
  unsigned pmask = 0;
  spmd::reduce_op op = spmd::reduce_op::sum;
  for (int m = 0; m < spec.placements.size(); ++m)
    if (spec.placements[m].is_partial()) {
      pmask |= 1u << m;
      op = spec.placements[m].op;
    }
  std::vector<T> out(static_cast<std::size_t>(volume(global)));
  std::vector<bool> done(out.size(), false);
  for (std::size_t r = 0; r < ls.size(); ++r) {
    const ivec grp = group_members(spec.mesh, pmask, static_cast<index_t>(r));
    for (const ivec& e : elements(ls[r].shape, ls[r].offset)) {
      index_t i = 0;
      for (std::size_t d = 0; d < e.size(); ++d) i = i * global[d] + e[d];
      if (done[static_cast<std::size_t>(i)]) continue;
      T v = at(ls[static_cast<std::size_t>(grp[0])], e);
      for (std::size_t k = 1; k < grp.size(); ++k)
        v = combine(op, v, at(ls[static_cast<std::size_t>(grp[k])], e));
      if (op == spmd::reduce_op::avg && pmask) v = div_n(v, static_cast<index_t>(grp.size()));
      out[static_cast<std::size_t>(i)] = v;
      done[static_cast<std::size_t>(i)] = true;
    }
  }
  return out;
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

/// "" when equal (shapes and bits), else where they first differ.
template <class T>
std::string compare(const std::vector<local<T>>& want, const std::vector<local<T>>& got) {
  if (want.size() != got.size()) return "rank counts differ";
  for (std::size_t r = 0; r < want.size(); ++r) {
    if (want[r].shape != got[r].shape) return "mesh index " + std::to_string(r) + ": shapes differ";
    for (std::size_t i = 0; i < want[r].data.size(); ++i)
      if (!same_bits(want[r].data[i], got[r].data[i])) {
        std::ostringstream os;
        os << "mesh index " << r << " element " << i << ": want "
           << static_cast<double>(want[r].data[i]) << " got " << static_cast<double>(got[r].data[i]);
        return os.str();
      }
  }
  return "";
}

// --- placements as text, for messages --------------------------------------

inline std::string text(const spmd::placement& p) {
  if (p.is_replicate()) return "R";
  if (p.is_partial()) return std::string("P(") + spmd::reduce_op_name(p.op) + ")";
  return "S(" + std::to_string(p.dim) + ")[" + std::to_string(p.order) + "]";
}
inline std::string text(const spmd::layout_spec& s) {
  std::string t;
  for (int m = 0; m < s.placements.size(); ++m) t += (m ? "," : "") + text(s.placements[m]);
  return t;
}
inline std::string text(const spmd::plan_step& s) {
  return std::string(spmd::step_kind_name(s.kind)) + " G=" + std::to_string(s.mesh_dims) + " op=" +
         spmd::reduce_op_name(s.op) + " " + text(s.from) + " -> " + text(s.to);
}
inline std::string text(const ivec& v) {
  std::string t = "(";
  for (std::size_t i = 0; i < v.size(); ++i) t += (i ? "," : "") + std::to_string(v[i]);
  return t + ")";
}

}  // namespace simref
